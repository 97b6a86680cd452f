"""Conditional deletes through boto3 against a live gateway: DeleteObject's `If-Match`,
`x-amz-if-match-last-modified-time` and `x-amz-if-match-size`, and DeleteObjects' per-item
`<ETag>`, `<LastModifiedTime>` and `<Size>`. A condition that does not hold is 412 (an
item error in a bulk delete) and deletes nothing; deleting what does not exist is never an
error; without a version, the condition is judged against the latest version, which may be
a delete marker."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.gateway.helpers import anonymous, second_user
from tests.gateway.wire import error_code, raw_request

BADTIME = datetime(2015, 1, 1)


def failure(caught: pytest.ExceptionInfo[ClientError]) -> tuple[int, str]:
    response = caught.value.response
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def keys(s3: Any) -> list[str]:
    return [o["Key"] for o in s3.list_objects_v2(Bucket="bkt").get("Contents", [])]


@pytest.fixture
def plain(s3: Any) -> dict[str, Any]:
    s3.create_bucket(Bucket="bkt")
    put = s3.put_object(Bucket="bkt", Key="k", Body=b"12345")
    head = s3.head_object(Bucket="bkt", Key="k")
    return {"etag": put["ETag"], "mtime": head["LastModified"], "size": 5}


@pytest.fixture
def versioned(s3: Any) -> dict[str, Any]:
    s3.create_bucket(Bucket="bkt")
    s3.put_bucket_versioning(Bucket="bkt", VersioningConfiguration={"Status": "Enabled"})
    put = s3.put_object(Bucket="bkt", Key="k", Body=b"12345")
    head = s3.head_object(Bucket="bkt", Key="k")
    return {"etag": put["ETag"], "mtime": head["LastModified"], "version": put["VersionId"]}


@pytest.mark.parametrize(
    ("wrong", "right"),
    [
        ({"IfMatch": '"0123"'}, "etag"),
        ({"IfMatchLastModifiedTime": BADTIME}, "mtime"),
        ({"IfMatchSize": 9999}, "size"),
    ],
)
def test_delete_object_only_when_the_condition_holds(
    s3: Any, plain: dict[str, Any], wrong: dict[str, Any], right: str
) -> None:
    with pytest.raises(ClientError) as caught:
        s3.delete_object(Bucket="bkt", Key="k", **wrong)
    assert failure(caught) == (412, "PreconditionFailed")
    assert keys(s3) == ["k"]
    name = next(iter(wrong))
    s3.delete_object(Bucket="bkt", Key="k", **{name: plain[right]})
    assert keys(s3) == []
    # nothing left to delete: the condition is not judged, and that is no error
    gone = s3.delete_object(Bucket="bkt", Key="k", **wrong)
    assert gone["ResponseMetadata"]["HTTPStatusCode"] == 204


def test_if_match_star_deletes_any_object(s3: Any, plain: dict[str, Any]) -> None:
    s3.delete_object(Bucket="bkt", Key="k", IfMatch="*")
    assert keys(s3) == []


def test_without_a_version_the_latest_is_judged_delete_markers_too(
    s3: Any, versioned: dict[str, Any]
) -> None:
    with pytest.raises(ClientError) as caught:
        s3.delete_object(Bucket="bkt", Key="k", IfMatch='"0123"')
    assert failure(caught) == (412, "PreconditionFailed")
    marked = s3.delete_object(Bucket="bkt", Key="k", IfMatch=versioned["etag"])
    assert marked["DeleteMarker"]
    # the latest is now a delete marker: an ETag never matches it, `*` does
    for wrong in (
        {"IfMatch": versioned["etag"]},
        {"IfMatchSize": 5},
        {"IfMatchLastModifiedTime": BADTIME},
    ):
        with pytest.raises(ClientError) as caught:
            s3.delete_object(Bucket="bkt", Key="k", **wrong)
        assert failure(caught) == (412, "PreconditionFailed")
    assert s3.delete_object(Bucket="bkt", Key="k", IfMatch="*")["DeleteMarker"]
    markers = s3.list_object_versions(Bucket="bkt")["DeleteMarkers"]
    assert len(markers) == 2


def test_a_version_is_judged_itself(s3: Any, versioned: dict[str, Any]) -> None:
    version = versioned["version"]
    s3.put_object(Bucket="bkt", Key="k", Body=b"newer, and longer")  # not the one judged
    with pytest.raises(ClientError) as caught:
        s3.delete_object(Bucket="bkt", Key="k", VersionId=version, IfMatchSize=17)
    assert failure(caught) == (412, "PreconditionFailed")
    deleted = s3.delete_object(
        Bucket="bkt",
        Key="k",
        VersionId=version,
        IfMatch=versioned["etag"],
        IfMatchSize=5,
        IfMatchLastModifiedTime=versioned["mtime"],
    )
    assert "DeleteMarker" not in deleted
    versions = s3.list_object_versions(Bucket="bkt")["Versions"]
    assert version not in [v["VersionId"] for v in versions]
    again = s3.delete_object(Bucket="bkt", Key="k", VersionId=version, IfMatch='"0123"')
    assert again["ResponseMetadata"]["HTTPStatusCode"] == 204


def test_delete_objects_judges_each_item(s3: Any, plain: dict[str, Any]) -> None:
    s3.put_object(Bucket="bkt", Key="other", Body=b"1")
    answer = s3.delete_objects(
        Bucket="bkt",
        Delete={
            "Objects": [
                {"Key": "k", "ETag": '"0123"'},
                {"Key": "other", "Size": 1},
                {"Key": "missing", "ETag": '"0123"'},
            ]
        },
    )
    assert [(e["Key"], e["Code"]) for e in answer["Errors"]] == [("k", "PreconditionFailed")]
    assert [d["Key"] for d in answer["Deleted"]] == ["other", "missing"]
    assert keys(s3) == ["k"]
    for wrong in ({"Size": 9999}, {"LastModifiedTime": BADTIME}):
        refused = s3.delete_objects(Bucket="bkt", Delete={"Objects": [{"Key": "k", **wrong}]})
        assert [e["Code"] for e in refused["Errors"]] == ["PreconditionFailed"]
    assert keys(s3) == ["k"]
    done = s3.delete_objects(
        Bucket="bkt",
        Delete={
            "Objects": [
                {"Key": "k", "ETag": plain["etag"], "Size": 5, "LastModifiedTime": plain["mtime"]}
            ]
        },
    )
    assert [d["Key"] for d in done["Deleted"]] == ["k"]
    assert keys(s3) == []


def test_delete_objects_judges_the_latest_version_or_the_one_named(
    s3: Any, versioned: dict[str, Any]
) -> None:
    version = versioned["version"]
    s3.put_object(Bucket="bkt", Key="k", Body=b"newer")
    newest = s3.head_object(Bucket="bkt", Key="k")
    answer = s3.delete_objects(
        Bucket="bkt",
        Delete={
            "Objects": [
                {"Key": "k", "ETag": versioned["etag"]},  # the latest is the newer version
                {"Key": "k", "VersionId": version, "LastModifiedTime": BADTIME},
            ]
        },
    )
    assert [e["Code"] for e in answer["Errors"]] == ["PreconditionFailed", "PreconditionFailed"]
    assert "DeleteMarkers" not in s3.list_object_versions(Bucket="bkt")
    done = s3.delete_objects(
        Bucket="bkt",
        Delete={
            "Objects": [
                {"Key": "k", "ETag": newest["ETag"]},
                {"Key": "k", "VersionId": version, "LastModifiedTime": versioned["mtime"]},
            ]
        },
    )
    assert [d.get("DeleteMarker", False) for d in done["Deleted"]] == [True, False]
    # the latest is a delete marker now: a size is judged against it (0), and fails
    marked = s3.delete_objects(Bucket="bkt", Delete={"Objects": [{"Key": "k", "Size": 9999}]})
    assert [e["Code"] for e in marked["Errors"]] == ["PreconditionFailed"]


def test_conditions_that_are_not_values_are_refused(
    gateway: Any, s3: Any, plain: dict[str, Any]
) -> None:
    for header, value in (
        ("x-amz-if-match-size", "-1"),
        ("x-amz-if-match-size", "9" * 5000),
        ("x-amz-if-match-last-modified-time", "yesterday"),
        ("x-amz-if-match-last-modified-time", "Fri, 31 Dec 9999 23:59:59 -0100"),
    ):
        answer = raw_request(gateway, "DELETE", "/bkt/k", headers={header: value})
        assert (answer.status_code, error_code(answer)) == (400, "InvalidArgument"), header
    body = b"<Delete><Object><Key>k</Key><Size>x</Size></Object></Delete>"
    answer = raw_request(gateway, "POST", "/bkt", {"delete": ""}, body, content_md5=True)
    assert (answer.status_code, error_code(answer)) == (400, "MalformedXML")
    late = b"<LastModifiedTime>Fri, 31 Dec 9999 23:59:59 -0100</LastModifiedTime>"
    body = b"<Delete><Object><Key>k</Key>" + late + b"</Object></Delete>"
    answer = raw_request(gateway, "POST", "/bkt", {"delete": ""}, body, content_md5=True)
    assert (answer.status_code, error_code(answer)) == (400, "InvalidArgument")
    assert keys(s3) == ["k"]


def test_a_condition_after_an_item_that_deleted_the_latest_version_is_refused(
    s3: Any, versioned: dict[str, Any]
) -> None:
    """The request reads each key's latest version once: once an earlier item deletes it,
    what is latest was never read, so the condition cannot be judged and the item is
    refused (InvalidRequest) rather than judged against nothing."""
    older = versioned["version"]
    newer = s3.put_object(Bucket="bkt", Key="k", Body=b"newer")["VersionId"]
    answer = s3.delete_objects(
        Bucket="bkt",
        Delete={"Objects": [{"Key": "k", "VersionId": newer}, {"Key": "k", "ETag": '"0000"'}]},
    )
    assert [d["VersionId"] for d in answer["Deleted"]] == [newer]
    assert [(e["Key"], e["Code"]) for e in answer["Errors"]] == [("k", "InvalidRequest")]
    versions = s3.list_object_versions(Bucket="bkt")
    assert [v["VersionId"] for v in versions["Versions"]] == [older]
    assert "DeleteMarkers" not in versions  # the refused item made no marker


def test_conditions_are_the_bucket_owners(s3: Any, gateway: Any) -> None:
    """A project the bucket's ACL lets write and delete, and anyone on a public-read-write
    bucket, may not send conditions: the answers would tell what a key holds, which only
    READ may learn."""
    s3.create_bucket(Bucket="bkt", ACL="public-read-write")
    etag = s3.put_object(Bucket="bkt", Key="k", Body=b"private")["ETag"]
    _, bob = second_user(gateway)
    for client in (bob, anonymous(gateway)):
        for call in (
            lambda c: c.put_object(Bucket="bkt", Key="k", Body=b"x", IfNoneMatch=etag),
            lambda c: c.put_object(Bucket="bkt", Key="new", Body=b"x", IfMatch="*"),
            lambda c: c.delete_object(Bucket="bkt", Key="k", IfMatchSize=7),
        ):
            with pytest.raises(ClientError) as caught:
                call(client)
            assert failure(caught) == (403, "AccessDenied")
        bulk = client.delete_objects(Bucket="bkt", Delete={"Objects": [{"Key": "k", "ETag": etag}]})
        assert [e["Code"] for e in bulk["Errors"]] == ["AccessDenied"]
    assert keys(s3) == ["k"]
    assert s3.get_object(Bucket="bkt", Key="k")["Body"].read() == b"private"
    # without conditions they may still write and delete, as the ACL allows
    bob.put_object(Bucket="bkt", Key="bobs", Body=b"x")
    assert keys(s3) == ["bobs", "k"]


def test_a_conditional_delete_of_a_key_without_versions_places_no_marker(s3: Any) -> None:
    """Nothing to delete is no error, and a conditional delete then does nothing at all:
    no delete marker, so a later condition finds the key as empty as before."""
    s3.create_bucket(Bucket="bkt")
    s3.put_bucket_versioning(Bucket="bkt", VersioningConfiguration={"Status": "Enabled"})
    for condition in ({"IfMatch": "*"}, {"IfMatch": '"0123"'}, {"IfMatchSize": 3}):
        answer = s3.delete_object(Bucket="bkt", Key="k", **condition)
        assert answer["ResponseMetadata"]["HTTPStatusCode"] == 204
        assert "DeleteMarker" not in answer
    bulk = s3.delete_objects(Bucket="bkt", Delete={"Objects": [{"Key": "k", "ETag": '"0123"'}]})
    assert [d["Key"] for d in bulk["Deleted"]] == ["k"]
    assert "DeleteMarker" not in bulk["Deleted"][0]
    assert "DeleteMarkers" not in s3.list_object_versions(Bucket="bkt")
    # an unconditional delete of nothing still places one, as in S3
    assert s3.delete_object(Bucket="bkt", Key="k")["DeleteMarker"]
