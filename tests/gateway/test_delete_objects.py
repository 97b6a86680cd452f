"""DeleteObjects through boto3 against a live gateway: the wire side of the bulk-deletion
test plan (1000 keys in one request, 1001 refused with nothing deleted, quiet mode,
versioning, object lock, per-item access denial, one rate-limit token per request) and
the data of deleted objects freed."""

from __future__ import annotations

import base64
import hashlib
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from ripple import metabase
from ripple.gateway.ratelimit import RateLimit
from ripple.identity import create_key
from ripple.metabase import delete_objects
from tests.gateway.conftest import Running, wait_for
from tests.gateway.helpers import seed
from tests.gateway.wire import FILE_SIZE, error_code, raw_request

NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def keys_in(s3: Any, bucket: str) -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return [c["Key"] for page in pages for c in page.get("Contents", [])]


def objects(*keys: str) -> list[dict[str, str]]:
    return [{"Key": k} for k in keys]


def versioned(s3: Any, bucket: str) -> str:
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    return bucket


def data_files(gateway: Running) -> set[Path]:
    root = gateway.data_dir / "objects"
    return {p for p in root.rglob("*") if p.is_file() and "tmp" not in p.relative_to(root).parts}


def post_delete(gateway: Running, bucket: str, body: bytes, md5: bool = True) -> Any:
    headers = {"content-md5": base64.b64encode(hashlib.md5(body).digest()).decode()} if md5 else {}
    return raw_request(gateway, "POST", f"/{bucket}", {"delete": ""}, body, headers)


