"""Multipart uploads with a checksum algorithm (SQLite and PostgreSQL): CreateMultipartUpload
declares it (and a type), every part carries that algorithm's checksum, ListParts shows
them, CompleteMultipartUpload makes the object's checksum of the parts' (COMPOSITE, or the
FULL_OBJECT CRC) and refuses what S3 refuses; GetObject, HeadObject and UploadPartCopy
answer the checksums."""

from __future__ import annotations

import base64
import hashlib
import os
import zlib
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.gateway.conftest import Running
from tests.gateway.wire import error_code, raw_request

MiB = 1024 * 1024
# Ceph's s3-tests: three 5 MiB parts of 'A', 'B' and 'C', their checksums and the object's
CEPH_PARTS = {
    "CRC32C": (["MDaLrw==", "TH4EZg==", "Z7mBIQ=="], "xU+Krw==", "FULL_OBJECT"),
    "CRC64NVME": (["L/E4WYn8v98=", "xW1l19VobYM=", "cK5MnNaWrW4="], "i+6LR0y3eFo=", "FULL_OBJECT"),
    "SHA1": (
        [
            "iIaTCGbm+vdVjNqIMF2S0T7ibMk=",
            "LS/TJ32bAVKEwRu+sE3X7awh/lk=",
            "6DDwovUaHwrKNXDMzOGbuvj9kxI=",
        ],
        "sizjvY4eud3MrcHdZM3cQ/ol39o=-3",
        "COMPOSITE",
    ),
}


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _sha256(data: bytes) -> str:
    return _b64(hashlib.sha256(data).digest())


def _crc32(data: bytes) -> str:
    return _b64(zlib.crc32(data).to_bytes(4, "big"))


def _code(info: pytest.ExceptionInfo[ClientError]) -> str:
    return str(info.value.response["Error"]["Code"])


def _create(s3: Any, key: str, algorithm: str, kind: str | None = None) -> str:
    extra = {"ChecksumType": kind} if kind else {}
    created = s3.create_multipart_upload(
        Bucket="bkt", Key=key, ChecksumAlgorithm=algorithm, **extra
    )
    assert created["ChecksumAlgorithm"] == algorithm
    return str(created["UploadId"])


def _part(
    s3: Any, key: str, upload: str, number: int, body: bytes, **checksum: str
) -> dict[str, Any]:
    """Upload a part; the CompletedPart for it, with the checksum the gateway answered."""
    done = s3.upload_part(
        Bucket="bkt", Key=key, UploadId=upload, PartNumber=number, Body=body, **checksum
    )
    entry = {"PartNumber": number, "ETag": done["ETag"]}
    entry.update(
        {k: v for k, v in done.items() if k.startswith("Checksum") and k != "ChecksumType"}
    )
    return entry


def _complete(s3: Any, key: str, upload: str, parts: list[dict[str, Any]], **extra: Any) -> Any:
    return s3.complete_multipart_upload(
        Bucket="bkt", Key=key, UploadId=upload, MultipartUpload={"Parts": parts}, **extra
    )


@pytest.fixture
def bkt(s3: Any) -> Any:
    s3.create_bucket(Bucket="bkt")
    return s3


