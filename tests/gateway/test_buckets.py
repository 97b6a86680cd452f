"""Bucket operations through boto3 against a live gateway: create (with object lock), head,
list, location, delete (only empty), versioning, object-lock configuration, name rules."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from ripple.identity import create_key, create_user
from tests.gateway.helpers import code_of, status_of
from tests.gateway.wire import error_code, raw_request


def test_create_list_head_delete(s3: Any) -> None:
    s3.create_bucket(Bucket="photos")
    s3.create_bucket(Bucket="docs")
    listed = s3.list_buckets()
    assert [b["Name"] for b in listed["Buckets"]] == ["docs", "photos"]
    assert listed["Owner"]["DisplayName"] == "alice"
    head = s3.head_bucket(Bucket="photos")
    assert head["ResponseMetadata"]["HTTPHeaders"]["x-amz-bucket-region"] == "us-east-1"
    s3.delete_bucket(Bucket="docs")
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["photos"]
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket="docs")
    assert status_of(e) == 404


def test_create_twice_and_taken_names(s3: Any, gateway: Any) -> None:
    s3.create_bucket(Bucket="photos", ACL="public-read")
    s3.put_object(Bucket="photos", Key="kept", Body=b"x")
    # S3's legacy rule in us-east-1: your own bucket again is 200, and nothing changes
    again = s3.create_bucket(Bucket="photos")
    assert again["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="photos")["Contents"]] == ["kept"]
    grants = s3.get_bucket_acl(Bucket="photos")["Grants"]
    assert any(g["Permission"] == "READ" for g in grants)  # still public-read
    # in any other region it is BucketAlreadyOwnedByYou
    gateway.services.region = "eu-central-1"
    with pytest.raises(ClientError) as e:
        s3.create_bucket(
            Bucket="photos", CreateBucketConfiguration={"LocationConstraint": "eu-central-1"}
        )
    assert code_of(e) == "BucketAlreadyOwnedByYou"
    assert status_of(e) == 409
    _, bob, secret = create_user(gateway.services.db, gateway.data_dir, "bob")
    with pytest.raises(ClientError) as e:
        gateway.client(bob.access_key_id, secret).create_bucket(Bucket="photos")
    assert code_of(e) == "BucketAlreadyExists"
    # bob cannot see alice's bucket
    assert gateway.client(bob.access_key_id, secret).list_buckets()["Buckets"] == []


@pytest.mark.parametrize(
    "name",
    [
        "ab",
        "UPPER",
        "has_underscore",
        "192.168.1.1",
        "a..b",
        "-x-y",
        # S3's reserved prefixes and suffixes
        "xn--bcher-kva",
        "sthree-x",
        "sthree-configurator",
        "amzn-s3-demo-bucket",
        "photos-s3alias",
        "photos--ol-s3",
        "photos--x-s3",
        "photos--table-s3",
        "photos.mrap",
    ],
)
def test_invalid_bucket_names(s3: Any, gateway: Any, name: str) -> None:
    # sent as is: boto3 takes `--x-s3` names for directory buckets and signs them otherwise
    answer = raw_request(gateway, "PUT", f"/{name}")
    assert (answer.status_code, error_code(answer)) == (400, "InvalidBucketName")
    assert s3.list_buckets()["Buckets"] == []


def test_delete_only_empty(s3: Any) -> None:
    s3.create_bucket(Bucket="photos")
    s3.put_object(Bucket="photos", Key="a", Body=b"1")
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket="photos")
    assert code_of(e) == "BucketNotEmpty"
    assert status_of(e) == 409
    s3.delete_object(Bucket="photos", Key="a")
    s3.delete_bucket(Bucket="photos")
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket="photos")
    assert code_of(e) == "NoSuchBucket"


def test_location(s3: Any) -> None:
    s3.create_bucket(Bucket="photos")
    assert s3.get_bucket_location(Bucket="photos")["LocationConstraint"] is None
    with pytest.raises(ClientError) as e:
        s3.get_bucket_location(Bucket="nothing-here")
    assert code_of(e) == "NoSuchBucket"


def test_create_in_another_region_is_refused(s3: Any) -> None:
    with pytest.raises(ClientError) as e:
        s3.create_bucket(
            Bucket="photos", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
        )
    assert code_of(e) == "InvalidLocationConstraint"
    assert s3.list_buckets()["Buckets"] == []


def test_versioning(s3: Any) -> None:
    s3.create_bucket(Bucket="photos")
    assert "Status" not in s3.get_bucket_versioning(Bucket="photos")
    s3.put_bucket_versioning(Bucket="photos", VersioningConfiguration={"Status": "Enabled"})
    assert s3.get_bucket_versioning(Bucket="photos")["Status"] == "Enabled"
    first = s3.put_object(Bucket="photos", Key="k", Body=b"1")["VersionId"]
    second = s3.put_object(Bucket="photos", Key="k", Body=b"2")["VersionId"]
    assert first != second
    assert "null" not in (first, second)
    got = s3.get_object(Bucket="photos", Key="k", VersionId=first)
    assert got["Body"].read() == b"1"
    s3.put_bucket_versioning(Bucket="photos", VersioningConfiguration={"Status": "Suspended"})
    assert s3.get_bucket_versioning(Bucket="photos")["Status"] == "Suspended"


def test_versioning_bad_document(s3: Any, gateway: Any) -> None:
    s3.create_bucket(Bucket="photos")
    with pytest.raises(ClientError) as e:
        s3.put_bucket_versioning(Bucket="photos", VersioningConfiguration={"Status": "On"})
    assert code_of(e) == "MalformedXML"
    assert "Status" not in s3.get_bucket_versioning(Bucket="photos")


def test_object_lock_configuration(s3: Any) -> None:
    s3.create_bucket(Bucket="vault", ObjectLockEnabledForBucket=True)
    # object lock turns versioning on
    assert s3.get_bucket_versioning(Bucket="vault")["Status"] == "Enabled"
    config = s3.get_object_lock_configuration(Bucket="vault")["ObjectLockConfiguration"]
    assert config == {"ObjectLockEnabled": "Enabled"}
    s3.put_object_lock_configuration(
        Bucket="vault",
        ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 3}},
        },
    )
    config = s3.get_object_lock_configuration(Bucket="vault")["ObjectLockConfiguration"]
    assert config["Rule"]["DefaultRetention"] == {"Mode": "GOVERNANCE", "Days": 3}
    head = s3.put_object(Bucket="vault", Key="k", Body=b"x")
    assert head["VersionId"]
    retained = s3.head_object(Bucket="vault", Key="k")
    assert retained["ObjectLockMode"] == "GOVERNANCE"
    with pytest.raises(ClientError) as e:
        s3.put_bucket_versioning(Bucket="vault", VersioningConfiguration={"Status": "Suspended"})
    assert code_of(e) == "InvalidBucketState"


LOCK_CONFIG = {
    "ObjectLockEnabled": "Enabled",
    "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}},
}


def status_and_code(error: pytest.ExceptionInfo[ClientError]) -> tuple[int, str]:
    return status_of(error), code_of(error)


def test_object_lock_needs_a_lock_bucket_or_enabled_versioning(s3: Any) -> None:
    s3.create_bucket(Bucket="plain")
    with pytest.raises(ClientError) as e:
        s3.get_object_lock_configuration(Bucket="plain")
    assert code_of(e) == "ObjectLockConfigurationNotFoundError"
    for status in (None, "Suspended"):
        if status:
            s3.put_bucket_versioning(Bucket="plain", VersioningConfiguration={"Status": status})
        with pytest.raises(ClientError) as e:
            s3.put_object_lock_configuration(Bucket="plain", ObjectLockConfiguration=LOCK_CONFIG)
        assert status_and_code(e) == (409, "InvalidBucketState")
    # S3 lets a bucket whose versioning is Enabled take object lock (since 2023)
    s3.put_bucket_versioning(Bucket="plain", VersioningConfiguration={"Status": "Enabled"})
    s3.put_object_lock_configuration(Bucket="plain", ObjectLockConfiguration=LOCK_CONFIG)
    got = s3.get_object_lock_configuration(Bucket="plain")["ObjectLockConfiguration"]
    assert got == LOCK_CONFIG
    assert s3.put_object(Bucket="plain", Key="k", Body=b"x")["VersionId"]
    assert s3.head_object(Bucket="plain", Key="k")["ObjectLockMode"] == "GOVERNANCE"


@pytest.mark.parametrize(
    ("retention", "expected"),
    [
        ({"Mode": "GOVERNANCE", "Days": 1, "Years": 1}, (400, "MalformedXML")),
        ({"Mode": "GOVERNANCE"}, (400, "MalformedXML")),
        ({"Mode": "GOVERNANCE", "Days": 0}, (400, "InvalidRetentionPeriod")),
        ({"Mode": "GOVERNANCE", "Years": -1}, (400, "InvalidRetentionPeriod")),
        ({"Mode": "GOVERNANCE", "Days": 36_501}, (400, "InvalidRetentionPeriod")),
        ({"Mode": "GOVERNANCE", "Years": 101}, (400, "InvalidRetentionPeriod")),
        ({"Mode": "COMPLIANCE", "Days": 2_913_000}, (400, "InvalidRetentionPeriod")),
        ({"Mode": "COMPLIANCE", "Years": 7975}, (400, "InvalidRetentionPeriod")),
        ({"Mode": "COMPLIANCE", "Days": 2**63}, (400, "InvalidRetentionPeriod")),
        ({"Mode": "governance", "Days": 1}, (400, "MalformedXML")),
    ],
)
def test_a_default_retention_is_checked_as_s3_checks_it(
    s3: Any, retention: dict[str, Any], expected: tuple[int, str]
) -> None:
    s3.create_bucket(Bucket="vault", ObjectLockEnabledForBucket=True)
    with pytest.raises(ClientError) as e:
        s3.put_object_lock_configuration(
            Bucket="vault",
            ObjectLockConfiguration={
                "ObjectLockEnabled": "Enabled",
                "Rule": {"DefaultRetention": retention},
            },
        )
    assert status_and_code(e) == expected
    assert "Rule" not in s3.get_object_lock_configuration(Bucket="vault")["ObjectLockConfiguration"]
    s3.put_object(Bucket="vault", Key="k", Body=b"x")  # the bucket still takes writes
    assert "ObjectLockMode" not in s3.head_object(Bucket="vault", Key="k")


def test_the_longest_default_retentions_still_take_writes(s3: Any) -> None:
    s3.create_bucket(Bucket="vault", ObjectLockEnabledForBucket=True)
    for retention in ({"Mode": "GOVERNANCE", "Days": 36_500}, {"Mode": "GOVERNANCE", "Years": 100}):
        config = {"ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": retention}}
        s3.put_object_lock_configuration(Bucket="vault", ObjectLockConfiguration=config)
        s3.put_object(Bucket="vault", Key="k", Body=b"x")
        assert s3.head_object(Bucket="vault", Key="k")["ObjectLockMode"] == "GOVERNANCE"


def test_bucket_restricted_key_sees_only_its_bucket(s3: Any, gateway: Any) -> None:
    s3.create_bucket(Bucket="photos")
    s3.create_bucket(Bucket="docs")
    key, secret = create_key(gateway.services.db, gateway.data_dir, "alice", bucket="photos")
    restricted = gateway.client(key.access_key_id, secret)
    assert [b["Name"] for b in restricted.list_buckets()["Buckets"]] == ["photos"]
    with pytest.raises(ClientError) as e:
        restricted.put_object(Bucket="docs", Key="a", Body=b"1")
    assert code_of(e) == "AccessDenied"
    restricted.put_object(Bucket="photos", Key="a", Body=b"1")


def test_list_buckets_pages_by_max_buckets(s3: Any, gateway: Any) -> None:
    assert "ContinuationToken" not in s3.list_buckets(MaxBuckets=1)
    for name in ("alpha", "beta", "gamma"):
        s3.create_bucket(Bucket=name)
    seen, token = [], None
    while True:
        page = s3.list_buckets(MaxBuckets=2, **({"ContinuationToken": token} if token else {}))
        assert len(page["Buckets"]) <= 2
        seen += [b["Name"] for b in page["Buckets"]]
        token = page.get("ContinuationToken")
        if token is None:
            break
    assert seen == ["alpha", "beta", "gamma"]
    everything = s3.list_buckets()
    assert [b["Name"] for b in everything["Buckets"]] == seen
    assert "ContinuationToken" not in everything
    assert {b["BucketRegion"] for b in everything["Buckets"]} == {"us-east-1"}
    prefixed = s3.list_buckets(Prefix="g")
    assert ([b["Name"] for b in prefixed["Buckets"]], prefixed["Prefix"]) == (["gamma"], "g")
    assert s3.list_buckets(BucketRegion="eu-west-1")["Buckets"] == []
    for bad in ("0", "10001", "x", "9" * 5000):
        answer = raw_request(gateway, "GET", "/", {"max-buckets": bad})
        assert (answer.status_code, error_code(answer)) == (400, "InvalidArgument"), bad
    token = raw_request(gateway, "GET", "/", {"continuation-token": "not a token"})
    assert (token.status_code, error_code(token)) == (400, "InvalidArgument")
