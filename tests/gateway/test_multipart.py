"""Multipart uploads through boto3 against a live gateway (SQLite and PostgreSQL): create,
upload parts (and part copies), list parts and uploads, complete, abort, and the errors
S3 answers for parts that are missing, out of order or too small."""

from __future__ import annotations

import base64
import fcntl
import hashlib
import io
import os
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from tests.gateway.conftest import Running
from tests.gateway.wire import FILE_SIZE, error_code, put_held_midway, raw_request
from tests.waiting import wait_for

MiB = 1024 * 1024


def _code(info: pytest.ExceptionInfo[ClientError]) -> str:
    return str(info.value.response["Error"]["Code"])


def _status(info: pytest.ExceptionInfo[ClientError]) -> int:
    return int(info.value.response["ResponseMetadata"]["HTTPStatusCode"])


def _md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def _multipart_etag(parts: list[bytes]) -> str:
    """What S3 answers for a multipart object, computed independently of the gateway."""
    joined = b"".join(hashlib.md5(p).digest() for p in parts)
    return f'"{hashlib.md5(joined).hexdigest()}-{len(parts)}"'


def _parts_dir(gateway: Running, upload_id: str) -> Path:
    return gateway.data_dir / "objects" / "parts" / upload_id


def _upload(s3: Any, bucket: str, key: str, parts: list[bytes], **create: Any) -> str:
    upload_id = str(s3.create_multipart_upload(Bucket=bucket, Key=key, **create)["UploadId"])
    for number, body in enumerate(parts, start=1):
        etag = s3.upload_part(
            Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body
        )["ETag"]
        assert etag == f'"{_md5(body)}"'
    return upload_id


def _complete(s3: Any, bucket: str, key: str, upload_id: str, parts: list[tuple[int, str]]) -> Any:
    return s3.complete_multipart_upload(
        Bucket=bucket,
        Key=key,
        UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in parts]},
    )


def _all(parts: list[bytes]) -> list[tuple[int, str]]:
    return [(n, f'"{_md5(p)}"') for n, p in enumerate(parts, start=1)]


@pytest.fixture
def three() -> list[bytes]:
    return [os.urandom(5 * MiB), os.urandom(5 * MiB), os.urandom(1024)]


def test_three_parts_make_one_object(s3: Any, gateway: Running, three: list[bytes]) -> None:
    s3.create_bucket(Bucket="bkt")
    upload_id = _upload(
        s3, "bkt", "big", three, ContentType="text/csv", Metadata={"colour": "blue"}
    )
    assert _parts_dir(gateway, upload_id).is_dir()
    with pytest.raises(ClientError) as info:
        s3.head_object(Bucket="bkt", Key="big")  # invisible until completed
    assert _status(info) == 404

    done = _complete(s3, "bkt", "big", upload_id, _all(three))
    assert done["ETag"] == _multipart_etag(three)
    assert (done["Bucket"], done["Key"]) == ("bkt", "big")
    assert done["Location"].endswith("/bkt/big")
    assert "VersionId" not in done

    got = s3.get_object(Bucket="bkt", Key="big")
    assert got["Body"].read() == b"".join(three)
    assert got["ETag"] == _multipart_etag(three)
    assert got["ContentLength"] == 10 * MiB + 1024
    assert got["ContentType"] == "text/csv"  # as given at create
    assert got["Metadata"] == {"colour": "blue"}
    assert not _parts_dir(gateway, upload_id).exists()  # parts removed once completed
    assert s3.list_multipart_uploads(Bucket="bkt").get("Uploads", []) == []
    with pytest.raises(ClientError) as info:
        s3.list_parts(Bucket="bkt", Key="big", UploadId=upload_id)
    assert _code(info) == "NoSuchUpload"


