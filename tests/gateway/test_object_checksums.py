"""Additional checksums kept with objects (SQLite and PostgreSQL): PutObject stores the one
its body was verified against, HeadObject and GetObject answer it with
`x-amz-checksum-mode: ENABLED` (not for a byte range), CopyObject keeps it or computes the
one `x-amz-checksum-algorithm` asks for."""

from __future__ import annotations

import base64
import hashlib
import zlib
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.gateway.conftest import Running
from tests.gateway.wire import error_code, raw_request

BODY = b"A" * 1024
SHA256 = "arcu6553sHVAiX4MjW0j7I7vD4w6R+Gz9Ok0Q9lTa+0="  # of BODY (Ceph's s3-tests)
CRC64NVME = "Qeh8oXvGiSo="  # of BODY (Ceph's s3-tests)
CRC32C_BIG = "jxTmOg=="  # of b"B" * 70_000


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _crc32(data: bytes) -> str:
    return _b64(zlib.crc32(data).to_bytes(4, "big"))


def _code(info: pytest.ExceptionInfo[ClientError]) -> str:
    return str(info.value.response["Error"]["Code"])


def test_a_put_checksum_is_answered_when_asked_for(s3: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    put = s3.put_object(Bucket="bkt", Key="k", Body=BODY, ChecksumSHA256=SHA256)
    assert put["ChecksumSHA256"] == SHA256
    assert put["ChecksumType"] == "FULL_OBJECT"
    plain = s3.head_object(Bucket="bkt", Key="k")
    assert "ChecksumSHA256" not in plain
    assert "ChecksumType" not in plain
    head = s3.head_object(Bucket="bkt", Key="k", ChecksumMode="ENABLED")
    assert (head["ChecksumSHA256"], head["ChecksumType"]) == (SHA256, "FULL_OBJECT")
    got = s3.get_object(Bucket="bkt", Key="k", ChecksumMode="ENABLED")
    assert got["ChecksumSHA256"] == SHA256
    assert got["Body"].read() == BODY  # boto3 checked the body against it too


@pytest.mark.parametrize("size", [10, 70_000])  # in the metabase row, and in a file
def test_the_default_trailing_crc32_is_kept(s3: Any, size: int) -> None:
    """Current boto3 sends a CRC32 trailer with every upload and asks for the checksum
    with every GetObject (and checks the body against it)."""
    s3.create_bucket(Bucket="bkt")
    body = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    s3.put_object(Bucket="bkt", Key="k", Body=body)
    got = s3.get_object(Bucket="bkt", Key="k")
    assert got["ChecksumCRC32"] == _crc32(body)
    assert got["Body"].read() == body


def test_crc64nvme_is_kept(s3: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    s3.put_object(Bucket="bkt", Key="k", Body=BODY, ChecksumCRC64NVME=CRC64NVME)
    head = s3.head_object(Bucket="bkt", Key="k", ChecksumMode="ENABLED")
    assert head["ChecksumCRC64NVME"] == CRC64NVME


def test_no_checksum_for_a_range_or_an_object_without_one(s3: Any, gateway: Running) -> None:
    s3.create_bucket(Bucket="bkt")
    s3.put_object(Bucket="bkt", Key="k", Body=BODY, ChecksumSHA256=SHA256)
    ranged = s3.get_object(Bucket="bkt", Key="k", Range="bytes=0-9", ChecksumMode="ENABLED")
    assert "ChecksumSHA256" not in ranged
    assert "ChecksumType" not in ranged
    assert ranged["Body"].read() == BODY[:10]
    legacy = gateway.client(request_checksum_calculation="when_required")
    legacy.put_object(Bucket="bkt", Key="none", Body=BODY)
    head = s3.head_object(Bucket="bkt", Key="none", ChecksumMode="ENABLED")
    assert not [k for k in head if k.startswith("Checksum")]
    # part 1 of an object written in one piece is the whole object, checksum and all
    part = s3.head_object(Bucket="bkt", Key="k", PartNumber=1, ChecksumMode="ENABLED")
    assert part["ChecksumSHA256"] == SHA256


def test_a_bad_checksum_mode_is_refused(s3: Any, gateway: Running) -> None:
    s3.create_bucket(Bucket="bkt")
    s3.put_object(Bucket="bkt", Key="k", Body=BODY)
    for mode in ("ON", ""):  # an empty value is refused, not read as absent
        answer = raw_request(gateway, "GET", "/bkt/k", headers={"x-amz-checksum-mode": mode})
        assert (answer.status_code, error_code(answer)) == (400, "InvalidRequest")


def test_checksums_that_do_not_hold_keep_nothing(s3: Any, gateway: Running) -> None:
    s3.create_bucket(Bucket="bkt")
    # a well-formed checksum of other bytes: BadDigest; a malformed one: InvalidRequest (S3)
    with pytest.raises(ClientError) as info:
        s3.put_object(Bucket="bkt", Key="k", Body=BODY, ChecksumSHA256=_b64(b"\0" * 32))
    assert _code(info) == "BadDigest"
    with pytest.raises(ClientError) as info:
        s3.put_object(Bucket="bkt", Key="k", Body=BODY, ChecksumSHA256="bad")
    assert _code(info) == "InvalidRequest"
    # two checksums of one body: S3 takes one
    two = {"x-amz-checksum-crc32": _crc32(BODY), "x-amz-checksum-sha256": SHA256}
    answer = raw_request(gateway, "PUT", "/bkt/k", body=BODY, headers=two)
    assert (answer.status_code, error_code(answer)) == (400, "InvalidRequest")
    assert s3.list_objects_v2(Bucket="bkt").get("KeyCount") == 0


def test_a_copy_keeps_the_checksum_or_computes_the_one_asked_for(s3: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    big = b"B" * 70_000  # stored in a file; BODY lives in its metabase row
    s3.put_object(Bucket="bkt", Key="small", Body=BODY, ChecksumSHA256=SHA256)
    s3.put_object(Bucket="bkt", Key="big", Body=big)  # boto3's trailing CRC32
    kept = s3.copy_object(Bucket="bkt", Key="c1", CopySource="bkt/small")
    assert kept["CopyObjectResult"]["ChecksumSHA256"] == SHA256
    assert kept["CopyObjectResult"]["ChecksumType"] == "FULL_OBJECT"
    head = s3.head_object(Bucket="bkt", Key="c1", ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == SHA256
    for source, data in (("small", BODY), ("big", big)):
        new = s3.copy_object(
            Bucket="bkt", Key=f"{source}-sha1", CopySource=f"bkt/{source}", ChecksumAlgorithm="SHA1"
        )
        sha1 = _b64(hashlib.sha1(data).digest())
        assert new["CopyObjectResult"]["ChecksumSHA1"] == sha1
        head = s3.head_object(Bucket="bkt", Key=f"{source}-sha1", ChecksumMode="ENABLED")
        assert (head["ChecksumSHA1"], head["ChecksumType"]) == (sha1, "FULL_OBJECT")
        assert "ChecksumCRC32" not in head
        assert "ChecksumSHA256" not in head
    copied = s3.copy_object(
        Bucket="bkt", Key="big-c", CopySource="bkt/big", ChecksumAlgorithm="CRC32C"
    )
    assert copied["CopyObjectResult"]["ChecksumCRC32C"] == CRC32C_BIG


def test_a_copy_with_an_unknown_algorithm_is_refused(s3: Any, gateway: Running) -> None:
    s3.create_bucket(Bucket="bkt")
    s3.put_object(Bucket="bkt", Key="k", Body=BODY)
    for algorithm in ("MD4", ""):
        answer = raw_request(
            gateway,
            "PUT",
            "/bkt/copy",
            headers={"x-amz-copy-source": "/bkt/k", "x-amz-checksum-algorithm": algorithm},
        )
        assert (answer.status_code, error_code(answer)) == (400, "InvalidRequest")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="bkt")["Contents"]] == ["k"]
