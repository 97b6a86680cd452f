"""ACLs through boto3 against a live gateway: Put/GetObjectAcl and Put/GetBucketAcl with
canned ACLs, grant headers and AccessControlPolicy bodies, ACLs given at PutObject,
CopyObject, CreateMultipartUpload and CreateBucket, the refusals S3 answers, and how ACLs
let another project (and anonymous requests) in, or keep them out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from ripple.gateway import auth
from ripple.metabase.acl import ALL_USERS, AUTHENTICATED_USERS
from ripple.metabase.put_object import put_object
from ripple.metabase.rows import new_stream_id
from tests.gateway.conftest import Running
from tests.gateway.helpers import anonymous, second_user
from tests.gateway.wire import error_code, raw_request

BUCKET = "photos"


def code_of(caught: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    response = caught.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


def grants_of(answer: dict[str, Any]) -> list[tuple[str, str]]:
    """(grantee id or URI, permission) of a GetObjectAcl / GetBucketAcl answer."""
    return [
        (g["Grantee"].get("ID") or g["Grantee"]["URI"], g["Permission"]) for g in answer["Grants"]
    ]


def owner_id(gateway: Running) -> str:
    return str(gateway.key.project_public_id)


def test_object_acl_canned_and_private_by_default(s3: Any, gateway: Running) -> None:
    owner = owner_id(gateway)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="a", Body=b"data")
    got = s3.get_object_acl(Bucket=BUCKET, Key="a")
    assert got["Owner"] == {"ID": owner, "DisplayName": "alice"}
    assert got["Grants"] == [
        {
            "Grantee": {"ID": owner, "DisplayName": "alice", "Type": "CanonicalUser"},
            "Permission": "FULL_CONTROL",
        }
    ]
    put = s3.put_object_acl(Bucket=BUCKET, Key="a", ACL="public-read")
    assert "VersionId" not in put
    assert grants_of(s3.get_object_acl(Bucket=BUCKET, Key="a")) == [
        (owner, "FULL_CONTROL"),
        (ALL_USERS, "READ"),
    ]
    assert s3.get_object_acl(Bucket=BUCKET, Key="a")["Grants"][1]["Grantee"]["Type"] == "Group"
    s3.put_object_acl(Bucket=BUCKET, Key="a", ACL="authenticated-read")
    assert grants_of(s3.get_object_acl(Bucket=BUCKET, Key="a")) == [
        (owner, "FULL_CONTROL"),
        (AUTHENTICATED_USERS, "READ"),
    ]
    s3.put_object_acl(Bucket=BUCKET, Key="a", ACL="bucket-owner-full-control")
    assert grants_of(s3.get_object_acl(Bucket=BUCKET, Key="a")) == [(owner, "FULL_CONTROL")]


def test_object_acl_by_grant_headers_and_policy_body(s3: Any, gateway: Running) -> None:
    owner = owner_id(gateway)
    bob, _ = second_user(gateway)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="a", Body=b"data")
    s3.put_object_acl(
        Bucket=BUCKET,
        Key="a",
        GrantFullControl=f'id="{owner}"',
        GrantRead=f'id="{bob}", uri="{ALL_USERS}"',
        GrantWriteACP=f'id="{bob}"',
    )
    got = s3.get_object_acl(Bucket=BUCKET, Key="a")
    assert grants_of(got) == [
        (owner, "FULL_CONTROL"),
        (bob, "WRITE_ACP"),
        (bob, "READ"),
        (ALL_USERS, "READ"),
    ]
    assert got["Grants"][1]["Grantee"]["DisplayName"] == "bob"
    # what GetObjectAcl answers, PutObjectAcl takes back (the AccessControlPolicy body)
    policy = {"Owner": got["Owner"], "Grants": [got["Grants"][0], got["Grants"][3]]}
    s3.put_object_acl(Bucket=BUCKET, Key="a", AccessControlPolicy=policy)
    assert grants_of(s3.get_object_acl(Bucket=BUCKET, Key="a")) == [
        (owner, "FULL_CONTROL"),
        (ALL_USERS, "READ"),
    ]


def test_object_acl_of_versions(s3: Any) -> None:
    s3.create_bucket(Bucket=BUCKET)
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    v1 = s3.put_object(Bucket=BUCKET, Key="a", Body=b"1")["VersionId"]
    v2 = s3.put_object(Bucket=BUCKET, Key="a", Body=b"2")["VersionId"]
    put = s3.put_object_acl(Bucket=BUCKET, Key="a", VersionId=v1, ACL="public-read")
    assert put["ResponseMetadata"]["HTTPHeaders"]["x-amz-version-id"] == v1
    old = s3.get_object_acl(Bucket=BUCKET, Key="a", VersionId=v1)
    assert len(old["Grants"]) == 2
    latest = s3.get_object_acl(Bucket=BUCKET, Key="a")
    assert latest["ResponseMetadata"]["HTTPHeaders"]["x-amz-version-id"] == v2
    assert len(latest["Grants"]) == 1


def test_acl_given_at_creation(s3: Any, gateway: Running) -> None:
    owner = owner_id(gateway)
    public = [(owner, "FULL_CONTROL"), (ALL_USERS, "READ")]
    s3.create_bucket(Bucket=BUCKET, ACL="public-read")
    assert grants_of(s3.get_bucket_acl(Bucket=BUCKET)) == public
    s3.put_object(Bucket=BUCKET, Key="a", Body=b"data", ACL="public-read")
    assert grants_of(s3.get_object_acl(Bucket=BUCKET, Key="a")) == public
    # an overwrite takes the request's ACL (none: private), a copy never the source's
    s3.copy_object(Bucket=BUCKET, Key="b", CopySource={"Bucket": BUCKET, "Key": "a"})
    assert grants_of(s3.get_object_acl(Bucket=BUCKET, Key="b")) == [(owner, "FULL_CONTROL")]
    s3.copy_object(
        Bucket=BUCKET,
        Key="c",
        CopySource={"Bucket": BUCKET, "Key": "a"},
        GrantRead=f'uri="{ALL_USERS}"',
    )
    assert grants_of(s3.get_object_acl(Bucket=BUCKET, Key="c")) == [(ALL_USERS, "READ")]
    s3.put_object(Bucket=BUCKET, Key="a", Body=b"new")
    assert grants_of(s3.get_object_acl(Bucket=BUCKET, Key="a")) == [(owner, "FULL_CONTROL")]
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key="m", ACL="public-read")["UploadId"]
    part = s3.upload_part(Bucket=BUCKET, Key="m", UploadId=upload, PartNumber=1, Body=b"x")
    s3.complete_multipart_upload(
        Bucket=BUCKET,
        Key="m",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert grants_of(s3.get_object_acl(Bucket=BUCKET, Key="m")) == public


def test_bucket_acl(s3: Any, gateway: Running) -> None:
    owner = owner_id(gateway)
    bob, _ = second_user(gateway)
    s3.create_bucket(Bucket=BUCKET)
    got = s3.get_bucket_acl(Bucket=BUCKET)
    assert got["Owner"] == {"ID": owner, "DisplayName": "alice"}
    assert grants_of(got) == [(owner, "FULL_CONTROL")]
    s3.put_bucket_acl(Bucket=BUCKET, ACL="public-read-write")
    assert grants_of(s3.get_bucket_acl(Bucket=BUCKET)) == [
        (owner, "FULL_CONTROL"),
        (ALL_USERS, "WRITE"),
        (ALL_USERS, "READ"),
    ]
    s3.put_bucket_acl(
        Bucket=BUCKET,
        AccessControlPolicy={
            "Owner": {"ID": owner},
            "Grants": [
                {"Grantee": {"Type": "CanonicalUser", "ID": owner}, "Permission": "FULL_CONTROL"},
                {"Grantee": {"Type": "CanonicalUser", "ID": bob}, "Permission": "READ"},
            ],
        },
    )
    assert grants_of(s3.get_bucket_acl(Bucket=BUCKET)) == [(owner, "FULL_CONTROL"), (bob, "READ")]


def test_refusals(s3: Any, gateway: Running) -> None:
    owner = owner_id(gateway)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="a", Body=b"data")
    s3.put_object_acl(Bucket=BUCKET, Key="a", ACL="public-read")
    before = grants_of(s3.get_object_acl(Bucket=BUCKET, Key="a"))

    def refused(**kwargs: Any) -> tuple[str, int]:
        with pytest.raises(ClientError) as caught:
            s3.put_object_acl(Bucket=BUCKET, Key="a", **kwargs)
        return code_of(caught)

    assert refused(ACL="public-read", GrantRead=f'id="{owner}"') == ("InvalidRequest", 400)
    assert refused(ACL="log-delivery-write") == ("NotImplemented", 501)
    assert refused(GrantRead='emailAddress="x@example.com"') == (
        "UnresolvableGrantByEmailAddress",
        400,
    )
    assert refused(GrantRead='id="33333333-3333-3333-3333-333333333333"') == (
        "InvalidArgument",
        400,
    )
    assert refused(GrantRead='id="not-a-project"') == ("InvalidArgument", 400)
    grant = {"Grantee": {"Type": "CanonicalUser", "ID": owner}, "Permission": "FULL_CONTROL"}
    wrong_owner = {"Owner": {"ID": "33333333-3333-3333-3333-333333333333"}, "Grants": [grant]}
    assert refused(AccessControlPolicy=wrong_owner) == ("AccessDenied", 403)
    unknown = {"Owner": {"ID": owner}, "Grants": [{**grant, "Permission": "OWN"}]}
    assert refused(AccessControlPolicy=unknown) == ("MalformedACLError", 400)
    both = {"Owner": {"ID": owner}, "Grants": [grant]}
    assert refused(AccessControlPolicy=both, ACL="private") == ("InvalidRequest", 400)
    assert grants_of(s3.get_object_acl(Bucket=BUCKET, Key="a")) == before  # nothing written
    with pytest.raises(ClientError) as caught:
        s3.put_object(Bucket=BUCKET, Key="b", Body=b"x", ACL="everyone")
    assert code_of(caught) == ("InvalidArgument", 400)
    with pytest.raises(ClientError) as caught:
        s3.get_object_acl(Bucket=BUCKET, Key="missing")
    assert code_of(caught) == ("NoSuchKey", 404)
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]] == ["a"]


def test_policy_documents_on_the_wire(gateway: Running, s3: Any) -> None:
    """Malformed XML is MalformedXML; xsi:type is read whatever its prefix, and a grantee
    without one is known by what it holds."""
    s3.create_bucket(Bucket=BUCKET)
    broken = raw_request(
        gateway, "PUT", f"/{BUCKET}", {"acl": ""}, b"<AccessControlPolicy><AccessControlList>"
    )
    assert (broken.status_code, error_code(broken)) == (400, "MalformedXML")
    owner = owner_id(gateway)
    group = f'<Grantee x:type="Group"><URI>{ALL_USERS}</URI></Grantee>'
    user = f"<Grantee><ID>{owner}</ID></Grantee>"  # no xsi:type
    body = (
        '<AccessControlPolicy xmlns="http://s3.amazonaws.com/doc/2006-03-01/" '
        'xmlns:x="http://www.w3.org/2001/XMLSchema-instance"><AccessControlList>'
        f"<Grant>{group}<Permission>READ</Permission></Grant>"
        f"<Grant>{user}<Permission>FULL_CONTROL</Permission></Grant>"
        "</AccessControlList></AccessControlPolicy>"
    )
    ok = raw_request(gateway, "PUT", f"/{BUCKET}", {"acl": ""}, body.encode())
    assert ok.status_code == 200, ok.text
    assert grants_of(s3.get_bucket_acl(Bucket=BUCKET)) == [
        (owner_id(gateway), "FULL_CONTROL"),
        (ALL_USERS, "READ"),
    ]
    empty = raw_request(gateway, "PUT", f"/{BUCKET}", {"acl": ""})
    assert (empty.status_code, error_code(empty)) == (400, "MissingSecurityHeader")


def test_another_project_is_refused_until_granted(s3: Any, gateway: Running) -> None:
    bob, as_bob = second_user(gateway)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="a", Body=b"alice's")

    def denied(call: Any, **kwargs: Any) -> None:
        with pytest.raises(ClientError) as caught:
            call(Bucket=BUCKET, **kwargs)
        assert code_of(caught)[0] == "AccessDenied"

    denied(as_bob.get_object, Key="a")
    denied(as_bob.list_objects_v2)
    denied(as_bob.put_object, Key="b", Body=b"bob's")
    denied(as_bob.get_bucket_acl)
    denied(as_bob.put_object_acl, Key="a", ACL="public-read")

    s3.put_object_acl(Bucket=BUCKET, Key="a", GrantRead=f'id="{bob}"')
    assert as_bob.get_object(Bucket=BUCKET, Key="a")["Body"].read() == b"alice's"
    assert as_bob.head_object(Bucket=BUCKET, Key="a")["ContentLength"] == 7
    denied(as_bob.list_objects_v2)  # the object grant gives no bucket permission
    denied(as_bob.get_object_acl, Key="a")
    denied(as_bob.get_object, Key="missing")  # no bucket READ: not even NoSuchKey

    s3.put_bucket_acl(Bucket=BUCKET, GrantRead=f'id="{bob}"', GrantWrite=f'id="{bob}"')
    listed = as_bob.list_objects_v2(Bucket=BUCKET, FetchOwner=True)
    assert [o["Key"] for o in listed["Contents"]] == ["a"]
    assert listed["Contents"][0]["Owner"]["ID"] == owner_id(gateway)
    as_bob.put_object(Bucket=BUCKET, Key="b", Body=b"bob's")
    # bob's object is in alice's bucket and belongs to alice
    assert s3.get_object(Bucket=BUCKET, Key="b")["Body"].read() == b"bob's"
    assert s3.get_object_acl(Bucket=BUCKET, Key="b")["Owner"]["ID"] == owner_id(gateway)
    denied(as_bob.get_object, Key="b")  # private: alice's alone
    with pytest.raises(ClientError) as caught:
        as_bob.get_object(Bucket=BUCKET, Key="missing")
    assert code_of(caught) == ("NoSuchKey", 404)  # with bucket READ
    as_bob.delete_object(Bucket=BUCKET, Key="b")
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]] == ["a"]
    # owner-only operations stay the owner's, whatever the ACL
    denied(as_bob.get_bucket_versioning)
    denied(as_bob.put_object_tagging, Key="a", Tagging={"TagSet": []})
    denied(as_bob.delete_bucket)
    denied(as_bob.get_bucket_acl)  # READ_ACP was not granted
    s3.put_bucket_acl(Bucket=BUCKET, GrantFullControl=f'id="{bob}"')
    assert grants_of(as_bob.get_bucket_acl(Bucket=BUCKET)) == [(bob, "FULL_CONTROL")]
    # bob's own buckets are not affected, and a bucket that exists nowhere is NoSuchBucket
    with pytest.raises(ClientError) as caught:
        as_bob.list_objects_v2(Bucket="nowhere")
    assert code_of(caught) == ("NoSuchBucket", 404)


def test_cross_project_copy_needs_source_read(s3: Any, gateway: Running) -> None:
    bob, as_bob = second_user(gateway)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="a", Body=b"alice's")
    as_bob.create_bucket(Bucket="bobs")
    source = {"Bucket": BUCKET, "Key": "a"}
    with pytest.raises(ClientError) as caught:
        as_bob.copy_object(Bucket="bobs", Key="copy", CopySource=source)
    assert code_of(caught)[0] == "AccessDenied"
    s3.put_object_acl(Bucket=BUCKET, Key="a", GrantRead=f'id="{bob}"')
    as_bob.copy_object(Bucket="bobs", Key="copy", CopySource=source)
    assert as_bob.get_object(Bucket="bobs", Key="copy")["Body"].read() == b"alice's"
    acl = as_bob.get_object_acl(Bucket="bobs", Key="copy")
    assert acl["Owner"]["ID"] == bob  # the copy is bob's, in bob's bucket


def test_anonymous_requests(s3: Any, gateway: Running) -> None:
    anon = anonymous(gateway)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="public", Body=b"for all", ACL="public-read")
    s3.put_object(Bucket=BUCKET, Key="private", Body=b"secret")

    def denied(call: Any, **kwargs: Any) -> None:
        with pytest.raises(ClientError) as caught:
            call(**kwargs)
        assert code_of(caught) == ("AccessDenied", 403)
        assert "anonymous requests are not allowed" in caught.value.response["Error"]["Message"]

    assert anon.get_object(Bucket=BUCKET, Key="public")["Body"].read() == b"for all"
    denied(anon.get_object, Bucket=BUCKET, Key="private")
    denied(anon.list_objects_v2, Bucket=BUCKET)
    denied(anon.put_object, Bucket=BUCKET, Key="x", Body=b"x")
    denied(anon.list_buckets)
    # a bucket that exists nowhere is NoSuchBucket for anyone, as S3 answers
    for call, kwargs in (
        (anon.get_object, {"Key": "a"}),
        (anon.delete_object, {"Key": "a"}),
        (anon.put_object, {"Key": "a", "Body": b"x"}),
        (anon.list_objects_v2, {}),
        (anon.delete_objects, {"Delete": {"Objects": [{"Key": "a"}]}}),
    ):
        with pytest.raises(ClientError) as caught:
            call(Bucket="nowhere", **kwargs)
        assert code_of(caught) == ("NoSuchBucket", 404)
    s3.put_object_acl(Bucket=BUCKET, Key="public", ACL="authenticated-read")
    denied(anon.get_object, Bucket=BUCKET, Key="public")

    s3.put_bucket_acl(Bucket=BUCKET, ACL="public-read")
    assert sorted(o["Key"] for o in anon.list_objects_v2(Bucket=BUCKET)["Contents"]) == [
        "private",
        "public",
    ]
    denied(anon.get_object, Bucket=BUCKET, Key="private")
    denied(anon.put_object, Bucket=BUCKET, Key="x", Body=b"x")
    s3.put_bucket_acl(Bucket=BUCKET, ACL="public-read-write")
    anon.put_object(Bucket=BUCKET, Key="x", Body=b"anyone's")
    assert s3.get_object(Bucket=BUCKET, Key="x")["Body"].read() == b"anyone's"
    denied(anon.get_bucket_acl, Bucket=BUCKET)
    denied(anon.put_bucket_versioning, Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})


def test_bad_signature_is_not_taken_for_anonymous(s3: Any, gateway: Running) -> None:
    s3.create_bucket(Bucket=BUCKET, ACL="public-read")
    s3.put_object(Bucket=BUCKET, Key="public", Body=b"x", ACL="public-read")
    wrong = gateway.client(gateway.key.access_key_id, "x" * 40)
    with pytest.raises(ClientError) as caught:
        wrong.get_object(Bucket=BUCKET, Key="public")
    assert code_of(caught) == ("SignatureDoesNotMatch", 403)


def test_owner_requests_are_unaffected_by_acls(s3: Any) -> None:
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="a", Body=b"data")
    s3.put_bucket_acl(Bucket=BUCKET, AccessControlPolicy={"Owner": {}, "Grants": []})
    s3.put_object_acl(Bucket=BUCKET, Key="a", AccessControlPolicy={"Grants": []})
    # no grant is left, yet the owner still does everything
    assert s3.get_object_acl(Bucket=BUCKET, Key="a")["Grants"] == []
    assert s3.get_object(Bucket=BUCKET, Key="a")["Body"].read() == b"data"
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]] == ["a"]
    s3.put_object(Bucket=BUCKET, Key="b", Body=b"more")
    s3.delete_object(Bucket=BUCKET, Key="b")
    s3.put_bucket_acl(Bucket=BUCKET, ACL="private")
    assert len(s3.get_bucket_acl(Bucket=BUCKET)["Grants"]) == 1


# --- what no ACL grants, and ACLs judged on the version actually served ----------------


def _versions(s3: Any, bucket: str = BUCKET) -> list[tuple[str, str]]:
    """(key, version id) of every version and delete marker of the bucket."""
    listed = s3.list_object_versions(Bucket=bucket)
    found = [*listed.get("Versions", []), *listed.get("DeleteMarkers", [])]
    return sorted((v["Key"], v["VersionId"]) for v in found)


def test_non_owners_may_not_lock_or_tag_what_they_write(s3: Any, gateway: Running) -> None:
    _, as_bob = second_user(gateway)  # let in by the AllUsers grant
    anon = anonymous(gateway)
    s3.create_bucket(Bucket=BUCKET, ObjectLockEnabledForBucket=True)
    s3.put_bucket_acl(Bucket=BUCKET, ACL="public-read-write")
    s3.put_object(Bucket=BUCKET, Key="src", Body=b"source", ACL="public-read")
    before = _versions(s3)
    until = datetime.now(UTC) + timedelta(days=365)
    refused: list[dict[str, Any]] = [
        {"ObjectLockMode": "COMPLIANCE", "ObjectLockRetainUntilDate": until},
        {"ObjectLockMode": "GOVERNANCE", "ObjectLockRetainUntilDate": until},
        {"ObjectLockLegalHoldStatus": "ON"},
        {"ObjectLockLegalHoldStatus": "OFF"},
        {"Tagging": "team=bob"},
    ]
    source = {"Bucket": BUCKET, "Key": "src"}
    for client in (as_bob, anon):
        for headers in refused:
            calls: list[tuple[Any, dict[str, Any]]] = [
                (client.put_object, {"Body": b"x"}),
                (client.create_multipart_upload, {}),
                (client.copy_object, {"CopySource": source}),
            ]
            if "Tagging" in headers:
                calls[2] = (
                    client.copy_object,
                    {"CopySource": source, "TaggingDirective": "REPLACE"},
                )
            for call, kwargs in calls:
                with pytest.raises(ClientError) as caught:
                    call(Bucket=BUCKET, Key="target", **kwargs, **headers)
                assert code_of(caught) == ("AccessDenied", 403), (call, headers)
    # nothing was written: no version, no upload
    assert _versions(s3) == before
    assert "Uploads" not in s3.list_multipart_uploads(Bucket=BUCKET)
    # the same writes without those headers are let through; the owner may send them
    as_bob.put_object(Bucket=BUCKET, Key="target", Body=b"bob's")
    anon.copy_object(Bucket=BUCKET, Key="copy", CopySource=source)
    head = s3.head_object(Bucket=BUCKET, Key="target")
    assert "ObjectLockMode" not in head
    assert "ObjectLockLegalHoldStatus" not in head
    s3.put_object(
        Bucket=BUCKET, Key="mine", Body=b"x", ObjectLockLegalHoldStatus="ON", Tagging="a=b"
    )
    assert s3.head_object(Bucket=BUCKET, Key="mine")["ObjectLockLegalHoldStatus"] == "ON"


def test_non_owners_may_not_delete_versions(s3: Any, gateway: Running) -> None:
    bob, as_bob = second_user(gateway)
    anon = anonymous(gateway)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    s3.put_bucket_acl(
        Bucket=BUCKET, GrantWrite=f'id="{bob}", uri="{ALL_USERS}"', GrantRead=f'id="{bob}"'
    )
    v1 = s3.put_object(Bucket=BUCKET, Key="a", Body=b"1")["VersionId"]
    v2 = s3.put_object(Bucket=BUCKET, Key="a", Body=b"2")["VersionId"]
    s3.put_object(Bucket=BUCKET, Key="b", Body=b"b")
    before = _versions(s3)
    for client in (as_bob, anon):
        with pytest.raises(ClientError) as caught:
            client.delete_object(Bucket=BUCKET, Key="a", VersionId=v1)
        assert code_of(caught) == ("AccessDenied", 403)
    assert _versions(s3) == before
    answer = as_bob.delete_objects(
        Bucket=BUCKET,
        Delete={
            "Objects": [{"Key": "a", "VersionId": v2}, {"Key": "b"}, {"Key": "a", "VersionId": v1}]
        },
    )
    assert [(e["Key"], e["VersionId"], e["Code"]) for e in answer["Errors"]] == [
        ("a", v2, "AccessDenied"),
        ("a", v1, "AccessDenied"),
    ]
    assert "specific version" in answer["Errors"][0]["Message"]
    assert [(d["Key"], d.get("DeleteMarker")) for d in answer["Deleted"]] == [("b", True)]
    answer = anon.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": "a", "VersionId": v1}]})
    assert [e["Code"] for e in answer["Errors"]] == ["AccessDenied"]
    assert "Deleted" not in answer
    # both versions of a are still there; b got a delete marker (a plain delete is WRITE)
    after = _versions(s3)
    assert {("a", v1), ("a", v2)} <= set(after)
    assert len(after) == len(before) + 1
    # a delete without a version id is allowed; the owner may delete versions
    assert as_bob.delete_object(Bucket=BUCKET, Key="a")["DeleteMarker"] is True
    s3.delete_object(Bucket=BUCKET, Key="a", VersionId=v1)
    assert ("a", v1) not in _versions(s3)


def _overwritten_after_check(
    monkeypatch: pytest.MonkeyPatch, gateway: Running, body: bytes
) -> list[int]:
    """Make every ACL check of `grant_access` be followed, before the handler runs, by an
    overwrite of `photos/a` as a private version (what a racing owner PUT does)."""
    db = gateway.services.db
    real = auth.acl_version
    calls: list[int] = []

    def then_overwrite(db_: Any, loc: Any, version_id: str | None = None) -> Any:
        judged = real(db_, loc, version_id)
        put_object(
            db, loc, stream_id=new_stream_id(), size=len(body), etag="0" * 32, inline_data=body
        )
        calls.append(1)
        return judged

    monkeypatch.setattr(auth, "acl_version", then_overwrite)
    return calls


def test_reads_are_judged_on_the_version_served(
    s3: Any, gateway: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    anon = anonymous(gateway)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="a", Body=b"public", ACL="public-read")
    calls = _overwritten_after_check(monkeypatch, gateway, b"private")
    with pytest.raises(ClientError) as caught:
        anon.get_object(Bucket=BUCKET, Key="a")
    assert code_of(caught) == ("AccessDenied", 403)
    with pytest.raises(ClientError) as caught:
        anon.head_object(Bucket=BUCKET, Key="a")
    assert code_of(caught)[1] == 403  # HEAD: no error body
    assert len(calls) == 2  # the ACL check did see the public version
    monkeypatch.undo()
    assert s3.get_object(Bucket=BUCKET, Key="a")["Body"].read() == b"private"
    s3.put_object_acl(Bucket=BUCKET, Key="a", ACL="public-read")
    assert anon.get_object(Bucket=BUCKET, Key="a")["Body"].read() == b"private"


def test_object_acl_calls_are_judged_on_the_version_changed(
    s3: Any, gateway: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = owner_id(gateway)
    bob, as_bob = second_user(gateway)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="a", Body=b"1", GrantFullControl=f'id="{bob}"')
    calls = _overwritten_after_check(monkeypatch, gateway, b"2")
    with pytest.raises(ClientError) as caught:
        as_bob.put_object_acl(Bucket=BUCKET, Key="a", ACL="public-read-write")
    assert code_of(caught) == ("AccessDenied", 403)
    with pytest.raises(ClientError) as caught:
        as_bob.get_object_acl(Bucket=BUCKET, Key="a")
    assert code_of(caught) == ("AccessDenied", 403)
    assert len(calls) == 2
    monkeypatch.undo()
    # the new (latest) version kept its private ACL
    assert grants_of(s3.get_object_acl(Bucket=BUCKET, Key="a")) == [(owner, "FULL_CONTROL")]
    s3.put_object_acl(
        Bucket=BUCKET, Key="a", GrantWriteACP=f'id="{bob}"', GrantReadACP=f'id="{bob}"'
    )
    as_bob.put_object_acl(Bucket=BUCKET, Key="a", GrantRead=f'id="{bob}"')
    with pytest.raises(ClientError) as caught:  # its READ_ACP is gone with the change
        as_bob.get_object_acl(Bucket=BUCKET, Key="a")
    assert code_of(caught) == ("AccessDenied", 403)


def test_copy_sources_reveal_nothing_without_read(s3: Any, gateway: Running) -> None:
    bob, as_bob = second_user(gateway)
    s3.create_bucket(Bucket=BUCKET)
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket=BUCKET, Key="gone", Body=b"x", GrantRead=f'id="{bob}"')
    marker = s3.delete_object(Bucket=BUCKET, Key="gone")["VersionId"]
    as_bob.create_bucket(Bucket="bobs")
    upload = as_bob.create_multipart_upload(Bucket="bobs", Key="m")["UploadId"]
    sources: list[dict[str, str]] = [
        {"Bucket": BUCKET, "Key": "missing"},
        {"Bucket": BUCKET, "Key": "gone"},  # the latest is a delete marker
        {"Bucket": BUCKET, "Key": "gone", "VersionId": marker},
    ]

    def codes(source: dict[str, str]) -> list[str]:
        found = []
        with pytest.raises(ClientError) as caught:
            as_bob.copy_object(Bucket="bobs", Key="copy", CopySource=source)
        found.append(code_of(caught)[0])
        with pytest.raises(ClientError) as caught:
            as_bob.upload_part_copy(
                Bucket="bobs", Key="m", UploadId=upload, PartNumber=1, CopySource=source
            )
        found.append(code_of(caught)[0])
        return found

    for source in sources:
        assert codes(source) == ["AccessDenied", "AccessDenied"], source
    # with READ on the source bucket, what is missing may be told
    s3.put_bucket_acl(Bucket=BUCKET, GrantRead=f'id="{bob}"')
    assert codes(sources[0]) == ["NoSuchKey", "NoSuchKey"]
    assert codes(sources[1]) == ["NoSuchKey", "NoSuchKey"]
    assert codes(sources[2]) == ["InvalidRequest", "InvalidRequest"]
    assert "Contents" not in as_bob.list_objects_v2(Bucket="bobs")