def test_a_complete_retried_after_it_succeeded_answers_the_same(
    s3: Any, three: list[bytes]
) -> None:
    s3.create_bucket(Bucket="bkt")
    s3.put_bucket_versioning(Bucket="bkt", VersioningConfiguration={"Status": "Enabled"})
    upload_id = _upload(s3, "bkt", "k", three)
    first = _complete(s3, "bkt", "k", upload_id, _all(three))
    again = _complete(s3, "bkt", "k", upload_id, _all(three))
    assert again["ETag"] == first["ETag"] == _multipart_etag(three)
    assert again["VersionId"] == first["VersionId"]
    assert (again["Bucket"], again["Key"], again["Location"]) == ("bkt", "k", first["Location"])
    versions = s3.list_object_versions(Bucket="bkt")["Versions"]
    assert [v["VersionId"] for v in versions] == [first["VersionId"]]  # nothing new
    assert s3.get_object(Bucket="bkt", Key="k")["Body"].read() == b"".join(three)


def test_a_complete_retried_after_its_object_is_gone_is_no_such_upload(
    s3: Any, three: list[bytes]
) -> None:
    s3.create_bucket(Bucket="bkt")
    upload_id = _upload(s3, "bkt", "k", three)
    _complete(s3, "bkt", "k", upload_id, _all(three))
    s3.put_object(Bucket="bkt", Key="k", Body=b"newer")  # replaces the completed object
    with pytest.raises(ClientError) as info:
        _complete(s3, "bkt", "k", upload_id, _all(three))
    assert _code(info) == "NoSuchUpload"
    assert s3.get_object(Bucket="bkt", Key="k")["Body"].read() == b"newer"


def test_completing_over_an_object_frees_its_data(
    s3: Any, gateway: Running, three: list[bytes]
) -> None:
    s3.create_bucket(Bucket="bkt")
    s3.put_object(Bucket="bkt", Key="k", Body=os.urandom(FILE_SIZE))  # stored as a file
    files = _object_files(gateway)
    assert len(files) == 1
    upload_id = _upload(s3, "bkt", "k", three)
    _complete(s3, "bkt", "k", upload_id, _all(three))
    after = _object_files(gateway)
    assert len(after) == 1
    assert after != files
    assert after[0].name == upload_id  # the object's data is the upload's stream


def _object_files(gateway: Running) -> list[Path]:
    root = gateway.data_dir / "objects"
    return sorted(p for p in root.glob("??/??/*") if p.is_file())


def test_versioned_bucket_gets_a_version(s3: Any, three: list[bytes]) -> None:
    s3.create_bucket(Bucket="ver")
    s3.put_bucket_versioning(Bucket="ver", VersioningConfiguration={"Status": "Enabled"})
    first = s3.put_object(Bucket="ver", Key="k", Body=b"old")["VersionId"]
    upload_id = _upload(s3, "ver", "k", three)
    done = _complete(s3, "ver", "k", upload_id, _all(three))
    version = done["VersionId"]
    assert version
    assert version != first
    head = s3.head_object(Bucket="ver", Key="k", VersionId=version)
    assert head["ETag"] == _multipart_etag(three)
    versions = s3.list_object_versions(Bucket="ver")["Versions"]
    assert {v["VersionId"] for v in versions} == {first, version}
    assert s3.get_object(Bucket="ver", Key="k", VersionId=first)["Body"].read() == b"old"


def test_list_parts_pages(s3: Any, three: list[bytes]) -> None:
    s3.create_bucket(Bucket="bkt")
    upload_id = _upload(s3, "bkt", "k", three)
    listed = s3.list_parts(Bucket="bkt", Key="k", UploadId=upload_id)
    assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in listed["Parts"]] == [
        (n, f'"{_md5(p)}"', len(p)) for n, p in enumerate(three, start=1)
    ]
    assert listed["IsTruncated"] is False
    assert listed["StorageClass"] == "STANDARD"
    assert listed["Owner"]["ID"] == listed["Initiator"]["ID"] != ""
    assert all(p["LastModified"] is not None for p in listed["Parts"])

    page = s3.list_parts(Bucket="bkt", Key="k", UploadId=upload_id, MaxParts=2)
    assert [p["PartNumber"] for p in page["Parts"]] == [1, 2]
    assert page["IsTruncated"] is True
    assert page["NextPartNumberMarker"] == 2
    rest = s3.list_parts(Bucket="bkt", Key="k", UploadId=upload_id, PartNumberMarker=2)
    assert [p["PartNumber"] for p in rest["Parts"]] == [3]
    assert rest["IsTruncated"] is False


