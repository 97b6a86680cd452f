"""RenameObject through boto3 against a live gateway: the data stays where it is (no copy),
the source is gone, the conditional headers, the refusals, restricted keys, and ripple's
prefix rename (`x-ripple-rename-prefix: true`, added with a botocore event hook)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from botocore.exceptions import ClientError

from ripple.identity.users import create_key
from tests.gateway.conftest import Running
from tests.gateway.wire import FILE_SIZE

BUCKET = "photos"


def code_of(caught: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    response = caught.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


def _files(gateway: Running) -> list[Path]:
    root = gateway.services.data.root
    return sorted(p for p in root.glob("??/??/*") if p.is_file())


def _keys(s3: Any, prefix: str = "") -> list[str]:
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return [o["Key"] for o in listed.get("Contents", [])]


@contextmanager
def prefix_mode(s3: Any) -> Iterator[None]:
    """RenameObject requests of `s3` carry `x-ripple-rename-prefix: true` in the block."""

    def add_header(request: Any, **_: Any) -> None:
        request.headers["x-ripple-rename-prefix"] = "true"

    s3.meta.events.register("before-sign.s3.RenameObject", add_header)
    try:
        yield
    finally:
        s3.meta.events.unregister("before-sign.s3.RenameObject", add_header)


@pytest.fixture
def bucket(s3: Any) -> Any:
    s3.create_bucket(Bucket=BUCKET)
    return s3


def test_rename_keeps_the_data_file_and_metadata(bucket: Any, gateway: Running) -> None:
    s3 = bucket
    data = os.urandom(FILE_SIZE)
    s3.put_object(
        Bucket=BUCKET,
        Key="in/a.bin",
        Body=data,
        ContentType="application/x-test",
        Metadata={"origin": "camera"},
        Tagging="colour=red",
    )
    before = s3.head_object(Bucket=BUCKET, Key="in/a.bin")
    [file] = _files(gateway)

    answer = s3.rename_object(Bucket=BUCKET, Key="out/b.bin", RenameSource=f"{BUCKET}/in/a.bin")

    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert _files(gateway) == [file]  # the same file: nothing copied, nothing freed
    got = s3.get_object(Bucket=BUCKET, Key="out/b.bin")
    assert got["Body"].read() == data
    assert got["ETag"] == before["ETag"]
    assert got["ContentType"] == "application/x-test"
    assert got["Metadata"] == {"origin": "camera"}
    assert got["LastModified"] == before["LastModified"]
    assert got["TagCount"] == 1
    with pytest.raises(ClientError) as caught:
        s3.head_object(Bucket=BUCKET, Key="in/a.bin")
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert _keys(s3) == ["out/b.bin"]


def test_the_source_forms(bucket: Any) -> None:
    s3 = bucket
    s3.put_object(Bucket=BUCKET, Key="red flower.jpg", Body=b"small")
    s3.rename_object(
        Bucket=BUCKET, Key="blue/flower.jpg", RenameSource=quote(f"/{BUCKET}/red flower.jpg")
    )
    s3.rename_object(Bucket=BUCKET, Key="ünïcode", RenameSource=f"/{BUCKET}/blue%2Fflower.jpg")
    assert s3.get_object(Bucket=BUCKET, Key="ünïcode")["Body"].read() == b"small"
    assert _keys(s3) == ["ünïcode"]


def test_overwriting_a_destination_frees_its_data(bucket: Any, gateway: Running) -> None:
    s3 = bucket
    s3.put_object(Bucket=BUCKET, Key="a", Body=os.urandom(FILE_SIZE))
    [source_file] = _files(gateway)
    s3.put_object(Bucket=BUCKET, Key="b", Body=os.urandom(FILE_SIZE))
    s3.rename_object(Bucket=BUCKET, Key="b", RenameSource=f"{BUCKET}/a")
    assert _files(gateway) == [source_file]
    assert _keys(s3) == ["b"]


@pytest.mark.parametrize(
    ("source", "code", "status"),
    [
        ("photos/absent", "NoSuchKey", 404),
        ("other/a", "InvalidRequest", 400),
        ("photos", "InvalidArgument", 400),
        ("photos/same", "InvalidRequest", 400),
        ("photos/dir/", "InvalidRequest", 400),
    ],
)
def test_refusals(bucket: Any, source: str, code: str, status: int) -> None:
    s3 = bucket
    s3.put_object(Bucket=BUCKET, Key="same", Body=b"x")
    s3.put_object(Bucket=BUCKET, Key="dir/", Body=b"")
    destination = "same" if source == "photos/same" else "new"
    with pytest.raises(ClientError) as caught:
        s3.rename_object(Bucket=BUCKET, Key=destination, RenameSource=source)
    assert code_of(caught) == (code, status)
    assert _keys(s3) == ["dir/", "same"]


def test_versioned_buckets_are_refused(bucket: Any) -> None:
    s3 = bucket
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=BUCKET, Key="a", Body=b"x")
    with pytest.raises(ClientError) as caught:
        s3.rename_object(Bucket=BUCKET, Key="b", RenameSource=f"{BUCKET}/a")
    assert code_of(caught) == ("InvalidRequest", 400)
    assert "versioned" in caught.value.response["Error"]["Message"]
    assert _keys(s3) == ["a"]


def test_conditional_headers(bucket: Any) -> None:
    s3 = bucket
    s3.put_object(Bucket=BUCKET, Key="a", Body=b"one")
    etag = s3.put_object(Bucket=BUCKET, Key="dst", Body=b"old")["ETag"]
    modified = s3.head_object(Bucket=BUCKET, Key="a")["LastModified"]
    refused: list[dict[str, Any]] = [
        {"DestinationIfNoneMatch": "*"},
        {"DestinationIfMatch": '"0123"'},
        {"DestinationIfUnmodifiedSince": modified - timedelta(days=1)},
        {"SourceIfMatch": '"0123"'},
        {"SourceIfNoneMatch": "*"},
        {"SourceIfModifiedSince": modified + timedelta(days=1)},
        {"SourceIfUnmodifiedSince": modified - timedelta(days=1)},
    ]
    for conditions in refused:
        with pytest.raises(ClientError) as caught:
            s3.rename_object(Bucket=BUCKET, Key="dst", RenameSource=f"{BUCKET}/a", **conditions)
        assert code_of(caught) == ("PreconditionFailed", 412), conditions
    assert _keys(s3) == ["a", "dst"]

    s3.rename_object(
        Bucket=BUCKET,
        Key="dst",
        RenameSource=f"{BUCKET}/a",
        DestinationIfMatch=etag,
        SourceIfModifiedSince=modified - timedelta(days=1),
    )
    assert s3.get_object(Bucket=BUCKET, Key="dst")["Body"].read() == b"one"
    s3.rename_object(
        Bucket=BUCKET, Key="fresh", RenameSource=f"{BUCKET}/dst", DestinationIfNoneMatch="*"
    )
    assert _keys(s3) == ["fresh"]


def test_restricted_keys_need_delete_on_the_source(gateway: Running) -> None:
    s3 = gateway.client()
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="a", Body=b"x")
    s3.put_object(Bucket=BUCKET, Key="mine/b", Body=b"y")
    db, data_dir = gateway.services.db, gateway.data_dir
    no_delete, secret = create_key(db, data_dir, "alice", denied=["delete"])
    limited = gateway.client(no_delete.access_key_id, secret)
    with pytest.raises(ClientError) as caught:
        limited.rename_object(Bucket=BUCKET, Key="c", RenameSource=f"{BUCKET}/a")
    assert code_of(caught) == ("AccessDenied", 403)
    prefixed, secret = create_key(db, data_dir, "alice", bucket=BUCKET, prefix="mine/")
    limited = gateway.client(prefixed.access_key_id, secret)
    with pytest.raises(ClientError) as caught:  # the source is outside its prefix
        limited.rename_object(Bucket=BUCKET, Key="mine/c", RenameSource=f"{BUCKET}/a")
    assert code_of(caught) == ("AccessDenied", 403)
    with pytest.raises(ClientError) as caught:  # the destination is outside its prefix
        limited.rename_object(Bucket=BUCKET, Key="c", RenameSource=f"{BUCKET}/mine/b")
    assert code_of(caught) == ("AccessDenied", 403)
    assert _keys(s3) == ["a", "mine/b"]
    limited.rename_object(Bucket=BUCKET, Key="mine/c", RenameSource=f"{BUCKET}/mine/b")
    assert _keys(s3) == ["a", "mine/c"]


# --- prefix rename ---------------------------------------------------------------------


def test_prefix_rename(bucket: Any, gateway: Running) -> None:
    s3 = bucket
    big = os.urandom(FILE_SIZE)
    s3.put_object(Bucket=BUCKET, Key="logs/2026/a", Body=b"aaa")
    s3.put_object(Bucket=BUCKET, Key="logs/2026/deep/b", Body=big)
    s3.put_object(Bucket=BUCKET, Key="logs/2027/c", Body=b"ccc")
    files = _files(gateway)

    with prefix_mode(s3):
        s3.rename_object(Bucket=BUCKET, Key="archive/2026/", RenameSource=f"{BUCKET}/logs/2026/")

    assert _keys(s3) == ["archive/2026/a", "archive/2026/deep/b", "logs/2027/c"]
    assert _files(gateway) == files
    assert s3.get_object(Bucket=BUCKET, Key="archive/2026/deep/b")["Body"].read() == big
    assert s3.get_object(Bucket=BUCKET, Key="archive/2026/a")["Body"].read() == b"aaa"


def test_prefix_rename_refusals(bucket: Any, gateway: Running) -> None:
    s3 = bucket
    for key in ("src/a", "src/b", "src/c", "taken/x"):
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"x")
    before = _keys(s3)
    cases: list[tuple[str, str, dict[str, Any], tuple[str, int], str]] = [
        ("new/", "src/", {}, ("InvalidRequest", 400), "holds 3 keys"),  # the limit is 2
        ("taken/", "src/", {}, ("DestinationPrefixNotEmpty", 409), "taken/x"),
        ("src/sub/", "src/", {}, ("InvalidRequest", 400), "overlap"),
        ("new", "src/", {}, ("InvalidRequest", 400), "ending with '/'"),
        ("new/", "nothing/", {}, ("NoSuchKey", 404), "nothing/"),
        ("new/", "src/", {"DestinationIfNoneMatch": "*"}, ("InvalidRequest", 400), "if-none"),
    ]
    with prefix_mode(s3):
        for destination, source, extra, expected, said in cases:
            gateway.services.max_rename_keys = 2 if said == "holds 3 keys" else 3
            with pytest.raises(ClientError) as caught:
                s3.rename_object(
                    Bucket=BUCKET, Key=destination, RenameSource=f"{BUCKET}/{source}", **extra
                )
            assert code_of(caught) == expected, destination
            assert said in caught.value.response["Error"]["Message"]
            assert _keys(s3) == before
        s3.rename_object(Bucket=BUCKET, Key="new/", RenameSource=f"{BUCKET}/src/")
    assert _keys(s3) == ["new/a", "new/b", "new/c", "taken/x"]


def test_a_retry_with_the_same_client_token_is_answered_again(s3: Any) -> None:
    """boto3 retries a rename whose answer it lost: the same x-amz-client-token and
    request answer 200 again without doing anything (the source is gone by then); the
    token for another rename is refused; a new token renames again."""
    s3.create_bucket(Bucket="tokens")
    s3.put_object(Bucket="tokens", Key="a", Body=b"hello")
    first = s3.rename_object(Bucket="tokens", Key="b", RenameSource="tokens/a", ClientToken="t-1")
    again = s3.rename_object(Bucket="tokens", Key="b", RenameSource="tokens/a", ClientToken="t-1")
    assert first["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert again["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert s3.get_object(Bucket="tokens", Key="b")["Body"].read() == b"hello"
    with pytest.raises(ClientError) as e:
        s3.rename_object(Bucket="tokens", Key="c", RenameSource="tokens/b", ClientToken="t-1")
    assert e.value.response["Error"]["Code"] == "IdempotencyParameterMismatch"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="tokens")["Contents"]] == ["b"]
    with pytest.raises(ClientError) as e:  # without a remembered token: the source is gone
        s3.rename_object(Bucket="tokens", Key="b", RenameSource="tokens/a", ClientToken="t-2")
    assert e.value.response["Error"]["Code"] == "NoSuchKey"
    s3.rename_object(Bucket="tokens", Key="c", RenameSource="tokens/b", ClientToken="t-3")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="tokens")["Contents"]] == ["c"]