def test_composite_sha256(bkt: Any) -> None:
    s3 = bkt
    bodies = [os.urandom(5 * MiB), b"tail"]
    upload = _create(s3, "k", "SHA256")
    parts = [
        _part(s3, "k", upload, n, body, ChecksumAlgorithm="SHA256")
        for n, body in enumerate(bodies, start=1)
    ]
    assert [p["ChecksumSHA256"] for p in parts] == [_sha256(b) for b in bodies]
    listed = s3.list_parts(Bucket="bkt", Key="k", UploadId=upload)
    assert [p["ChecksumSHA256"] for p in listed["Parts"]] == [_sha256(b) for b in bodies]
    assert (listed["ChecksumAlgorithm"], listed["ChecksumType"]) == ("SHA256", "COMPOSITE")
    uploads = s3.list_multipart_uploads(Bucket="bkt")["Uploads"]
    assert [(u["ChecksumAlgorithm"], u["ChecksumType"]) for u in uploads] == [
        ("SHA256", "COMPOSITE")
    ]

    joined = b"".join(hashlib.sha256(b).digest() for b in bodies)
    expected = _b64(hashlib.sha256(joined).digest()) + "-2"
    done = _complete(s3, "k", upload, parts, ChecksumSHA256=expected)
    assert (done["ChecksumSHA256"], done["ChecksumType"]) == (expected, "COMPOSITE")
    head = s3.head_object(Bucket="bkt", Key="k", ChecksumMode="ENABLED")
    assert (head["ChecksumSHA256"], head["ChecksumType"]) == (expected, "COMPOSITE")
    assert "ChecksumSHA256" not in s3.head_object(Bucket="bkt", Key="k")
    # one part's checksum with partNumber; boto3 checks the part's bytes against it
    second = s3.get_object(Bucket="bkt", Key="k", PartNumber=2, ChecksumMode="ENABLED")
    assert second["ChecksumSHA256"] == _sha256(b"tail")
    assert second["Body"].read() == b"tail"
    # a retried complete answers the same
    again = _complete(s3, "k", upload, parts)
    assert again["ChecksumSHA256"] == expected


def test_full_object_crc32(bkt: Any) -> None:
    s3 = bkt
    bodies = [os.urandom(5 * MiB), os.urandom(1000)]
    upload = _create(s3, "k", "CRC32", "FULL_OBJECT")
    parts = [
        _part(s3, "k", upload, n, body, ChecksumAlgorithm="CRC32")
        for n, body in enumerate(bodies, start=1)
    ]
    whole = _crc32(b"".join(bodies))
    done = _complete(s3, "k", upload, parts, ChecksumCRC32=whole, ChecksumType="FULL_OBJECT")
    assert (done["ChecksumCRC32"], done["ChecksumType"]) == (whole, "FULL_OBJECT")
    got = s3.get_object(Bucket="bkt", Key="k", ChecksumMode="ENABLED")
    assert (got["ChecksumCRC32"], got["ChecksumType"]) == (whole, "FULL_OBJECT")
    assert got["Body"].read() == b"".join(bodies)  # boto3 checked the whole-object CRC


@pytest.mark.parametrize(
    ("algorithm", "asked"), [("CRC32C", "FULL_OBJECT"), ("CRC64NVME", None), ("SHA1", None)]
)
def test_three_parts_as_ceph_computes_them(bkt: Any, algorithm: str, asked: str | None) -> None:
    """CRC64NVME is FULL_OBJECT and SHA1 COMPOSITE by default; CRC32C FULL_OBJECT if asked."""
    s3 = bkt
    part_sums, expected, kind = CEPH_PARTS[algorithm]
    upload = _create(s3, "k", algorithm, asked)
    field = "Checksum" + algorithm
    letters = (b"A", b"B", b"C")
    parts = [
        _part(s3, "k", upload, n, letter * (5 * MiB), **{field: value})
        for n, (letter, value) in enumerate(zip(letters, part_sums, strict=True), start=1)
    ]
    done = _complete(s3, "k", upload, parts)
    assert (done[field], done["ChecksumType"]) == (expected, kind)
    head = s3.head_object(Bucket="bkt", Key="k", ChecksumMode="ENABLED")
    assert (head[field], head["ChecksumType"]) == (expected, kind)


def test_a_full_object_part_without_its_checksum_gets_it_computed(
    bkt: Any, gateway: Running
) -> None:
    s3 = bkt
    upload = _create(s3, "k", "CRC32", "FULL_OBJECT")
    legacy = gateway.client(request_checksum_calculation="when_required")  # sends none
    done = legacy.upload_part(Bucket="bkt", Key="k", UploadId=upload, PartNumber=1, Body=b"x")
    assert done["ChecksumCRC32"] == _crc32(b"x")
    # listed without its checksum: a FULL_OBJECT upload uses the stored one
    completed = _complete(s3, "k", upload, [{"PartNumber": 1, "ETag": done["ETag"]}])
    assert completed["ChecksumCRC32"] == _crc32(b"x")


