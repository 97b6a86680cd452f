"""Object tags through boto3 against a live gateway: Put/Get/DeleteObjectTagging on the
latest version and by VersionId, the refusals S3 answers, `x-amz-tagging` on PutObject,
CreateMultipartUpload and CopyObject, and `x-amz-tagging-count` on HeadObject / GetObject."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.gateway.conftest import Running
from tests.gateway.wire import error_code, raw_request

BUCKET = "photos"


def code_of(caught: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    response = caught.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


def tag_set(**tags: str) -> dict[str, Any]:
    return {"TagSet": [{"Key": k, "Value": v} for k, v in tags.items()]}


def test_put_get_delete_unversioned(s3: Any) -> None:
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="red flower.jpg", Body=b"data")
    assert s3.get_object_tagging(Bucket=BUCKET, Key="red flower.jpg")["TagSet"] == []
    head = s3.head_object(Bucket=BUCKET, Key="red flower.jpg")
    assert "x-amz-tagging-count" not in head["ResponseMetadata"]["HTTPHeaders"]

    put = s3.put_object_tagging(
        Bucket=BUCKET,
        Key="red flower.jpg",
        Tagging={"TagSet": [{"Key": "colour", "Value": "red"}, {"Key": "a b", "Value": " x "}]},
    )
    assert "VersionId" not in put  # unversioned: no x-amz-version-id
    got = s3.get_object_tagging(Bucket=BUCKET, Key="red flower.jpg")
    # answered sorted by key, whatever order they were put in
    assert got["TagSet"] == [{"Key": "a b", "Value": " x "}, {"Key": "colour", "Value": "red"}]
    assert "VersionId" not in got
    assert (
        s3.head_object(Bucket=BUCKET, Key="red flower.jpg")["ResponseMetadata"]["HTTPHeaders"][
            "x-amz-tagging-count"
        ]
        == "2"
    )
    assert s3.get_object(Bucket=BUCKET, Key="red flower.jpg")["TagCount"] == 2

    deleted = s3.delete_object_tagging(Bucket=BUCKET, Key="red flower.jpg")
    assert deleted["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert s3.get_object_tagging(Bucket=BUCKET, Key="red flower.jpg")["TagSet"] == []
    assert "TagCount" not in s3.head_object(Bucket=BUCKET, Key="red flower.jpg")


def test_versions(s3: Any) -> None:
    s3.create_bucket(Bucket=BUCKET)
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    v1 = s3.put_object(Bucket=BUCKET, Key="k", Body=b"1")["VersionId"]
    v2 = s3.put_object(Bucket=BUCKET, Key="k", Body=b"2")["VersionId"]
    put = s3.put_object_tagging(Bucket=BUCKET, Key="k", VersionId=v1, Tagging=tag_set(old="1"))
    assert put["VersionId"] == v1
    latest = s3.put_object_tagging(Bucket=BUCKET, Key="k", Tagging=tag_set(new="2"))
    assert latest["VersionId"] == v2
    got = s3.get_object_tagging(Bucket=BUCKET, Key="k", VersionId=v1)
    assert (got["VersionId"], got["TagSet"]) == (v1, [{"Key": "old", "Value": "1"}])
    assert s3.get_object_tagging(Bucket=BUCKET, Key="k")["TagSet"] == [{"Key": "new", "Value": "2"}]
    deleted = s3.delete_object_tagging(Bucket=BUCKET, Key="k", VersionId=v1)
    assert deleted["VersionId"] == v1
    assert s3.get_object_tagging(Bucket=BUCKET, Key="k", VersionId=v1)["TagSet"] == []
    assert s3.head_object(Bucket=BUCKET, Key="k", VersionId=v2)["TagCount"] == 1

    marker = s3.delete_object(Bucket=BUCKET, Key="k")["VersionId"]
    with pytest.raises(ClientError) as latest_marker:
        s3.get_object_tagging(Bucket=BUCKET, Key="k")
    assert code_of(latest_marker) == ("NoSuchKey", 404)
    with pytest.raises(ClientError) as by_id:
        s3.put_object_tagging(Bucket=BUCKET, Key="k", VersionId=marker, Tagging=tag_set(a="b"))
    assert code_of(by_id) == ("MethodNotAllowed", 405)


def test_refusals(s3: Any) -> None:
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="k", Body=b"data")
    s3.put_object_tagging(Bucket=BUCKET, Key="k", Tagging=tag_set(kept="yes"))
    cases: list[tuple[dict[str, Any], tuple[str, int]]] = [
        ({"Key": "missing", "Tagging": tag_set(a="b")}, ("NoSuchKey", 404)),
        (
            {"Key": "k", "Tagging": tag_set(**{f"k{i}": "v" for i in range(11)})},
            ("BadRequest", 400),
        ),
        ({"Key": "k", "Tagging": tag_set(**{"x" * 129: "v"})}, ("InvalidTag", 400)),
        ({"Key": "k", "Tagging": tag_set(k="v" * 257)}, ("InvalidTag", 400)),
        ({"Key": "k", "Tagging": tag_set(**{"aws:x": "v"})}, ("InvalidTag", 400)),
        (
            {
                "Key": "k",
                "Tagging": {"TagSet": [{"Key": "d", "Value": "1"}, {"Key": "d", "Value": "2"}]},
            },
            ("InvalidTag", 400),
        ),
        (
            {"Key": "k", "VersionId": "nonsense", "Tagging": tag_set(a="b")},
            ("InvalidArgument", 400),
        ),
    ]
    for params, expected in cases:
        with pytest.raises(ClientError) as caught:
            s3.put_object_tagging(Bucket=BUCKET, **params)
        assert code_of(caught) == expected, params
    with pytest.raises(ClientError) as no_bucket:
        s3.get_object_tagging(Bucket="nope", Key="k")
    assert code_of(no_bucket) == ("NoSuchBucket", 404)
    assert s3.get_object_tagging(Bucket=BUCKET, Key="k")["TagSet"] == [
        {"Key": "kept", "Value": "yes"}
    ]


def test_malformed_documents(s3: Any, gateway: Running) -> None:
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="k", Body=b"data")
    for body in (
        b"<Tagging><TagSet><Tag><Key>a</Key>",
        b"<Tagging/>",
        b"<Tagging><TagSet><Tag><Key>a</Key></Tag></TagSet></Tagging>",
        b"<Other><TagSet/></Other>",
        b"",
    ):
        md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
        response = raw_request(
            gateway, "PUT", f"/{BUCKET}/k", {"tagging": ""}, body, {"content-md5": md5}
        )
        assert (response.status_code, error_code(response)) == (400, "MalformedXML"), body
    good = b"<Tagging><TagSet><Tag><Key>a</Key><Value>b</Value></Tag></TagSet></Tagging>"
    no_digest = raw_request(gateway, "PUT", f"/{BUCKET}/k", {"tagging": ""}, good)
    assert (no_digest.status_code, error_code(no_digest)) == (400, "InvalidRequest")
    assert s3.get_object_tagging(Bucket=BUCKET, Key="k")["TagSet"] == []


def test_tags_at_creation(s3: Any) -> None:
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="put", Body=b"data", Tagging="colour=red&a%20b=c%2Bd&empty")
    assert s3.get_object_tagging(Bucket=BUCKET, Key="put")["TagSet"] == [
        {"Key": "a b", "Value": "c+d"},
        {"Key": "colour", "Value": "red"},
        {"Key": "empty", "Value": ""},
    ]
    assert s3.head_object(Bucket=BUCKET, Key="put")["TagCount"] == 3
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket=BUCKET, Key="bad", Body=b"x", Tagging="aws:x=1")
    assert code_of(refused) == ("InvalidTag", 400)
    with pytest.raises(ClientError):
        s3.head_object(Bucket=BUCKET, Key="bad")

    upload = s3.create_multipart_upload(Bucket=BUCKET, Key="mpu", Tagging="m=1")["UploadId"]
    part = s3.upload_part(Bucket=BUCKET, Key="mpu", UploadId=upload, PartNumber=1, Body=b"x")
    s3.complete_multipart_upload(
        Bucket=BUCKET,
        Key="mpu",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert s3.get_object_tagging(Bucket=BUCKET, Key="mpu")["TagSet"] == [{"Key": "m", "Value": "1"}]

    source = {"Bucket": BUCKET, "Key": "put"}
    s3.copy_object(Bucket=BUCKET, Key="copied", CopySource=source)
    assert s3.head_object(Bucket=BUCKET, Key="copied")["TagCount"] == 3
    s3.copy_object(
        Bucket=BUCKET, Key="replaced", CopySource=source, TaggingDirective="REPLACE", Tagging="r=1"
    )
    assert s3.get_object_tagging(Bucket=BUCKET, Key="replaced")["TagSet"] == [
        {"Key": "r", "Value": "1"}
    ]