def test_uploading_a_part_again_replaces_it(s3: Any, gateway: Running) -> None:
    s3.create_bucket(Bucket="bkt")
    upload_id = _upload(s3, "bkt", "k", [b"first"])
    etag = s3.upload_part(Bucket="bkt", Key="k", UploadId=upload_id, PartNumber=1, Body=b"second")
    parts = s3.list_parts(Bucket="bkt", Key="k", UploadId=upload_id)["Parts"]
    assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in parts] == [(1, etag["ETag"], 6)]
    assert len(list(_parts_dir(gateway, upload_id).glob("00001.*"))) == 1
    with pytest.raises(ClientError) as info:
        _complete(s3, "bkt", "k", upload_id, [(1, f'"{_md5(b"first")}"')])
    assert _code(info) == "InvalidPart"
    _complete(s3, "bkt", "k", upload_id, [(1, etag["ETag"])])
    assert s3.get_object(Bucket="bkt", Key="k")["Body"].read() == b"second"


def test_list_multipart_uploads(s3: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    ids = {}
    for key in ("photos/2024/a", "photos/2024/b", "photos/x", "video/y", "z"):
        ids[key] = s3.create_multipart_upload(Bucket="bkt", Key=key)["UploadId"]
    again = s3.create_multipart_upload(Bucket="bkt", Key="z")["UploadId"]

    listed = s3.list_multipart_uploads(Bucket="bkt")
    assert [(u["Key"], u["UploadId"]) for u in listed["Uploads"]] == [
        *((k, ids[k]) for k in ("photos/2024/a", "photos/2024/b", "photos/x", "video/y", "z")),
        ("z", again),
    ]
    assert listed["IsTruncated"] is False
    assert listed["Uploads"][0]["StorageClass"] == "STANDARD"
    assert listed["Uploads"][0]["Initiated"] is not None

    rolled = s3.list_multipart_uploads(Bucket="bkt", Prefix="photos/", Delimiter="/")
    assert [u["Key"] for u in rolled["Uploads"]] == ["photos/x"]
    assert [p["Prefix"] for p in rolled["CommonPrefixes"]] == ["photos/2024/"]
    assert (rolled["Prefix"], rolled["Delimiter"]) == ("photos/", "/")

    page = s3.list_multipart_uploads(Bucket="bkt", MaxUploads=5)
    assert page["IsTruncated"] is True
    assert (page["NextKeyMarker"], page["NextUploadIdMarker"]) == ("z", ids["z"])
    rest = s3.list_multipart_uploads(
        Bucket="bkt", KeyMarker=page["NextKeyMarker"], UploadIdMarker=page["NextUploadIdMarker"]
    )
    assert [(u["Key"], u["UploadId"]) for u in rest["Uploads"]] == [("z", again)]

    paginator = s3.get_paginator("list_multipart_uploads")
    seen = [
        u["UploadId"]
        for p in paginator.paginate(Bucket="bkt", PaginationConfig={"PageSize": 2})
        for u in p.get("Uploads", [])
    ]
    assert seen == [u["UploadId"] for u in listed["Uploads"]]


def test_list_multipart_uploads_url_encoded(s3: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    s3.create_multipart_upload(Bucket="bkt", Key="a b/ü+c")
    listed = s3.list_multipart_uploads(Bucket="bkt", EncodingType="url")
    assert listed["EncodingType"] == "url"
    assert [u["Key"] for u in listed["Uploads"]] == ["a+b/%C3%BC%2Bc"]
    with pytest.raises(ClientError) as info:
        s3.list_multipart_uploads(Bucket="bkt", EncodingType="base64")
    assert _code(info) == "InvalidArgument"


def test_abort(s3: Any, gateway: Running) -> None:
    s3.create_bucket(Bucket="bkt")
    upload_id = _upload(s3, "bkt", "k", [b"one", b"two"])
    assert len(list(_parts_dir(gateway, upload_id).iterdir())) == 2
    response = s3.abort_multipart_upload(Bucket="bkt", Key="k", UploadId=upload_id)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert not _parts_dir(gateway, upload_id).exists()
    calls: list[Callable[[], Any]] = [
        lambda: s3.list_parts(Bucket="bkt", Key="k", UploadId=upload_id),
        lambda: s3.upload_part(Bucket="bkt", Key="k", UploadId=upload_id, PartNumber=1, Body=b"x"),
        lambda: s3.abort_multipart_upload(Bucket="bkt", Key="k", UploadId=upload_id),
        lambda: _complete(s3, "bkt", "k", upload_id, [(1, f'"{_md5(b"one")}"')]),
    ]
    for call in calls:
        with pytest.raises(ClientError) as info:
            call()
        assert _code(info) == "NoSuchUpload"
        assert _status(info) == 404
    assert not _parts_dir(gateway, upload_id).exists()
    assert s3.list_multipart_uploads(Bucket="bkt").get("Uploads", []) == []


@pytest.mark.parametrize("upload_id", ["0" * 32, "not-an-upload-id"])
def test_unknown_upload(s3: Any, upload_id: str) -> None:
    s3.create_bucket(Bucket="bkt")
    other = s3.create_multipart_upload(Bucket="bkt", Key="other")["UploadId"]
    with pytest.raises(ClientError) as info:
        s3.upload_part(Bucket="bkt", Key="k", UploadId=upload_id, PartNumber=1, Body=b"x")
    assert _code(info) == "NoSuchUpload"
    with pytest.raises(ClientError) as info:
        s3.list_parts(Bucket="bkt", Key="k", UploadId=other)  # another key's upload
    assert _code(info) == "NoSuchUpload"


def test_part_numbers_out_of_range(s3: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    upload_id = s3.create_multipart_upload(Bucket="bkt", Key="k")["UploadId"]
    for number in (0, 10001):
        with pytest.raises(ClientError) as info:
            s3.upload_part(Bucket="bkt", Key="k", UploadId=upload_id, PartNumber=number, Body=b"x")
        assert _code(info) == "InvalidArgument"


def test_parts_out_of_order(s3: Any, three: list[bytes]) -> None:
    s3.create_bucket(Bucket="bkt")
    upload_id = _upload(s3, "bkt", "k", three)
    parts = _all(three)
    with pytest.raises(ClientError) as info:
        _complete(s3, "bkt", "k", upload_id, [parts[1], parts[0], parts[2]])
    assert _code(info) == "InvalidPartOrder"
    with pytest.raises(ClientError) as info:
        _complete(s3, "bkt", "k", upload_id, [parts[0], parts[2], parts[1]])
    assert _code(info) == "InvalidPartOrder"
    # the upload is still there to complete properly
    assert len(s3.list_parts(Bucket="bkt", Key="k", UploadId=upload_id)["Parts"]) == 3


def test_a_part_listed_twice_counts_once_as_its_last_listing(s3: Any) -> None:
    """A client that uploaded part 1 again while its first upload was running lists both
    ETags; the part holds the later upload, which is the one the last listing names."""
    s3.create_bucket(Bucket="bkt")
    upload_id = _upload(s3, "bkt", "k", [b"first"])
    again = s3.upload_part(Bucket="bkt", Key="k", UploadId=upload_id, PartNumber=1, Body=b"again")
    done = _complete(s3, "bkt", "k", upload_id, [(1, f'"{_md5(b"first")}"'), (1, again["ETag"])])
    assert done["ETag"] == _multipart_etag([b"again"])
    assert s3.get_object(Bucket="bkt", Key="k")["Body"].read() == b"again"
    # listed the other way round, the last listing names an upload the part no longer holds
    upload_id = _upload(s3, "bkt", "j", [b"first"])
    again = s3.upload_part(Bucket="bkt", Key="j", UploadId=upload_id, PartNumber=1, Body=b"again")
    with pytest.raises(ClientError) as info:
        _complete(s3, "bkt", "j", upload_id, [(1, again["ETag"]), (1, f'"{_md5(b"first")}"')])
    assert _code(info) == "InvalidPart"


def test_wrong_or_missing_part(s3: Any, three: list[bytes]) -> None:
    s3.create_bucket(Bucket="bkt")
    upload_id = _upload(s3, "bkt", "k", three)
    parts = _all(three)
    with pytest.raises(ClientError) as info:
        _complete(s3, "bkt", "k", upload_id, [parts[0], (2, f'"{"0" * 32}"'), parts[2]])
    assert _code(info) == "InvalidPart"
    with pytest.raises(ClientError) as info:
        _complete(s3, "bkt", "k", upload_id, [*parts, (4, parts[0][1])])
    assert _code(info) == "InvalidPart"
    with pytest.raises(ClientError) as info:
        s3.head_object(Bucket="bkt", Key="k")
    assert _status(info) == 404


def test_small_part_before_the_last(s3: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    parts = [os.urandom(5 * MiB), os.urandom(1024), os.urandom(5 * MiB)]
    upload_id = _upload(s3, "bkt", "k", parts)
    with pytest.raises(ClientError) as info:
        _complete(s3, "bkt", "k", upload_id, _all(parts))
    assert _code(info) == "EntityTooSmall"
    # the small part may be the last one
    done = _complete(s3, "bkt", "k", upload_id, _all(parts)[:2])
    assert done["ETag"] == _multipart_etag(parts[:2])


def test_a_single_small_part(s3: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    upload_id = _upload(s3, "bkt", "k", [b"tiny"])
    done = _complete(s3, "bkt", "k", upload_id, _all([b"tiny"]))
    assert done["ETag"] == _multipart_etag([b"tiny"])
    assert s3.get_object(Bucket="bkt", Key="k")["Body"].read() == b"tiny"


def test_complete_with_the_whole_objects_checksum_header(s3: Any) -> None:
    """Its x-amz-checksum-* headers describe the object, not the XML document."""
    s3.create_bucket(Bucket="bkt")
    upload_id = _upload(s3, "bkt", "k", [b"tiny"])
    crc = base64.b64encode(zlib.crc32(b"tiny").to_bytes(4, "big")).decode()
    done = s3.complete_multipart_upload(
        Bucket="bkt",
        Key="k",
        UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": f'"{_md5(b"tiny")}"'}]},
        ChecksumCRC32=crc,
    )
    assert done["ETag"] == _multipart_etag([b"tiny"])


def test_upload_part_copy_with_a_range(s3: Any) -> None:
    s3.create_bucket(Bucket="src")
    s3.create_bucket(Bucket="dst")
    source = os.urandom(6 * MiB)
    s3.put_object(Bucket="src", Key="big", Body=source)
    s3.put_object(Bucket="src", Key="small", Body=b"inline data")  # stored in its row
    upload_id = s3.create_multipart_upload(Bucket="dst", Key="k")["UploadId"]
    first = s3.upload_part_copy(
        Bucket="dst",
        Key="k",
        UploadId=upload_id,
        PartNumber=1,
        CopySource={"Bucket": "src", "Key": "big"},
        CopySourceRange=f"bytes=0-{5 * MiB - 1}",
    )["CopyPartResult"]
    assert first["ETag"] == f'"{_md5(source[: 5 * MiB])}"'
    assert first["LastModified"] is not None
    second = s3.upload_part_copy(
        Bucket="dst",
        Key="k",
        UploadId=upload_id,
        PartNumber=2,
        CopySource="src/small",
        CopySourceRange="bytes=7-10",
    )["CopyPartResult"]
    assert second["ETag"] == f'"{_md5(b"data")}"'
    with pytest.raises(ClientError) as info:
        s3.upload_part_copy(
            Bucket="dst",
            Key="k",
            UploadId=upload_id,
            PartNumber=3,
            CopySource="src/small",
            CopySourceRange="bytes=5-100",
        )
    assert _code(info) == "InvalidRange"
    with pytest.raises(ClientError) as info:
        s3.upload_part_copy(
            Bucket="dst",
            Key="k",
            UploadId=upload_id,
            PartNumber=3,
            CopySource="src/small",
            CopySourceIfMatch='"0000"',
        )
    assert _code(info) == "PreconditionFailed"
    done = _complete(s3, "dst", "k", upload_id, [(1, first["ETag"]), (2, second["ETag"])])
    assert done["ETag"] == _multipart_etag([source[: 5 * MiB], b"data"])
    assert s3.get_object(Bucket="dst", Key="k")["Body"].read() == source[: 5 * MiB] + b"data"


def test_upload_part_copy_of_a_version(s3: Any) -> None:
    s3.create_bucket(Bucket="ver")
    s3.put_bucket_versioning(Bucket="ver", VersioningConfiguration={"Status": "Enabled"})
    old = s3.put_object(Bucket="ver", Key="src", Body=b"old data")["VersionId"]
    s3.put_object(Bucket="ver", Key="src", Body=b"new data")
    upload_id = s3.create_multipart_upload(Bucket="ver", Key="k")["UploadId"]
    copied = s3.upload_part_copy(
        Bucket="ver",
        Key="k",
        UploadId=upload_id,
        PartNumber=1,
        CopySource={"Bucket": "ver", "Key": "src", "VersionId": old},
    )
    assert copied["CopySourceVersionId"] == old
    _complete(s3, "ver", "k", upload_id, [(1, copied["CopyPartResult"]["ETag"])])
    assert s3.get_object(Bucket="ver", Key="k")["Body"].read() == b"old data"


def test_boto3_managed_transfer(s3: Any, tmp_path: Path) -> None:
    """What high-level clients do: upload_fileobj splits into 5 MiB parts, uploaded in
    parallel, then completes; download_fileobj reads it back."""
    s3.create_bucket(Bucket="bkt")
    data = os.urandom(12 * MiB)
    config = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)
    s3.upload_fileobj(io.BytesIO(data), "bkt", "managed", Config=config)
    head = s3.head_object(Bucket="bkt", Key="managed")
    chunks = [data[i : i + 5 * MiB] for i in range(0, len(data), 5 * MiB)]
    assert head["ETag"] == _multipart_etag(chunks)
    assert head["ContentLength"] == len(data)
    out = io.BytesIO()
    s3.download_fileobj("bkt", "managed", out, Config=config)
    assert out.getvalue() == data
    assert s3.list_multipart_uploads(Bucket="bkt").get("Uploads", []) == []


def test_object_lock_given_at_create(s3: Any) -> None:
    s3.create_bucket(Bucket="plain")
    with pytest.raises(ClientError) as info:
        s3.create_multipart_upload(Bucket="plain", Key="k", ObjectLockLegalHoldStatus="ON")
    assert _code(info) == "InvalidRequest"
    s3.create_bucket(Bucket="locked", ObjectLockEnabledForBucket=True)
    upload_id = _upload(s3, "locked", "k", [b"held"], ObjectLockLegalHoldStatus="ON")
    done = _complete(s3, "locked", "k", upload_id, _all([b"held"]))
    head = s3.head_object(Bucket="locked", Key="k")
    assert head["ObjectLockLegalHoldStatus"] == "ON"
    with pytest.raises(ClientError) as info:
        s3.delete_object(Bucket="locked", Key="k", VersionId=done["VersionId"])
    assert _code(info) == "AccessDenied"


def test_concurrent_completes_queue(s3: Any, gateway: Running, three: list[bytes]) -> None:
    """Two completes of one upload at once (a client retrying a slow complete): one makes
    the object, the other finds the upload completed, answers the same and leaves the
    object's data alone."""
    s3.create_bucket(Bucket="bkt")
    upload_id = _upload(s3, "bkt", "k", three)
    outcomes: list[str] = []

    def complete() -> None:
        try:
            done = _complete(gateway.client(), "bkt", "k", upload_id, _all(three))
            outcomes.append(done["ETag"])
        except ClientError as e:
            outcomes.append(str(e.response["Error"]["Code"]))

    with (_parts_dir(gateway, upload_id) / "complete.lock").open("ab") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        threads = [threading.Thread(target=complete) for _ in range(2)]
        for thread in threads:
            thread.start()
        time.sleep(0.5)
        assert all(t.is_alive() for t in threads)  # both wait for the lock
        assert outcomes == []
    for thread in threads:
        thread.join(30)
    assert outcomes == [_multipart_etag(three)] * 2
    got = s3.get_object(Bucket="bkt", Key="k")
    assert got["Body"].read() == b"".join(three)
    assert got["ETag"] == _multipart_etag(three)


def _flock_waiters(path: Path) -> int:
    """How many flock requests wait for the lock on `path` (/proc/locks: blocked ones are
    the lines with "->")."""
    inode = os.stat(path).st_ino
    lines = Path("/proc/locks").read_text().splitlines()
    return sum(1 for line in lines if "->" in line and line.split()[6].endswith(f":{inode}"))


def test_completes_waiting_for_the_lock_hold_up_no_other_request(
    s3: Any, gateway: Running, three: list[bytes]
) -> None:
    """40 completes of one upload wait for its lock (more than the gateway's threads of
    either kind): one waits on the file lock, the others wait their turn without a thread,
    so other requests (a large PUT's body is hashed and written on the data threads) are
    still answered, and every complete then answers the same."""
    s3.create_bucket(Bucket="bkt")
    upload_id = _upload(s3, "bkt", "k", three)
    s3.put_object(Bucket="bkt", Key="other", Body=b"still served")
    outcomes: list[str] = []

    def complete() -> None:
        client = gateway.client(read_timeout=120)
        done = _complete(client, "bkt", "k", upload_id, _all(three))
        outcomes.append(done["ETag"])

    lock = _parts_dir(gateway, upload_id) / "complete.lock"
    large = os.urandom(3 * MiB)
    with lock.open("ab") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        threads = [threading.Thread(target=complete) for _ in range(40)]
        for thread in threads:
            thread.start()
        wait_for(lambda: _flock_waiters(lock) == 1, what="a complete waiting for the lock")
        patient = gateway.client(read_timeout=20)
        assert patient.get_object(Bucket="bkt", Key="other")["Body"].read() == b"still served"
        patient.put_object(Bucket="bkt", Key="large", Body=large)
        assert outcomes == []
        assert _flock_waiters(lock) == 1
    for thread in threads:
        thread.join(120)
    assert outcomes == [_multipart_etag(three)] * 40
    assert s3.get_object(Bucket="bkt", Key="large")["Body"].read() == large


def test_deleting_a_bucket_aborts_its_uploads_in_progress(s3: Any, gateway: Running) -> None:
    s3.create_bucket(Bucket="bkt")
    first = _upload(s3, "bkt", "a", [b"part one"])
    second = _upload(s3, "bkt", "b/c", [b"part two", b"more"])
    assert _parts_dir(gateway, first).is_dir()
    answered = s3.delete_bucket(Bucket="bkt")
    assert answered["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert not _parts_dir(gateway, first).exists()
    assert not _parts_dir(gateway, second).exists()
    with pytest.raises(ClientError) as info:
        s3.list_multipart_uploads(Bucket="bkt")
    assert _code(info) == "NoSuchBucket"
    s3.create_bucket(Bucket="bkt")  # the name is free and the new bucket starts bare
    assert s3.list_multipart_uploads(Bucket="bkt").get("Uploads", []) == []


def test_a_bucket_with_an_object_is_not_deleted_and_keeps_its_uploads(
    s3: Any, gateway: Running
) -> None:
    s3.create_bucket(Bucket="bkt")
    upload_id = _upload(s3, "bkt", "a", [b"part"])
    s3.put_object(Bucket="bkt", Key="kept", Body=b"x")
    with pytest.raises(ClientError) as info:
        s3.delete_bucket(Bucket="bkt")
    assert _code(info) == "BucketNotEmpty"
    assert _parts_dir(gateway, upload_id).is_dir()
    listed = s3.list_multipart_uploads(Bucket="bkt")["Uploads"]
    assert [u["UploadId"] for u in listed] == [upload_id]


def test_a_part_of_a_multipart_object_is_read_by_its_number(s3: Any, three: list[bytes]) -> None:
    s3.create_bucket(Bucket="bkt")
    upload_id = _upload(s3, "bkt", "big", three)
    with pytest.raises(ClientError) as info:  # not an object until completed
        s3.get_object(Bucket="bkt", Key="big", PartNumber=1)
    assert _code(info) == "NoSuchKey"
    _complete(s3, "bkt", "big", upload_id, _all(three))
    start = 0
    for number, part in enumerate(three, start=1):
        got = s3.get_object(Bucket="bkt", Key="big", PartNumber=number)
        assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert got["Body"].read() == part
        assert got["ContentLength"] == len(part)
        assert got["PartsCount"] == 3
        assert got["ETag"] == _multipart_etag(three)  # the object's, as S3 answers
        total = sum(len(p) for p in three)
        assert got["ContentRange"] == f"bytes {start}-{start + len(part) - 1}/{total}"
        head = s3.head_object(Bucket="bkt", Key="big", PartNumber=number)
        assert (head["ContentLength"], head["PartsCount"]) == (len(part), 3)
        start += len(part)
    for method in (s3.get_object, s3.head_object):
        with pytest.raises(ClientError) as info:
            method(Bucket="bkt", Key="big", PartNumber=4)
        assert _status(info) == 416
        if method is s3.get_object:
            assert _code(info) == "InvalidPartNumber"
    whole = s3.get_object(Bucket="bkt", Key="big")
    assert "PartsCount" not in whole  # only for a part, as S3
    assert whole["Body"].read() == b"".join(three)


def test_part_one_of_an_object_written_in_one_piece_is_the_whole_object(s3: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    etag = s3.put_object(Bucket="bkt", Key="k", Body=b"body")["ETag"]
    got = s3.get_object(Bucket="bkt", Key="k", PartNumber=1)
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert (got["Body"].read(), got["ETag"], got["ContentRange"]) == (b"body", etag, "bytes 0-3/4")
    assert "PartsCount" not in got
    with pytest.raises(ClientError) as info:
        s3.get_object(Bucket="bkt", Key="k", PartNumber=2)
    assert (_status(info), _code(info)) == (416, "InvalidPartNumber")


def test_part_numbers_are_bounded_whole_numbers(s3: Any, gateway: Running) -> None:
    s3.create_bucket(Bucket="bkt")
    s3.put_object(Bucket="bkt", Key="k", Body=b"body")
    for bad in ("0", "10001", "-1", "1.5", "x", "²", "9" * 5000):
        answer = raw_request(gateway, "GET", "/bkt/k", {"partNumber": bad})
        assert answer.status_code == 400, bad
        assert error_code(answer) == "InvalidArgument"
    both = raw_request(
        gateway, "GET", "/bkt/k", {"partNumber": "1"}, headers={"Range": "bytes=0-1"}
    )
    assert (both.status_code, error_code(both)) == (400, "InvalidRequest")


def test_an_upload_id_is_only_the_spelling_the_gateway_gave_out(s3: Any, gateway: Running) -> None:
    s3.create_bucket(Bucket="bkt")
    upload_id = _upload(s3, "bkt", "k", [b"part"])
    dashed = str(uuid.UUID(hex=upload_id))
    for other in (dashed, "{" + upload_id + "}", "urn:uuid:" + dashed, upload_id.upper()):
        answer = raw_request(gateway, "GET", "/bkt/k", {"uploadId": other})
        assert (answer.status_code, error_code(answer)) == (404, "NoSuchUpload"), other
    assert s3.list_parts(Bucket="bkt", Key="k", UploadId=upload_id)["Parts"][0]["PartNumber"] == 1


def test_a_part_whose_bucket_is_deleted_while_it_uploads_leaves_nothing(
    s3: Any, gateway: Running
) -> None:
    """DeleteBucket aborts the upload (and removes its parts) while a part's body is still
    arriving; the part, placed afterwards, finds no bucket and removes itself."""
    s3.create_bucket(Bucket="bkt")
    upload_id = s3.create_multipart_upload(Bucket="bkt", Key="k")["UploadId"]
    path = f"/bkt/k?partNumber=1&uploadId={upload_id}"
    with put_held_midway(gateway, path, {}) as answered:
        s3.delete_bucket(Bucket="bkt")
    spool = gateway.data_dir / "objects" / "tmp"
    assert answered[0].status_code == 404
    assert b"<Code>NoSuchBucket</Code>" in answered[0].content
    assert not _parts_dir(gateway, upload_id).exists()
    assert not any(spool.iterdir())