def test_what_create_refuses(bkt: Any, gateway: Running) -> None:
    def create(headers: dict[str, str]) -> tuple[int, str]:
        answer = raw_request(gateway, "POST", "/bkt/k", {"uploads": ""}, headers=headers)
        return answer.status_code, error_code(answer)

    refused = (400, "InvalidRequest")
    assert create({"x-amz-checksum-algorithm": "MD4"}) == refused
    assert create({"x-amz-checksum-algorithm": ""}) == refused  # empty is not absent
    assert create({"x-amz-checksum-algorithm": "SHA1", "x-amz-checksum-type": ""}) == refused
    assert create({"x-amz-checksum-type": "COMPOSITE"}) == refused  # no algorithm
    assert create({"x-amz-checksum-algorithm": "SHA1", "x-amz-checksum-type": "WHOLE"}) == refused
    assert (
        create({"x-amz-checksum-algorithm": "SHA256", "x-amz-checksum-type": "FULL_OBJECT"})
        == refused
    )
    assert (
        create({"x-amz-checksum-algorithm": "CRC64NVME", "x-amz-checksum-type": "COMPOSITE"})
        == refused
    )
    assert bkt.list_multipart_uploads(Bucket="bkt").get("Uploads", []) == []
    made = raw_request(
        gateway, "POST", "/bkt/k", {"uploads": ""}, headers={"x-amz-checksum-algorithm": "crc32"}
    )
    assert made.headers["x-amz-checksum-algorithm"] == "CRC32"
    assert made.headers["x-amz-checksum-type"] == "COMPOSITE"


def test_parts_must_carry_the_declared_algorithm(bkt: Any, gateway: Running) -> None:
    s3 = bkt
    upload = _create(s3, "k", "SHA256")
    with pytest.raises(ClientError) as info:  # boto3's default CRC32
        s3.upload_part(Bucket="bkt", Key="k", UploadId=upload, PartNumber=1, Body=b"x")
    assert _code(info) == "InvalidRequest"
    legacy = gateway.client(request_checksum_calculation="when_required")
    with pytest.raises(ClientError) as info:  # none at all, for a COMPOSITE upload
        legacy.upload_part(Bucket="bkt", Key="k", UploadId=upload, PartNumber=1, Body=b"x")
    assert _code(info) == "InvalidRequest"
    with pytest.raises(ClientError) as info:
        s3.upload_part(
            Bucket="bkt",
            Key="k",
            UploadId=upload,
            PartNumber=1,
            Body=b"x",
            ChecksumSHA256=_sha256(b"y"),
        )
    assert _code(info) == "BadDigest"
    assert s3.list_parts(Bucket="bkt", Key="k", UploadId=upload).get("Parts", []) == []


def test_a_trailer_announced_on_a_body_that_cannot_carry_one_is_refused(
    bkt: Any, gateway: Running
) -> None:
    """x-amz-trailer on a plain (not aws-chunked) body: nothing could be verified or kept,
    so it is InvalidRequest, for a part and for an object alike."""
    upload = _create(bkt, "k", "CRC32")
    part = raw_request(
        gateway,
        "PUT",
        "/bkt/k",
        {"partNumber": "1", "uploadId": upload},
        body=b"data",
        headers={"x-amz-trailer": "x-amz-checksum-crc32"},
    )
    assert (part.status_code, error_code(part)) == (400, "InvalidRequest")
    assert bkt.list_parts(Bucket="bkt", Key="k", UploadId=upload).get("Parts", []) == []
    put = raw_request(
        gateway,
        "PUT",
        "/bkt/plain",
        body=b"data",
        headers={"x-amz-trailer": "x-amz-checksum-crc32"},
    )
    assert (put.status_code, error_code(put)) == (400, "InvalidRequest")
    assert "Contents" not in bkt.list_objects_v2(Bucket="bkt", Prefix="plain")


