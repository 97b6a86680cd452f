"""CopyObject through boto3 against a live gateway (SQLite and PostgreSQL): metadata
directives, source versions, copy-source conditions, copying onto itself, file-backed and
inline sources, and the data of replaced versions being freed."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from ripple.gateway import copy_object as copy_object_module
from ripple.identity.users import create_key
from tests.gateway.conftest import Running
from tests.gateway.wire import FILE_SIZE


def _code(info: pytest.ExceptionInfo[ClientError]) -> str:
    return str(info.value.response["Error"]["Code"])


def _status(info: pytest.ExceptionInfo[ClientError]) -> int:
    return int(info.value.response["ResponseMetadata"]["HTTPStatusCode"])


def _etag(data: bytes) -> str:
    return f'"{hashlib.md5(data).hexdigest()}"'


def _object_files(gateway: Running) -> list[Path]:
    return sorted(p for p in (gateway.data_dir / "objects").glob("??/??/*") if p.is_file())


@pytest.fixture
def buckets(s3: Any) -> Any:
    s3.create_bucket(Bucket="src")
    s3.create_bucket(Bucket="dst")
    return s3


@pytest.mark.parametrize("size", [10, FILE_SIZE], ids=["inline", "file"])
def test_copy_keeps_data_and_metadata(buckets: Any, gateway: Running, size: int) -> None:
    s3 = buckets
    data = os.urandom(size)
    s3.put_object(
        Bucket="src",
        Key="a",
        Body=data,
        ContentType="image/png",
        Metadata={"colour": "blue"},
        CacheControl="max-age=60",
    )
    files = _object_files(gateway)
    copied = s3.copy_object(Bucket="dst", Key="b", CopySource={"Bucket": "src", "Key": "a"})
    result = copied["CopyObjectResult"]
    assert result["ETag"] == _etag(data)
    assert result["LastModified"] is not None
    assert "VersionId" not in copied
    assert "CopySourceVersionId" not in copied

    got = s3.get_object(Bucket="dst", Key="b")
    assert got["Body"].read() == data
    assert got["ETag"] == _etag(data)
    assert got["ContentType"] == "image/png"
    assert got["Metadata"] == {"colour": "blue"}
    assert got["CacheControl"] == "max-age=60"
    # a file-backed copy has its own file; an inline one none
    after = _object_files(gateway)
    assert len(after) == len(files) + (1 if size > 1024 else 0)
    s3.delete_object(Bucket="src", Key="a")
    assert s3.get_object(Bucket="dst", Key="b")["Body"].read() == data


def test_replace_metadata(buckets: Any) -> None:
    s3 = buckets
    s3.put_object(Bucket="src", Key="a", Body=b"x", ContentType="text/plain", Metadata={"a": "1"})
    s3.copy_object(
        Bucket="dst",
        Key="b",
        CopySource="src/a",
        MetadataDirective="REPLACE",
        ContentType="text/html",
        Metadata={"b": "2"},
    )
    head = s3.head_object(Bucket="dst", Key="b")
    assert head["ContentType"] == "text/html"
    assert head["Metadata"] == {"b": "2"}
    # COPY ignores the metadata sent with the request
    s3.copy_object(Bucket="dst", Key="c", CopySource="src/a", Metadata={"ignored": "yes"})
    assert s3.head_object(Bucket="dst", Key="c")["Metadata"] == {"a": "1"}


def test_unknown_metadata_directive(buckets: Any) -> None:
    s3 = buckets
    s3.put_object(Bucket="src", Key="a", Body=b"x")

    def bad_directive(request: Any, **_: Any) -> None:
        request.headers["x-amz-metadata-directive"] = "MERGE"

    s3.meta.events.register("before-sign.s3.CopyObject", bad_directive)
    with pytest.raises(ClientError) as info:
        s3.copy_object(Bucket="dst", Key="b", CopySource="src/a")
    assert _code(info) == "InvalidArgument"


def test_copy_a_source_version(s3: Any) -> None:
    s3.create_bucket(Bucket="ver")
    s3.put_bucket_versioning(Bucket="ver", VersioningConfiguration={"Status": "Enabled"})
    old = s3.put_object(Bucket="ver", Key="a", Body=b"old " * 500)["VersionId"]
    s3.put_object(Bucket="ver", Key="a", Body=b"new")
    copied = s3.copy_object(
        Bucket="ver", Key="b", CopySource={"Bucket": "ver", "Key": "a", "VersionId": old}
    )
    assert copied["CopySourceVersionId"] == old
    assert copied["VersionId"] not in ("", old)
    assert s3.get_object(Bucket="ver", Key="b")["Body"].read() == b"old " * 500
    # restoring an old version onto its own key is allowed: the version names a change
    restored = s3.copy_object(
        Bucket="ver", Key="a", CopySource={"Bucket": "ver", "Key": "a", "VersionId": old}
    )
    assert s3.get_object(Bucket="ver", Key="a")["Body"].read() == b"old " * 500
    assert restored["VersionId"] != old
    assert len(s3.list_object_versions(Bucket="ver", Prefix="a")["Versions"]) == 3


def test_missing_sources(buckets: Any) -> None:
    s3 = buckets
    with pytest.raises(ClientError) as info:
        s3.copy_object(Bucket="dst", Key="b", CopySource="src/nothing")
    assert _code(info) == "NoSuchKey"
    with pytest.raises(ClientError) as info:
        s3.copy_object(Bucket="dst", Key="b", CopySource="nobucket/a")
    assert _code(info) == "NoSuchBucket"
    s3.put_object(Bucket="src", Key="a", Body=b"x")
    with pytest.raises(ClientError) as info:
        s3.copy_object(
            Bucket="dst", Key="b", CopySource={"Bucket": "src", "Key": "a", "VersionId": "zz"}
        )
    assert _code(info) == "InvalidArgument"
    with pytest.raises(ClientError) as info:
        s3.copy_object(Bucket="nobucket", Key="b", CopySource="src/a")
    assert _code(info) == "NoSuchBucket"


def test_copy_source_conditions(buckets: Any) -> None:
    s3 = buckets
    put = s3.put_object(Bucket="src", Key="a", Body=b"x")
    with pytest.raises(ClientError) as info:
        s3.copy_object(Bucket="dst", Key="b", CopySource="src/a", CopySourceIfMatch='"0000"')
    assert _code(info) == "PreconditionFailed"
    assert _status(info) == 412
    with pytest.raises(ClientError) as info:
        s3.copy_object(Bucket="dst", Key="b", CopySource="src/a", CopySourceIfNoneMatch=put["ETag"])
    assert _status(info) == 412
    with pytest.raises(ClientError) as info:
        s3.head_object(Bucket="dst", Key="b")  # nothing was copied
    assert _status(info) == 404
    s3.copy_object(Bucket="dst", Key="b", CopySource="src/a", CopySourceIfMatch=put["ETag"])
    assert s3.get_object(Bucket="dst", Key="b")["Body"].read() == b"x"


def test_copy_onto_itself(buckets: Any) -> None:
    s3 = buckets
    s3.put_object(Bucket="src", Key="a", Body=b"x" * 4096, Metadata={"v": "1"})
    with pytest.raises(ClientError) as info:
        s3.copy_object(Bucket="src", Key="a", CopySource="src/a")
    assert _code(info) == "InvalidRequest"
    s3.copy_object(
        Bucket="src", Key="a", CopySource="src/a", MetadataDirective="REPLACE", Metadata={"v": "2"}
    )
    got = s3.get_object(Bucket="src", Key="a")
    assert got["Metadata"] == {"v": "2"}
    assert got["Body"].read() == b"x" * 4096


def test_overwritten_versions_data_is_freed(buckets: Any, gateway: Running) -> None:
    s3 = buckets
    s3.put_object(Bucket="src", Key="a", Body=os.urandom(FILE_SIZE))
    [source_file] = _object_files(gateway)
    s3.put_object(Bucket="dst", Key="b", Body=os.urandom(FILE_SIZE))
    [replaced] = set(_object_files(gateway)) - {source_file}
    s3.copy_object(Bucket="dst", Key="b", CopySource="src/a")
    after = _object_files(gateway)
    assert len(after) == 2  # the replaced version's file is gone, the copy's is there
    assert source_file in after
    assert replaced not in after
    # copying an inline object over a file-backed one frees the file too
    s3.put_object(Bucket="src", Key="small", Body=b"tiny")
    s3.copy_object(Bucket="dst", Key="b", CopySource="src/small")
    assert _object_files(gateway) == [source_file]
    assert s3.get_object(Bucket="dst", Key="b")["Body"].read() == b"tiny"


def test_self_copy_in_an_unversioned_bucket_frees_the_old_file(
    buckets: Any, gateway: Running
) -> None:
    s3 = buckets
    data = os.urandom(FILE_SIZE)
    s3.put_object(Bucket="src", Key="a", Body=data)
    before = _object_files(gateway)
    s3.copy_object(Bucket="src", Key="a", CopySource="src/a", MetadataDirective="REPLACE")
    after = _object_files(gateway)
    assert len(after) == 1
    assert after != before
    assert s3.get_object(Bucket="src", Key="a")["Body"].read() == data


def test_object_lock_on_the_destination(s3: Any) -> None:
    s3.create_bucket(Bucket="src")
    s3.create_bucket(Bucket="locked", ObjectLockEnabledForBucket=True)
    s3.put_object(Bucket="src", Key="a", Body=b"x")
    copied = s3.copy_object(
        Bucket="locked", Key="b", CopySource="src/a", ObjectLockLegalHoldStatus="ON"
    )
    assert s3.head_object(Bucket="locked", Key="b")["ObjectLockLegalHoldStatus"] == "ON"
    with pytest.raises(ClientError) as info:
        s3.delete_object(Bucket="locked", Key="b", VersionId=copied["VersionId"])
    assert _code(info) == "AccessDenied"
    with pytest.raises(ClientError) as info:
        s3.copy_object(Bucket="src", Key="c", CopySource="src/a", ObjectLockLegalHoldStatus="ON")
    assert _code(info) == "InvalidRequest"


def test_copy_source_forms(buckets: Any) -> None:
    s3 = buckets
    key = "dir/a key+with&odd=chars ü"
    s3.put_object(Bucket="src", Key=key, Body=b"odd")
    s3.copy_object(Bucket="dst", Key="b", CopySource={"Bucket": "src", "Key": key})
    assert s3.get_object(Bucket="dst", Key="b")["Body"].read() == b"odd"

    def header(value: str) -> Any:
        def set_source(request: Any, **_: Any) -> None:
            del request.headers["x-amz-copy-source"]  # setting appends another header
            request.headers["x-amz-copy-source"] = value

        return set_source

    for value, expected in (
        ("/src/dir/a%20key%2Bwith%26odd%3Dchars%20%C3%BC", None),
        ("src", "InvalidArgument"),
        ("/src/", "InvalidArgument"),
    ):
        handler = header(value)
        s3.meta.events.register("before-sign.s3.CopyObject", handler)
        try:
            if expected is None:
                s3.copy_object(Bucket="dst", Key="c", CopySource="src/placeholder")
                assert s3.get_object(Bucket="dst", Key="c")["Body"].read() == b"odd"
            else:
                with pytest.raises(ClientError) as info:
                    s3.copy_object(Bucket="dst", Key="c", CopySource="src/placeholder")
                assert _code(info) == expected
        finally:
            s3.meta.events.unregister("before-sign.s3.CopyObject", handler)


def test_copy_needs_read_on_the_source(gateway: Running) -> None:
    s3 = gateway.client()
    s3.create_bucket(Bucket="src")
    s3.create_bucket(Bucket="dst")
    s3.put_object(Bucket="src", Key="a", Body=b"secret")
    key, secret = create_key(gateway.services.db, gateway.data_dir, "alice", bucket="dst")
    limited = gateway.client(key.access_key_id, secret)
    with pytest.raises(ClientError) as info:
        limited.copy_object(Bucket="dst", Key="b", CopySource="src/a")
    assert _code(info) == "AccessDenied"
    with pytest.raises(ClientError) as info:
        s3.head_object(Bucket="dst", Key="b")
    assert _status(info) == 404


def _during_copy(monkeypatch: pytest.MonkeyPatch, before: Any = None, after: Any = None) -> None:
    """Run `before`/`after` around the first file copy a CopyObject makes (in the
    gateway's worker thread): a change to the source racing the copy."""
    original = copy_object_module.copy_file
    calls = []

    def racing(*args: Any) -> None:
        calls.append(args)
        if len(calls) == 1 and before is not None:
            before()
        original(*args)
        if len(calls) == 1 and after is not None:
            after()

    monkeypatch.setattr(copy_object_module, "copy_file", racing)


def test_source_replaced_during_the_copy(
    buckets: Any, gateway: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `null` version replaced between the look-up and the commit: the metabase refuses
    the stale copy and the gateway copies the new version, data and metadata alike."""
    s3 = buckets
    old, new = os.urandom(FILE_SIZE), os.urandom(FILE_SIZE + 1000)
    s3.put_object(Bucket="src", Key="a", Body=old)
    other = gateway.client()
    _during_copy(monkeypatch, after=lambda: other.put_object(Bucket="src", Key="a", Body=new))
    copied = s3.copy_object(Bucket="dst", Key="b", CopySource="src/a")
    assert copied["CopyObjectResult"]["ETag"] == _etag(new)
    got = s3.get_object(Bucket="dst", Key="b")
    assert (got["ETag"], got["Body"].read()) == (_etag(new), new)
    assert len(_object_files(gateway)) == 2  # the source's and the copy's: no stale copy


def test_a_versioned_source_cannot_change_under_the_copy(
    s3: Any, gateway: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3.create_bucket(Bucket="ver")
    s3.put_bucket_versioning(Bucket="ver", VersioningConfiguration={"Status": "Enabled"})
    old, new = os.urandom(FILE_SIZE), os.urandom(FILE_SIZE + 1000)
    first = s3.put_object(Bucket="ver", Key="a", Body=old)["VersionId"]
    other = gateway.client()
    _during_copy(monkeypatch, after=lambda: other.put_object(Bucket="ver", Key="a", Body=new))
    copied = s3.copy_object(Bucket="ver", Key="b", CopySource="ver/a")
    assert copied["CopySourceVersionId"] == first  # the version resolved, whose data it has
    got = s3.get_object(Bucket="ver", Key="b")
    assert (got["ETag"], got["Body"].read()) == (_etag(old), old)


def test_source_deleted_during_the_copy(
    buckets: Any, gateway: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3 = buckets
    s3.put_object(Bucket="src", Key="a", Body=os.urandom(FILE_SIZE))
    other = gateway.client()
    _during_copy(monkeypatch, before=lambda: other.delete_object(Bucket="src", Key="a"))
    with pytest.raises(ClientError) as info:
        s3.copy_object(Bucket="dst", Key="b", CopySource="src/a")
    assert _code(info) == "NoSuchKey"
    assert _object_files(gateway) == []
    assert list((gateway.data_dir / "objects" / "tmp").iterdir()) == []