def test_a_thousand_keys_go_in_one_request(
    gateway: Running, s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3.create_bucket(Bucket="bulk")
    keys = [f"k/{n:04d}" for n in range(1000)]
    seed(gateway, "bulk", [*keys, "kept"])
    calls: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(len(args[2]))
        return delete_objects(*args, **kwargs)

    monkeypatch.setattr(metabase, "delete_objects", counted)
    result = s3.delete_objects(Bucket="bulk", Delete={"Objects": objects(*keys)})
    assert result["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert calls == [1000]  # one metabase call (one transaction) for the whole request
    assert [d["Key"] for d in result["Deleted"]] == keys
    assert "Errors" not in result
    assert keys_in(s3, "bulk") == ["kept"]


def test_a_thousand_and_one_keys_delete_nothing(gateway: Running, s3: Any) -> None:
    s3.create_bucket(Bucket="toomany")
    keys = [f"k/{n:04d}" for n in range(1001)]
    seed(gateway, "toomany", keys)
    with pytest.raises(ClientError) as caught:
        s3.delete_objects(Bucket="toomany", Delete={"Objects": objects(*keys)})
    assert caught.value.response["Error"]["Code"] == "MalformedXML"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert keys_in(s3, "toomany") == keys


def test_quiet_mode_answers_only_errors(s3: Any) -> None:
    s3.create_bucket(Bucket="quiet")
    s3.put_object(Bucket="quiet", Key="a", Body=b"a")
    request = [{"Key": "a"}, {"Key": "b"}, {"Key": "c", "VersionId": "not-a-version"}]
    result = s3.delete_objects(Bucket="quiet", Delete={"Objects": request, "Quiet": True})
    assert "Deleted" not in result
    assert [(e["Key"], e["VersionId"], e["Code"]) for e in result["Errors"]] == [
        ("c", "not-a-version", "NoSuchVersion")
    ]
    assert keys_in(s3, "quiet") == []
    loud = s3.delete_objects(Bucket="quiet", Delete={"Objects": objects("a"), "Quiet": False})
    assert [d["Key"] for d in loud["Deleted"]] == ["a"]


def test_unversioned_bucket_deletes_without_markers(s3: Any) -> None:
    s3.create_bucket(Bucket="plain")
    s3.put_object(Bucket="plain", Key="a", Body=b"a")
    result = s3.delete_objects(Bucket="plain", Delete={"Objects": objects("a", "absent")})
    assert result["Deleted"] == [{"Key": "a"}, {"Key": "absent"}]
    assert s3.list_object_versions(Bucket="plain").get("Versions") is None
    assert s3.list_object_versions(Bucket="plain").get("DeleteMarkers") is None


def test_versioned_bucket_places_delete_markers(s3: Any) -> None:
    versioned(s3, "markers")
    put = s3.put_object(Bucket="markers", Key="a", Body=b"a")
    result = s3.delete_objects(Bucket="markers", Delete={"Objects": objects("a", "ghost")})
    listing = s3.list_object_versions(Bucket="markers")
    markers = {m["Key"]: m["VersionId"] for m in listing["DeleteMarkers"]}
    assert result["Deleted"] == [
        {"Key": "a", "DeleteMarker": True, "DeleteMarkerVersionId": markers["a"]},
        {"Key": "ghost", "DeleteMarker": True, "DeleteMarkerVersionId": markers["ghost"]},
    ]
    # nothing was deleted: the version is still there, under the marker
    assert [(v["Key"], v["VersionId"]) for v in listing["Versions"]] == [("a", put["VersionId"])]
    assert keys_in(s3, "markers") == []


def test_suspended_bucket_replaces_the_null_version_with_a_null_marker(s3: Any) -> None:
    versioned(s3, "suspended")
    kept = s3.put_object(Bucket="suspended", Key="a", Body=b"v")
    s3.put_bucket_versioning(Bucket="suspended", VersioningConfiguration={"Status": "Suspended"})
    s3.put_object(Bucket="suspended", Key="a", Body=b"null")
    result = s3.delete_objects(Bucket="suspended", Delete={"Objects": objects("a")})
    assert result["Deleted"] == [
        {"Key": "a", "DeleteMarker": True, "DeleteMarkerVersionId": "null"}
    ]
    listing = s3.list_object_versions(Bucket="suspended")
    assert [v["VersionId"] for v in listing["Versions"]] == [kept["VersionId"]]
    assert [m["VersionId"] for m in listing["DeleteMarkers"]] == ["null"]


def test_specific_versions_and_delete_markers_are_removed(s3: Any) -> None:
    versioned(s3, "exact")
    old = s3.put_object(Bucket="exact", Key="a", Body=b"old")
    new = s3.put_object(Bucket="exact", Key="a", Body=b"new")
    marker = s3.delete_object(Bucket="exact", Key="b")
    request = [
        {"Key": "a", "VersionId": old["VersionId"]},
        {"Key": "b", "VersionId": marker["VersionId"]},
        {"Key": "a", "VersionId": old["VersionId"]},  # again: answered once
    ]
    result = s3.delete_objects(Bucket="exact", Delete={"Objects": request})
    assert result["Deleted"] == [
        {"Key": "a", "VersionId": old["VersionId"]},
        {
            "Key": "b",
            "VersionId": marker["VersionId"],
            "DeleteMarker": True,
            "DeleteMarkerVersionId": marker["VersionId"],
        },
    ]
    listing = s3.list_object_versions(Bucket="exact")
    assert [v["VersionId"] for v in listing["Versions"]] == [new["VersionId"]]
    assert "DeleteMarkers" not in listing
    # deleting a version that is already gone succeeds, as in S3
    again = s3.delete_objects(
        Bucket="exact", Delete={"Objects": [{"Key": "a", "VersionId": old["VersionId"]}]}
    )
    assert again["Deleted"] == [{"Key": "a", "VersionId": old["VersionId"]}]


def test_object_lock_refuses_items_not_the_request(gateway: Running, s3: Any) -> None:
    s3.create_bucket(Bucket="locked", ObjectLockEnabledForBucket=True)
    held = s3.put_object(Bucket="locked", Key="held", Body=b"h", ObjectLockLegalHoldStatus="ON")
    free = s3.put_object(Bucket="locked", Key="free", Body=b"f")
    until = datetime.now(UTC) + timedelta(days=1)
    governed = s3.put_object(
        Bucket="locked",
        Key="governed",
        Body=b"g",
        ObjectLockMode="GOVERNANCE",
        ObjectLockRetainUntilDate=until,
    )
    items = [
        {"Key": "held", "VersionId": held["VersionId"]},
        {"Key": "free", "VersionId": free["VersionId"]},
        {"Key": "governed", "VersionId": governed["VersionId"]},
    ]
    result = s3.delete_objects(Bucket="locked", Delete={"Objects": items})
    assert result["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert result["Deleted"] == [{"Key": "free", "VersionId": free["VersionId"]}]
    assert [(e["Key"], e["VersionId"], e["Code"]) for e in result["Errors"]] == [
        ("held", held["VersionId"], "AccessDenied"),
        ("governed", governed["VersionId"], "AccessDenied"),
    ]
    assert "legal hold" in result["Errors"][0]["Message"]
    # asking to bypass governance is not enough for a restricted key without the permission
    limited, limited_secret = create_key(
        gateway.services.db, gateway.data_dir, "alice", bucket="locked"
    )
    clerk = gateway.client(limited.access_key_id, limited_secret)
    bypassing = clerk.delete_objects(
        Bucket="locked", Delete={"Objects": items[2:]}, BypassGovernanceRetention=True
    )
    assert [e["Code"] for e in bypassing["Errors"]] == ["AccessDenied"]
    allowed, secret = create_key(
        gateway.services.db,
        gateway.data_dir,
        "alice",
        bucket="locked",
        allow_bypass_governance=True,
    )
    admin = gateway.client(allowed.access_key_id, secret)
    without = admin.delete_objects(Bucket="locked", Delete={"Objects": items[2:]})
    assert [e["Code"] for e in without["Errors"]] == ["AccessDenied"]
    held_too = admin.delete_objects(
        Bucket="locked", Delete={"Objects": items}, BypassGovernanceRetention=True
    )
    assert [d["Key"] for d in held_too["Deleted"]] == ["free", "governed"]
    assert [e["Key"] for e in held_too["Errors"]] == ["held"]
    remaining = s3.list_object_versions(Bucket="locked")["Versions"]
    assert [(v["Key"], v["VersionId"]) for v in remaining] == [("held", held["VersionId"])]


def test_the_owners_unrestricted_key_bypasses_governance_in_a_bulk_delete(s3: Any) -> None:
    s3.create_bucket(Bucket="locked", ObjectLockEnabledForBucket=True)
    until = datetime.now(UTC) + timedelta(days=1)
    governed = s3.put_object(
        Bucket="locked",
        Key="governed",
        Body=b"g",
        ObjectLockMode="GOVERNANCE",
        ObjectLockRetainUntilDate=until,
    )
    items = [{"Key": "governed", "VersionId": governed["VersionId"]}]
    without = s3.delete_objects(Bucket="locked", Delete={"Objects": items})
    assert [e["Code"] for e in without["Errors"]] == ["AccessDenied"]
    bypassed = s3.delete_objects(
        Bucket="locked", Delete={"Objects": items}, BypassGovernanceRetention=True
    )
    assert bypassed["Deleted"] == items
    assert "Versions" not in s3.list_object_versions(Bucket="locked")


def test_items_outside_a_restricted_keys_prefix_are_access_denied(
    gateway: Running, s3: Any
) -> None:
    s3.create_bucket(Bucket="shared")
    seed(gateway, "shared", ["mine/a", "theirs/b", "mine/c"])
    key, secret = create_key(
        gateway.services.db, gateway.data_dir, "alice", bucket="shared", prefix="mine/"
    )
    restricted = gateway.client(key.access_key_id, secret)
    result = restricted.delete_objects(
        Bucket="shared", Delete={"Objects": objects("mine/a", "theirs/b", "mine/c")}
    )
    assert result["Deleted"] == [{"Key": "mine/a"}, {"Key": "mine/c"}]
    assert [(e["Key"], e["Code"]) for e in result["Errors"]] == [("theirs/b", "AccessDenied")]
    assert keys_in(s3, "shared") == ["theirs/b"]


def test_a_key_denied_delete_gets_an_error_per_item(gateway: Running, s3: Any) -> None:
    """As S3 judges s3:DeleteObject per key: HTTP 200, every item AccessDenied."""
    s3.create_bucket(Bucket="nodelete")
    seed(gateway, "nodelete", ["a", "b"])
    key, secret = create_key(gateway.services.db, gateway.data_dir, "alice", denied=("delete",))
    answer = gateway.client(key.access_key_id, secret).delete_objects(
        Bucket="nodelete", Delete={"Objects": objects("a", "b")}
    )
    assert answer.get("Deleted", []) == []
    assert [(e["Key"], e["Code"]) for e in answer["Errors"]] == [
        ("a", "AccessDenied"),
        ("b", "AccessDenied"),
    ]
    assert keys_in(s3, "nodelete") == ["a", "b"]


def test_results_follow_the_request_order(gateway: Running, s3: Any) -> None:
    s3.create_bucket(Bucket="order")
    seed(gateway, "order", ["c", "a", "b"])
    too_long = "x" * 1025
    body = (
        "<Delete>"
        "<Object><Key>c</Key></Object>"
        f"<Object><Key>{too_long}</Key></Object>"
        "<Object><Key>a</Key><VersionId>bogus</VersionId></Object>"
        "<Object><Key> b </Key></Object>"
        "<Object><Key>b</Key></Object>"
        "</Delete>"
    ).encode()
    response = post_delete(gateway, "order", body)
    assert response.status_code == 200
    root = ET.fromstring(response.content)
    answered = [
        (child.tag.removeprefix(NS), child.findtext(f"{NS}Key"), child.findtext(f"{NS}Code"))
        for child in root
    ]
    assert answered == [
        ("Deleted", "c", None),
        ("Error", too_long, "InvalidArgument"),
        ("Error", "a", "NoSuchVersion"),
        ("Deleted", " b ", None),
        ("Deleted", "b", None),
    ]
    assert keys_in(s3, "order") == ["a"]


@pytest.mark.parametrize(
    "body",
    [
        b"<Delete><Object><Key>a</Key>",
        b"<Delete></Delete>",
        b"<Remove><Object><Key>a</Key></Object></Remove>",
        b"<Delete><Object><VersionId>null</VersionId></Object></Delete>",
        b"<Delete><Quiet>maybe</Quiet><Object><Key>a</Key></Object></Delete>",
        b"",
    ],
)
def test_malformed_documents_are_malformed_xml(gateway: Running, s3: Any, body: bytes) -> None:
    s3.create_bucket(Bucket="malformed")
    seed(gateway, "malformed", ["a"])
    response = post_delete(gateway, "malformed", body)
    assert response.status_code == 400
    assert error_code(response) == "MalformedXML"
    assert keys_in(s3, "malformed") == ["a"]


def test_a_digest_header_is_required(gateway: Running, s3: Any) -> None:
    s3.create_bucket(Bucket="digest")
    seed(gateway, "digest", ["a"])
    body = b"<Delete><Object><Key>a</Key></Object></Delete>"
    missing = post_delete(gateway, "digest", body, md5=False)
    assert missing.status_code == 400
    assert error_code(missing) == "InvalidRequest"
    assert b"Content-MD5" in missing.content
    wrong = raw_request(
        gateway,
        "POST",
        "/digest",
        {"delete": ""},
        body,
        {"content-md5": base64.b64encode(hashlib.md5(b"other").digest()).decode()},
    )
    assert error_code(wrong) == "BadDigest"
    assert keys_in(s3, "digest") == ["a"]
    namespaced = b'<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' + body[8:]
    assert post_delete(gateway, "digest", namespaced).status_code == 200
    assert keys_in(s3, "digest") == []


def test_a_missing_bucket_fails_the_request(s3: Any) -> None:
    with pytest.raises(ClientError) as caught:
        s3.delete_objects(Bucket="missing", Delete={"Objects": objects("a")})
    assert caught.value.response["Error"]["Code"] == "NoSuchBucket"


def test_a_bulk_request_takes_one_rate_limit_token(gateway: Running, s3: Any) -> None:
    s3.create_bucket(Bucket="limited")
    gateway.services.deletes = RateLimit(gateway.services.db, "delete", rate=0.001, burst=2)
    keys = [f"k/{n:04d}" for n in range(1000)]
    for _ in range(2):
        result = s3.delete_objects(Bucket="limited", Delete={"Objects": objects(*keys)})
        assert len(result["Deleted"]) == 1000
    with pytest.raises(ClientError) as caught:
        s3.delete_objects(Bucket="limited", Delete={"Objects": objects(*keys)})
    assert caught.value.response["Error"]["Code"] == "SlowDown"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503


def test_the_data_of_deleted_objects_is_removed(gateway: Running, s3: Any) -> None:
    versioned(s3, "files")
    body = b"x" * FILE_SIZE  # over the inline limit: stored as a file
    before = data_files(gateway)
    puts = {key: s3.put_object(Bucket="files", Key=key, Body=body) for key in ("a", "b", "c")}
    written = data_files(gateway) - before
    assert len(written) == 3
    # a delete marker frees nothing; deleting the versions frees their files
    s3.delete_objects(Bucket="files", Delete={"Objects": objects("a", "b", "c")})
    assert data_files(gateway) - before == written
    items = [{"Key": k, "VersionId": puts[k]["VersionId"]} for k in ("a", "b")]
    result = s3.delete_objects(Bucket="files", Delete={"Objects": items})
    assert len(result["Deleted"]) == 2
    # files are removed once the answer is sent
    wait_for(lambda: len(data_files(gateway) - before) == 1, what="the two files removed")
    (left,) = data_files(gateway) - before
    assert left.read_bytes() == body
    got = s3.get_object(Bucket="files", Key="c", VersionId=puts["c"]["VersionId"])
    assert got["Body"].read() == body