def test_what_complete_refuses(bkt: Any) -> None:
    s3 = bkt
    upload = _create(s3, "k", "SHA256")
    [part] = [_part(s3, "k", upload, 1, b"data", ChecksumAlgorithm="SHA256")]
    right = _b64(hashlib.sha256(hashlib.sha256(b"data").digest()).digest())

    def refused(parts: list[dict[str, Any]], **extra: Any) -> str:
        with pytest.raises(ClientError) as info:
            _complete(s3, "k", upload, parts, **extra)
        return _code(info)

    bare = {"PartNumber": 1, "ETag": part["ETag"]}
    assert refused([bare]) == "InvalidRequest"  # a COMPOSITE upload needs every part's
    assert refused([{**bare, "ChecksumSHA256": _sha256(b"other")}]) == "InvalidPart"
    assert refused([{**bare, "ChecksumCRC32": _crc32(b"data")}]) == "BadDigest"
    assert refused([part], ChecksumSHA256=_sha256(b"other") + "-1") == "BadDigest"
    assert refused([part], ChecksumSHA256="bad") == "InvalidRequest"
    assert refused([part], ChecksumCRC32=_crc32(b"data")) == "InvalidRequest"
    assert refused([part], ChecksumType="FULL_OBJECT") == "InvalidRequest"
    with pytest.raises(ClientError):
        s3.head_object(Bucket="bkt", Key="k")  # nothing was completed
    done = _complete(s3, "k", upload, [part], ChecksumSHA256=right)  # without "-1" too
    assert done["ChecksumSHA256"] == right + "-1"


def test_an_upload_without_an_algorithm_keeps_no_checksum(bkt: Any) -> None:
    s3 = bkt
    upload = str(s3.create_multipart_upload(Bucket="bkt", Key="k")["UploadId"])
    part = _part(s3, "k", upload, 1, b"data")  # boto3 sends its CRC32 all the same
    assert part["ChecksumCRC32"] == _crc32(b"data")
    listed = s3.list_parts(Bucket="bkt", Key="k", UploadId=upload)
    assert "ChecksumCRC32" not in listed["Parts"][0]
    assert "ChecksumAlgorithm" not in listed
    with pytest.raises(ClientError) as info:  # a part checksum the upload never declared
        _complete(s3, "k", upload, [part])
    assert _code(info) == "InvalidPart"
    done = _complete(s3, "k", upload, [{"PartNumber": 1, "ETag": part["ETag"]}])
    assert "ChecksumCRC32" not in done
    head = s3.head_object(Bucket="bkt", Key="k", ChecksumMode="ENABLED")
    assert not [k for k in head if k.startswith("Checksum")]


def test_upload_part_copy_computes_the_declared_algorithm(bkt: Any) -> None:
    s3 = bkt
    source = os.urandom(6 * MiB)
    s3.put_object(Bucket="bkt", Key="src", Body=source)
    upload = _create(s3, "k", "SHA1")
    copied = s3.upload_part_copy(
        Bucket="bkt",
        Key="k",
        UploadId=upload,
        PartNumber=1,
        CopySource="bkt/src",
        CopySourceRange=f"bytes=0-{5 * MiB - 1}",
    )["CopyPartResult"]
    assert copied["ChecksumSHA1"] == _b64(hashlib.sha1(source[: 5 * MiB]).digest())
    tail = _part(s3, "k", upload, 2, b"end", ChecksumAlgorithm="SHA1")
    first = {"PartNumber": 1, "ETag": copied["ETag"], "ChecksumSHA1": copied["ChecksumSHA1"]}
    done = _complete(s3, "k", upload, [first, tail])
    joined = hashlib.sha1(source[: 5 * MiB]).digest() + hashlib.sha1(b"end").digest()
    assert done["ChecksumSHA1"] == _b64(hashlib.sha1(joined).digest()) + "-2"
