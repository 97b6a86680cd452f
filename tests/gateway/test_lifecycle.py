"""Bucket lifecycle through boto3 against a live gateway: Put/Get/DeleteBucketLifecycle-
Configuration, the refusals S3 answers (nothing stored), the Content-MD5 requirement, and a
rule applied by `run_lifecycle` to objects written through the gateway."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from ripple.metabase import run_lifecycle
from tests.gateway.conftest import Running
from tests.gateway.test_listing import error_code, raw_request

BUCKET = "logs"


def code_of(caught: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    response = caught.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


def test_put_get_delete(s3: Any) -> None:
    s3.create_bucket(Bucket=BUCKET)
    with pytest.raises(ClientError) as caught:
        s3.get_bucket_lifecycle_configuration(Bucket=BUCKET)
    assert code_of(caught) == ("NoSuchLifecycleConfiguration", 404)
    rules = [
        {
            "ID": "tmp",
            "Status": "Enabled",
            "Filter": {"Prefix": "tmp/"},
            "Expiration": {"Days": 3},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 2},
        },
        {
            "ID": "tagged",
            "Status": "Disabled",
            "Filter": {
                "And": {
                    "Prefix": "a/",
                    "Tags": [{"Key": "k", "Value": "v"}, {"Key": "x", "Value": " y "}],
                }
            },
            "Expiration": {"Date": datetime(2026, 3, 1, tzinfo=UTC)},
            "NoncurrentVersionExpiration": {"NoncurrentDays": 5, "NewerNoncurrentVersions": 1},
        },
        {
            "ID": "markers",
            "Status": "Enabled",
            "Filter": {},
            "Expiration": {"ExpiredObjectDeleteMarker": True},
        },
        {
            "ID": "one-tag",
            "Status": "Enabled",
            "Filter": {"Tag": {"Key": "k", "Value": "v"}},
            "Expiration": {"Days": 1},
        },
        {"Status": "Enabled", "Prefix": "legacy/", "Expiration": {"Days": 9}},
    ]
    s3.put_bucket_lifecycle_configuration(Bucket=BUCKET, LifecycleConfiguration={"Rules": rules})
    got = s3.get_bucket_lifecycle_configuration(Bucket=BUCKET)["Rules"]
    assert got[:4] == [
        rules[0],
        {**rules[1], "Expiration": {"Date": datetime(2026, 3, 1, tzinfo=UTC)}},
        rules[2],
        rules[3],
    ]
    generated = got[4].pop("ID")
    assert 20 <= len(generated) <= 255
    assert got[4] == rules[4]

    deleted = s3.delete_bucket_lifecycle(Bucket=BUCKET)
    assert deleted["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as caught:
        s3.get_bucket_lifecycle_configuration(Bucket=BUCKET)
    assert code_of(caught) == ("NoSuchLifecycleConfiguration", 404)
    with pytest.raises(ClientError) as caught:
        s3.get_bucket_lifecycle_configuration(Bucket="missing")
    assert code_of(caught) == ("NoSuchBucket", 404)


REFUSED = [
    ({"ID": "r", "Status": "On", "Filter": {}, "Expiration": {"Days": 1}}, "MalformedXML", 400),
    (
        {
            "ID": "r",
            "Status": "Enabled",
            "Filter": {},
            "Expiration": {"Days": 1, "ExpiredObjectDeleteMarker": True},
        },
        "MalformedXML",
        400,
    ),
    (
        {"ID": "r", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 0}},
        "InvalidArgument",
        400,
    ),
    (
        {
            "ID": "r",
            "Status": "Enabled",
            "Filter": {},
            "Expiration": {"Date": datetime(2026, 3, 1, 12, tzinfo=UTC)},
        },
        "InvalidArgument",
        400,
    ),
    ({"ID": "r", "Status": "Enabled", "Filter": {}}, "InvalidRequest", 400),
    (
        {
            "ID": "r",
            "Status": "Enabled",
            "Filter": {"Tag": {"Key": "k", "Value": "v"}},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
        },
        "InvalidRequest",
        400,
    ),
    (
        {
            "ID": "r",
            "Status": "Enabled",
            "Filter": {},
            "Transitions": [{"Days": 30, "StorageClass": "GLACIER"}],
        },
        "NotImplemented",
        501,
    ),
]


@pytest.mark.parametrize(("bad", "code", "status"), REFUSED)
def test_refusals_store_nothing(s3: Any, bad: dict[str, Any], code: str, status: int) -> None:
    s3.create_bucket(Bucket=BUCKET)
    kept = {"ID": "kept", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 9}}
    s3.put_bucket_lifecycle_configuration(Bucket=BUCKET, LifecycleConfiguration={"Rules": [kept]})
    with pytest.raises(ClientError) as caught:
        s3.put_bucket_lifecycle_configuration(
            Bucket=BUCKET, LifecycleConfiguration={"Rules": [kept | {"ID": "other"}, bad]}
        )
    assert code_of(caught) == (code, status)
    assert s3.get_bucket_lifecycle_configuration(Bucket=BUCKET)["Rules"] == [kept]


def test_documents_s3_refuses(gateway: Running, s3: Any) -> None:
    s3.create_bucket(Bucket=BUCKET)
    good = (
        b"<LifecycleConfiguration><Rule><ID>r</ID><Filter/><Status>Enabled</Status>"
        b"<Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>"
    )

    def put(body: bytes, digest: bool = True) -> Any:
        headers = {}
        if digest:
            headers["Content-MD5"] = base64.b64encode(hashlib.md5(body).digest()).decode()
        return raw_request(gateway, "PUT", f"/{BUCKET}", {"lifecycle": ""}, body, headers)

    no_digest = put(good, digest=False)
    assert (no_digest.status_code, error_code(no_digest)) == (400, "InvalidRequest")
    for body in (
        b"<LifecycleConfiguration/>",  # no rules
        b"<LifecycleConfiguration><Rule><ID>r</ID><Prefix/><Filter/><Status>Enabled</Status>"
        b"<Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>",
        b"<LifecycleConfiguration><Rule><ID>r</ID><Filter/><Status>Enabled</Status>"
        b"<Expiration><Days>1</Days></Expiration><Expiration><Days>2</Days></Expiration>"
        b"</Rule></LifecycleConfiguration>",
        b"<LifecycleConfiguration><Rule><ID>r</ID><Filter/><Status>Enabled</Status>"
        b"<Expiration><Days>x</Days></Expiration></Rule></LifecycleConfiguration>",
        b"<Lifecycle/>",
        b"<LifecycleConfiguration><Rule>",
    ):
        response = put(body)
        assert (response.status_code, error_code(response)) == (400, "MalformedXML"), body
    with pytest.raises(ClientError) as caught:
        s3.get_bucket_lifecycle_configuration(Bucket=BUCKET)
    assert code_of(caught) == ("NoSuchLifecycleConfiguration", 404)
    assert put(good).status_code == 200
    assert [r["ID"] for r in s3.get_bucket_lifecycle_configuration(Bucket=BUCKET)["Rules"]] == ["r"]


def test_a_rule_set_through_s3_expires_objects(gateway: Running, s3: Any) -> None:
    s3.create_bucket(Bucket=BUCKET)
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=BUCKET, Key="tmp/a", Body=b"a")
    s3.put_object(Bucket=BUCKET, Key="keep/b", Body=b"b")
    s3.put_bucket_lifecycle_configuration(
        Bucket=BUCKET,
        LifecycleConfiguration={
            "Rules": [
                {
                    "ID": "tmp",
                    "Status": "Enabled",
                    "Filter": {"Prefix": "tmp/"},
                    "Expiration": {"Days": 1},
                }
            ]
        },
    )
    db = gateway.services.db
    result = run_lifecycle(db, now=datetime.now(UTC) + timedelta(days=2))
    assert result.delete_markers_created == 1
    with pytest.raises(ClientError) as caught:
        s3.get_object(Bucket=BUCKET, Key="tmp/a")
    assert code_of(caught) == ("NoSuchKey", 404)
    versions = s3.list_object_versions(Bucket=BUCKET)
    assert [m["Key"] for m in versions["DeleteMarkers"]] == ["tmp/a"]
    assert sorted(v["Key"] for v in versions["Versions"]) == ["keep/b", "tmp/a"]
