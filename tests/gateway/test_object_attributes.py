"""GetObjectAttributes (`GET /bucket/key?attributes`) against a live gateway (SQLite and
PostgreSQL): each attribute, versions, a multipart object's parts a page at a time with
their checksums, and the refusals."""

from __future__ import annotations

import base64
import hashlib
import os
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.gateway.conftest import Running
from tests.gateway.helpers import second_user
from tests.gateway.wire import error_code, raw_request

MiB = 1024 * 1024
ALL = ["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"]
SHA256 = "arcu6553sHVAiX4MjW0j7I7vD4w6R+Gz9Ok0Q9lTa+0="  # of b"A" * 1024


def _code(info: pytest.ExceptionInfo[ClientError]) -> str:
    return str(info.value.response["Error"]["Code"])


def _sha256(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


@pytest.fixture
def bkt(s3: Any) -> Any:
    s3.create_bucket(Bucket="bkt")
    return s3


def test_an_object_written_in_one_piece(bkt: Any) -> None:
    s3 = bkt
    put = s3.put_object(Bucket="bkt", Key="k", Body=b"A" * 1024, ChecksumSHA256=SHA256)
    got = s3.get_object_attributes(Bucket="bkt", Key="k", ObjectAttributes=ALL)
    assert got["ETag"] == put["ETag"].strip('"')
    assert got["Checksum"] == {"ChecksumSHA256": SHA256, "ChecksumType": "FULL_OBJECT"}
    assert (got["StorageClass"], got["ObjectSize"]) == ("STANDARD", 1024)
    assert "ObjectParts" not in got
    assert "VersionId" not in got  # an unversioned bucket
    assert got["LastModified"] == s3.head_object(Bucket="bkt", Key="k")["LastModified"]
    # only what is asked for
    size = s3.get_object_attributes(Bucket="bkt", Key="k", ObjectAttributes=["ObjectSize"])
    assert "ETag" not in size
    assert "Checksum" not in size
    assert size["ObjectSize"] == 1024


def test_versions(bkt: Any) -> None:
    s3 = bkt
    s3.put_bucket_versioning(Bucket="bkt", VersioningConfiguration={"Status": "Enabled"})
    first = s3.put_object(Bucket="bkt", Key="k", Body=b"foo")
    s3.put_object(Bucket="bkt", Key="k", Body=b"longer")
    latest = s3.get_object_attributes(Bucket="bkt", Key="k", ObjectAttributes=ALL)
    assert latest["ObjectSize"] == 6
    old = s3.get_object_attributes(
        Bucket="bkt", Key="k", VersionId=first["VersionId"], ObjectAttributes=ALL
    )
    assert (old["VersionId"], old["ObjectSize"]) == (first["VersionId"], 3)
    assert old["ETag"] == first["ETag"].strip('"')
    marker = s3.delete_object(Bucket="bkt", Key="k")
    with pytest.raises(ClientError) as info:
        s3.get_object_attributes(Bucket="bkt", Key="k", ObjectAttributes=ALL)
    assert _code(info) == "NoSuchKey"
    assert info.value.response["ResponseMetadata"]["HTTPHeaders"]["x-amz-delete-marker"] == "true"
    with pytest.raises(ClientError) as info:
        s3.get_object_attributes(
            Bucket="bkt", Key="k", VersionId=marker["VersionId"], ObjectAttributes=ALL
        )
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 405


def test_a_multipart_objects_parts_a_page_at_a_time(bkt: Any) -> None:
    s3 = bkt
    bodies = [os.urandom(5 * MiB), os.urandom(5 * MiB), b"tail"]
    upload = s3.create_multipart_upload(Bucket="bkt", Key="k", ChecksumAlgorithm="SHA256")
    parts = []
    for number, body in enumerate(bodies, start=1):
        done = s3.upload_part(
            Bucket="bkt",
            Key="k",
            UploadId=upload["UploadId"],
            PartNumber=number,
            Body=body,
            ChecksumAlgorithm="SHA256",
        )
        parts.append(
            {"PartNumber": number, "ETag": done["ETag"], "ChecksumSHA256": done["ChecksumSHA256"]}
        )
    completed = s3.complete_multipart_upload(
        Bucket="bkt", Key="k", UploadId=upload["UploadId"], MultipartUpload={"Parts": parts}
    )
    got = s3.get_object_attributes(Bucket="bkt", Key="k", ObjectAttributes=ALL)
    assert got["ETag"] == completed["ETag"].strip('"')
    assert got["Checksum"] == {
        "ChecksumSHA256": completed["ChecksumSHA256"],
        "ChecksumType": "COMPOSITE",
    }
    assert got["ObjectSize"] == 10 * MiB + 4
    listed = got["ObjectParts"]
    assert (listed["TotalPartsCount"], listed["IsTruncated"]) == (3, False)
    assert [(p["PartNumber"], p["Size"], p["ChecksumSHA256"]) for p in listed["Parts"]] == [
        (n, len(b), _sha256(b)) for n, b in enumerate(bodies, start=1)
    ]
    page = s3.get_object_attributes(
        Bucket="bkt", Key="k", ObjectAttributes=["ObjectParts"], MaxParts=1, PartNumberMarker=1
    )["ObjectParts"]
    assert (page["MaxParts"], page["PartNumberMarker"]) == (1, 1)
    assert (page["IsTruncated"], page["NextPartNumberMarker"]) == (True, 2)
    assert [p["PartNumber"] for p in page["Parts"]] == [2]
    rest = s3.get_object_attributes(
        Bucket="bkt", Key="k", ObjectAttributes=["ObjectParts"], PartNumberMarker=2
    )["ObjectParts"]
    assert rest["IsTruncated"] is False
    assert [p["PartNumber"] for p in rest["Parts"]] == [3]
    beyond = s3.get_object_attributes(
        Bucket="bkt", Key="k", ObjectAttributes=["ObjectParts"], PartNumberMarker=9
    )["ObjectParts"]
    assert beyond["TotalPartsCount"] == 3
    assert "Parts" not in beyond


def test_the_parts_of_an_upload_without_a_checksum(bkt: Any) -> None:
    s3 = bkt
    upload = s3.create_multipart_upload(Bucket="bkt", Key="k")["UploadId"]
    done = s3.upload_part(Bucket="bkt", Key="k", UploadId=upload, PartNumber=1, Body=b"one")
    s3.complete_multipart_upload(
        Bucket="bkt",
        Key="k",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": done["ETag"]}]},
    )
    got = s3.get_object_attributes(Bucket="bkt", Key="k", ObjectAttributes=ALL)
    assert "Checksum" not in got
    assert got["ObjectParts"]["Parts"] == [{"PartNumber": 1, "Size": 3}]


def test_what_is_refused(bkt: Any, gateway: Running) -> None:
    s3 = bkt
    s3.put_object(Bucket="bkt", Key="k", Body=b"x")

    def ask(headers: dict[str, str], key: str = "k") -> tuple[int, str]:
        answer = raw_request(gateway, "GET", f"/bkt/{key}", {"attributes": ""}, headers=headers)
        return answer.status_code, error_code(answer)

    assert ask({}) == (400, "InvalidArgument")
    assert ask({"x-amz-object-attributes": "ETag,Colour"}) == (400, "InvalidArgument")
    assert ask({"x-amz-object-attributes": "ETag", "x-amz-max-parts": "-1"}) == (
        400,
        "InvalidArgument",
    )
    assert ask({"x-amz-object-attributes": "ETag"}, key="missing") == (404, "NoSuchKey")
    ok = raw_request(
        gateway, "GET", "/bkt/k", {"attributes": ""}, headers={"x-amz-object-attributes": "ETag"}
    )
    assert ok.status_code == 200
    assert b"<GetObjectAttributesResponse" in ok.content


def test_another_project_needs_read_on_the_object(bkt: Any, gateway: Running) -> None:
    s3 = bkt
    s3.put_object(Bucket="bkt", Key="private", Body=b"x")
    s3.put_object(Bucket="bkt", Key="public", Body=b"xy", ACL="public-read")
    _, bob = second_user(gateway)
    with pytest.raises(ClientError) as info:
        bob.get_object_attributes(Bucket="bkt", Key="private", ObjectAttributes=["ObjectSize"])
    assert _code(info) == "AccessDenied"
    got = bob.get_object_attributes(Bucket="bkt", Key="public", ObjectAttributes=["ObjectSize"])
    assert got["ObjectSize"] == 2
