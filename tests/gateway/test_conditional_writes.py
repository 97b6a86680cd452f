"""Conditional writes through boto3 against a live gateway: `If-None-Match` and `If-Match`
on PutObject, on CopyObject's destination and on CompleteMultipartUpload; 412 when the
condition does not hold as the request arrives, 404 for If-Match on no object, and 409
ConditionalRequestConflict when a concurrent write wins while the body is uploading."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.gateway.conftest import Running
from tests.gateway.wire import put_held_midway
from tests.waiting import wait_for


def failure(caught: pytest.ExceptionInfo[ClientError]) -> tuple[int, str]:
    response = caught.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def body_of(s3: Any, key: str, bucket: str = "bkt") -> bytes:
    return bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())


@pytest.fixture
def bucket(s3: Any) -> str:
    s3.create_bucket(Bucket="bkt")
    return "bkt"


def test_if_none_match_star_writes_only_a_new_key(s3: Any, bucket: str) -> None:
    first = s3.put_object(Bucket=bucket, Key="k", Body=b"one", IfNoneMatch="*")
    with pytest.raises(ClientError) as caught:
        s3.put_object(Bucket=bucket, Key="k", Body=b"two", IfNoneMatch="*")
    assert failure(caught) == (412, "PreconditionFailed")
    assert body_of(s3, "k") == b"one"
    assert s3.head_object(Bucket=bucket, Key="k")["ETag"] == first["ETag"]


def test_if_none_match_names_etags_too(s3: Any, bucket: str) -> None:
    etag = s3.put_object(Bucket=bucket, Key="k", Body=b"one")["ETag"]
    with pytest.raises(ClientError) as caught:
        s3.put_object(Bucket=bucket, Key="k", Body=b"two", IfNoneMatch=etag)
    assert failure(caught) == (412, "PreconditionFailed")
    s3.put_object(Bucket=bucket, Key="k", Body=b"three", IfNoneMatch='"0123abc"')
    assert body_of(s3, "k") == b"three"


def test_if_match_writes_only_over_that_etag(s3: Any, bucket: str) -> None:
    etag = s3.put_object(Bucket=bucket, Key="k", Body=b"one")["ETag"]
    with pytest.raises(ClientError) as caught:
        s3.put_object(Bucket=bucket, Key="k", Body=b"two", IfMatch='"00000000"')
    assert failure(caught) == (412, "PreconditionFailed")
    assert body_of(s3, "k") == b"one"
    s3.put_object(Bucket=bucket, Key="k", Body=b"two", IfMatch=etag)  # compare and swap
    assert body_of(s3, "k") == b"two"
    with pytest.raises(ClientError) as caught:  # the ETag is no longer the object's
        s3.put_object(Bucket=bucket, Key="k", Body=b"three", IfMatch=etag)
    assert failure(caught) == (412, "PreconditionFailed")
    s3.put_object(Bucket=bucket, Key="k", Body=b"four", IfMatch="*")
    assert body_of(s3, "k") == b"four"


def test_if_match_on_a_key_without_an_object_is_no_such_key(s3: Any, bucket: str) -> None:
    for if_match in ("*", '"d41d8cd98f00b204e9800998ecf8427e"'):
        with pytest.raises(ClientError) as caught:
            s3.put_object(Bucket=bucket, Key="k", Body=b"x", IfMatch=if_match)
        assert failure(caught) == (404, "NoSuchKey")
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0


def test_a_delete_marker_is_no_object(s3: Any, bucket: str) -> None:
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=bucket, Key="k", Body=b"one")
    s3.delete_object(Bucket=bucket, Key="k")
    with pytest.raises(ClientError) as caught:
        s3.put_object(Bucket=bucket, Key="k", Body=b"x", IfMatch="*")
    assert failure(caught) == (404, "NoSuchKey")
    s3.put_object(Bucket=bucket, Key="k", Body=b"two", IfNoneMatch="*")
    assert body_of(s3, "k") == b"two"


def test_copy_object_judges_its_destination(s3: Any, bucket: str) -> None:
    s3.put_object(Bucket=bucket, Key="src", Body=b"source")
    target = s3.put_object(Bucket=bucket, Key="dst", Body=b"target")["ETag"]
    source = {"Bucket": bucket, "Key": "src"}
    with pytest.raises(ClientError) as caught:
        s3.copy_object(Bucket=bucket, Key="dst", CopySource=source, IfNoneMatch="*")
    assert failure(caught) == (412, "PreconditionFailed")
    with pytest.raises(ClientError) as caught:
        s3.copy_object(Bucket=bucket, Key="dst", CopySource=source, IfMatch='"0000"')
    assert failure(caught) == (412, "PreconditionFailed")
    assert body_of(s3, "dst") == b"target"
    s3.copy_object(Bucket=bucket, Key="dst", CopySource=source, IfMatch=target)
    assert body_of(s3, "dst") == b"source"
    s3.copy_object(Bucket=bucket, Key="new", CopySource=source, IfNoneMatch="*")
    assert body_of(s3, "new") == b"source"


def _multipart(s3: Any, bucket: str, key: str, body: bytes) -> tuple[str, list[dict[str, Any]]]:
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    etag = s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=body)
    return upload_id, [{"PartNumber": 1, "ETag": etag["ETag"]}]


def test_complete_multipart_upload_judges_the_key(s3: Any, bucket: str) -> None:
    upload_id, parts = _multipart(s3, bucket, "k", b"multipart")
    s3.put_object(Bucket=bucket, Key="k", Body=b"meanwhile")
    with pytest.raises(ClientError) as caught:
        s3.complete_multipart_upload(
            Bucket=bucket,
            Key="k",
            UploadId=upload_id,
            MultipartUpload={"Parts": parts},
            IfNoneMatch="*",
        )
    assert failure(caught) == (412, "PreconditionFailed")
    assert body_of(s3, "k") == b"meanwhile"
    current = s3.head_object(Bucket=bucket, Key="k")["ETag"]
    done = s3.complete_multipart_upload(  # the upload is still there to complete
        Bucket=bucket,
        Key="k",
        UploadId=upload_id,
        MultipartUpload={"Parts": parts},
        IfMatch=current,
    )
    assert body_of(s3, "k") == b"multipart"
    assert done["ETag"].endswith('-1"')
    again = s3.complete_multipart_upload(  # a retry: the object it finds is its own
        Bucket=bucket,
        Key="k",
        UploadId=upload_id,
        MultipartUpload={"Parts": parts},
        IfNoneMatch="*",
    )
    assert again["ETag"] == done["ETag"]


def test_a_conditional_put_that_loses_a_race_is_a_conflict(
    gateway: Running, s3: Any, bucket: str
) -> None:
    """The condition holds when the PUT arrives; another write of the key commits while its
    body is still uploading: S3 answers 409 ConditionalRequestConflict, nothing of it kept."""
    with put_held_midway(gateway, "/bkt/k", {"If-None-Match": "*"}) as answered:
        # the body is being stored: the condition was judged on arrival, and held
        s3.put_object(Bucket=bucket, Key="k", Body=b"winner")
    spool = gateway.data_dir / "objects" / "tmp"
    assert answered[0].status_code == 409, answered[0].content
    assert b"<Code>ConditionalRequestConflict</Code>" in answered[0].content
    assert body_of(s3, "k") == b"winner"
    wait_for(lambda: not any(spool.iterdir()), what="the losing body's file to be removed")
    assert len(list((gateway.data_dir / "objects").glob("??/??/*"))) == 0  # "winner" is inline
