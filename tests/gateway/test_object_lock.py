"""Object retention and legal hold through boto3 against a live gateway: put and get on the
latest version and on a given one, governance bypass with and without the permission,
compliance that cannot be shortened, deletes refused while locked, and the refusals."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from ripple.identity import create_key
from tests.gateway.conftest import Running
from tests.gateway.wire import error_code, raw_request

BUCKET = "vault"


def soon(days: float) -> datetime:
    """A time `days` from now, at whole milliseconds (what S3's XML carries)."""
    when = datetime.now(UTC) + timedelta(days=days)
    return when.replace(microsecond=when.microsecond // 1000 * 1000)


def code_of(caught: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    response = caught.value.response
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


@pytest.fixture
def vault(s3: Any) -> dict[str, Any]:
    """A bucket with object lock holding one object, `k`; its PutObject response."""
    s3.create_bucket(Bucket=BUCKET, ObjectLockEnabledForBucket=True)
    return dict(s3.put_object(Bucket=BUCKET, Key="k", Body=b"data"))


def bypasser(gateway: Running) -> Any:
    """A key of alice's restricted to the bucket, made with --allow-bypass-governance."""
    return restricted(gateway, allow_bypass_governance=True)


def restricted(gateway: Running, *, allow_bypass_governance: bool = False) -> Any:
    """A key of alice's restricted to the bucket: not the account owner's."""
    key, secret = create_key(
        gateway.services.db,
        gateway.data_dir,
        "alice",
        bucket=BUCKET,
        allow_bypass_governance=allow_bypass_governance,
    )
    return gateway.client(key.access_key_id, secret)


def test_retention_is_put_and_got(s3: Any, vault: dict[str, Any]) -> None:
    with pytest.raises(ClientError) as caught:
        s3.get_object_retention(Bucket=BUCKET, Key="k")
    assert code_of(caught) == ("NoSuchObjectLockConfiguration", 404)
    until = soon(1)
    s3.put_object_retention(
        Bucket=BUCKET, Key="k", Retention={"Mode": "GOVERNANCE", "RetainUntilDate": until}
    )
    got = s3.get_object_retention(Bucket=BUCKET, Key="k")["Retention"]
    assert got == {"Mode": "GOVERNANCE", "RetainUntilDate": until}
    head = s3.head_object(Bucket=BUCKET, Key="k")
    assert head["ObjectLockMode"] == "GOVERNANCE"
    assert head["ObjectLockRetainUntilDate"] == until
    by_version = s3.get_object_retention(Bucket=BUCKET, Key="k", VersionId=vault["VersionId"])
    assert by_version["Retention"]["Mode"] == "GOVERNANCE"


def test_retention_applies_to_the_version_named(s3: Any, vault: dict[str, Any]) -> None:
    newer = s3.put_object(Bucket=BUCKET, Key="k", Body=b"newer")
    until = soon(2)
    s3.put_object_retention(
        Bucket=BUCKET,
        Key="k",
        VersionId=vault["VersionId"],
        Retention={"Mode": "COMPLIANCE", "RetainUntilDate": until},
    )
    old = s3.get_object_retention(Bucket=BUCKET, Key="k", VersionId=vault["VersionId"])
    assert old["Retention"] == {"Mode": "COMPLIANCE", "RetainUntilDate": until}
    with pytest.raises(ClientError) as caught:
        s3.get_object_retention(Bucket=BUCKET, Key="k")
    assert code_of(caught) == ("NoSuchObjectLockConfiguration", 404)
    # the newer version is free to go; the retained one is not
    s3.delete_object(Bucket=BUCKET, Key="k", VersionId=newer["VersionId"])
    with pytest.raises(ClientError) as caught:
        s3.delete_object(Bucket=BUCKET, Key="k", VersionId=vault["VersionId"])
    assert code_of(caught) == ("AccessDenied", 403)


def test_governance_is_weakened_only_with_an_allowed_bypass(
    gateway: Running, s3: Any, vault: dict[str, Any]
) -> None:
    s3.put_object_retention(
        Bucket=BUCKET, Key="k", Retention={"Mode": "GOVERNANCE", "RetainUntilDate": soon(3)}
    )
    shorter = {"Mode": "GOVERNANCE", "RetainUntilDate": soon(1)}
    clerk = restricted(gateway)
    # without asking, and asking without the permission: refused
    for bypass in (False, True):
        with pytest.raises(ClientError) as caught:
            clerk.put_object_retention(
                Bucket=BUCKET, Key="k", Retention=shorter, BypassGovernanceRetention=bypass
            )
        assert code_of(caught) == ("AccessDenied", 403)
    admin = bypasser(gateway)
    with pytest.raises(ClientError) as caught:  # the permission without asking: refused
        admin.put_object_retention(Bucket=BUCKET, Key="k", Retention=shorter)
    assert code_of(caught) == ("AccessDenied", 403)
    admin.put_object_retention(
        Bucket=BUCKET, Key="k", Retention=shorter, BypassGovernanceRetention=True
    )
    got = s3.get_object_retention(Bucket=BUCKET, Key="k")["Retention"]
    assert got["RetainUntilDate"] == shorter["RetainUntilDate"]
    # extending needs no bypass
    longer = {"Mode": "GOVERNANCE", "RetainUntilDate": soon(5)}
    s3.put_object_retention(Bucket=BUCKET, Key="k", Retention=longer)
    assert s3.get_object_retention(Bucket=BUCKET, Key="k")["Retention"] == longer
    # deleting the version: refused, bypass without permission refused, with both allowed
    version = vault["VersionId"]
    for client, bypass in ((clerk, False), (clerk, True), (admin, False)):
        with pytest.raises(ClientError) as caught:
            client.delete_object(
                Bucket=BUCKET, Key="k", VersionId=version, BypassGovernanceRetention=bypass
            )
        assert code_of(caught) == ("AccessDenied", 403)
    admin.delete_object(Bucket=BUCKET, Key="k", VersionId=version, BypassGovernanceRetention=True)
    assert "Versions" not in s3.list_object_versions(Bucket=BUCKET)


def test_the_owners_unrestricted_key_bypasses_governance_when_it_asks(
    s3: Any, vault: dict[str, Any]
) -> None:
    s3.put_object_retention(
        Bucket=BUCKET, Key="k", Retention={"Mode": "GOVERNANCE", "RetainUntilDate": soon(3)}
    )
    shorter = {"Mode": "GOVERNANCE", "RetainUntilDate": soon(1)}
    with pytest.raises(ClientError) as caught:  # the owner too must ask
        s3.put_object_retention(Bucket=BUCKET, Key="k", Retention=shorter)
    assert code_of(caught) == ("AccessDenied", 403)
    s3.put_object_retention(
        Bucket=BUCKET, Key="k", Retention=shorter, BypassGovernanceRetention=True
    )
    got = s3.get_object_retention(Bucket=BUCKET, Key="k")["Retention"]
    assert got["RetainUntilDate"] == shorter["RetainUntilDate"]
    version = vault["VersionId"]
    with pytest.raises(ClientError) as caught:
        s3.delete_object(Bucket=BUCKET, Key="k", VersionId=version)
    assert code_of(caught) == ("AccessDenied", 403)
    s3.delete_object(Bucket=BUCKET, Key="k", VersionId=version, BypassGovernanceRetention=True)
    assert "Versions" not in s3.list_object_versions(Bucket=BUCKET)


def test_governance_retention_is_removed_with_an_empty_document_and_bypass(
    gateway: Running, s3: Any, vault: dict[str, Any]
) -> None:
    s3.put_object_retention(
        Bucket=BUCKET, Key="k", Retention={"Mode": "GOVERNANCE", "RetainUntilDate": soon(1)}
    )
    with pytest.raises(ClientError) as caught:
        restricted(gateway).put_object_retention(
            Bucket=BUCKET, Key="k", Retention={}, BypassGovernanceRetention=True
        )
    assert code_of(caught) == ("AccessDenied", 403)
    with pytest.raises(ClientError) as caught:
        s3.put_object_retention(Bucket=BUCKET, Key="k", Retention={})
    assert code_of(caught) == ("AccessDenied", 403)
    bypasser(gateway).put_object_retention(
        Bucket=BUCKET, Key="k", Retention={}, BypassGovernanceRetention=True
    )
    with pytest.raises(ClientError) as caught:
        s3.get_object_retention(Bucket=BUCKET, Key="k")
    assert code_of(caught) == ("NoSuchObjectLockConfiguration", 404)


def test_compliance_cannot_be_shortened_changed_or_bypassed(
    gateway: Running, s3: Any, vault: dict[str, Any]
) -> None:
    until = soon(2)
    s3.put_object_retention(
        Bucket=BUCKET, Key="k", Retention={"Mode": "COMPLIANCE", "RetainUntilDate": until}
    )
    admin = bypasser(gateway)
    for retention in (
        {"Mode": "COMPLIANCE", "RetainUntilDate": soon(1)},
        {"Mode": "GOVERNANCE", "RetainUntilDate": soon(3)},
        {},
    ):
        with pytest.raises(ClientError) as caught:
            admin.put_object_retention(
                Bucket=BUCKET, Key="k", Retention=retention, BypassGovernanceRetention=True
            )
        assert code_of(caught) == ("AccessDenied", 403), retention
    assert s3.get_object_retention(Bucket=BUCKET, Key="k")["Retention"]["RetainUntilDate"] == until
    later = soon(4)
    s3.put_object_retention(
        Bucket=BUCKET, Key="k", Retention={"Mode": "COMPLIANCE", "RetainUntilDate": later}
    )
    assert s3.get_object_retention(Bucket=BUCKET, Key="k")["Retention"]["RetainUntilDate"] == later
    with pytest.raises(ClientError) as caught:
        admin.delete_object(
            Bucket=BUCKET, Key="k", VersionId=vault["VersionId"], BypassGovernanceRetention=True
        )
    assert code_of(caught) == ("AccessDenied", 403)
    # a delete without a version id only places a marker, which the lock allows
    marker = s3.delete_object(Bucket=BUCKET, Key="k")
    assert marker["DeleteMarker"] is True
    listing = s3.list_object_versions(Bucket=BUCKET)
    assert [v["VersionId"] for v in listing["Versions"]] == [vault["VersionId"]]


def test_legal_hold_is_put_and_got_and_stops_deletes(
    gateway: Running, s3: Any, vault: dict[str, Any]
) -> None:
    assert s3.get_object_legal_hold(Bucket=BUCKET, Key="k")["LegalHold"] == {"Status": "OFF"}
    s3.put_object_legal_hold(Bucket=BUCKET, Key="k", LegalHold={"Status": "ON"})
    assert s3.get_object_legal_hold(Bucket=BUCKET, Key="k")["LegalHold"] == {"Status": "ON"}
    by_version = s3.get_object_legal_hold(Bucket=BUCKET, Key="k", VersionId=vault["VersionId"])
    assert by_version["LegalHold"] == {"Status": "ON"}
    assert s3.head_object(Bucket=BUCKET, Key="k")["ObjectLockLegalHoldStatus"] == "ON"
    with pytest.raises(ClientError) as caught:
        bypasser(gateway).delete_object(
            Bucket=BUCKET, Key="k", VersionId=vault["VersionId"], BypassGovernanceRetention=True
        )
    assert code_of(caught) == ("AccessDenied", 403)
    s3.put_object_legal_hold(Bucket=BUCKET, Key="k", LegalHold={"Status": "OFF"})
    assert s3.get_object_legal_hold(Bucket=BUCKET, Key="k")["LegalHold"] == {"Status": "OFF"}
    s3.delete_object(Bucket=BUCKET, Key="k", VersionId=vault["VersionId"])
    assert "Versions" not in s3.list_object_versions(Bucket=BUCKET)


def test_a_legal_hold_on_one_version_leaves_the_others(s3: Any, vault: dict[str, Any]) -> None:
    newer = s3.put_object(Bucket=BUCKET, Key="k", Body=b"newer")
    s3.put_object_legal_hold(
        Bucket=BUCKET, Key="k", VersionId=vault["VersionId"], LegalHold={"Status": "ON"}
    )
    assert s3.get_object_legal_hold(Bucket=BUCKET, Key="k")["LegalHold"] == {"Status": "OFF"}
    s3.delete_object(Bucket=BUCKET, Key="k", VersionId=newer["VersionId"])
    with pytest.raises(ClientError) as caught:
        s3.delete_object(Bucket=BUCKET, Key="k", VersionId=vault["VersionId"])
    assert code_of(caught) == ("AccessDenied", 403)


def test_a_bucket_without_object_lock_is_invalid_request(s3: Any) -> None:
    s3.create_bucket(Bucket="unlocked")
    s3.put_object(Bucket="unlocked", Key="k", Body=b"x")
    calls: list[Callable[[], Any]] = [
        lambda: s3.get_object_retention(Bucket="unlocked", Key="k"),
        lambda: s3.get_object_legal_hold(Bucket="unlocked", Key="k"),
        lambda: s3.put_object_legal_hold(Bucket="unlocked", Key="k", LegalHold={"Status": "ON"}),
        lambda: s3.put_object_retention(
            Bucket="unlocked",
            Key="k",
            Retention={"Mode": "GOVERNANCE", "RetainUntilDate": soon(1)},
        ),
    ]
    for call in calls:
        with pytest.raises(ClientError) as caught:
            call()
        assert code_of(caught) == ("InvalidRequest", 400)
    assert s3.head_object(Bucket="unlocked", Key="k").get("ObjectLockMode") is None


def test_missing_objects_versions_and_delete_markers(s3: Any, vault: dict[str, Any]) -> None:
    with pytest.raises(ClientError) as caught:
        s3.get_object_legal_hold(Bucket=BUCKET, Key="absent")
    assert code_of(caught) == ("NoSuchKey", 404)
    marker = s3.delete_object(Bucket=BUCKET, Key="k")
    with pytest.raises(ClientError) as caught:
        s3.put_object_legal_hold(
            Bucket=BUCKET, Key="k", VersionId=marker["VersionId"], LegalHold={"Status": "ON"}
        )
    assert code_of(caught) == ("MethodNotAllowed", 405)
    with pytest.raises(ClientError) as caught:
        s3.get_object_retention(Bucket=BUCKET, Key="k", VersionId="0" * 32)
    assert code_of(caught)[1] == 400  # a version id no version can have


@pytest.mark.parametrize(
    ("retention", "code"),
    [
        ({"Mode": "FOREVER", "RetainUntilDate": soon(1)}, "MalformedXML"),
        ({"Mode": "GOVERNANCE"}, "MalformedXML"),
        ({"RetainUntilDate": soon(1)}, "MalformedXML"),
        ({"Mode": "GOVERNANCE", "RetainUntilDate": soon(-1)}, "InvalidArgument"),
    ],
)
def test_bad_retention_documents_are_refused(
    s3: Any, vault: dict[str, Any], retention: dict[str, Any], code: str
) -> None:
    with pytest.raises(ClientError) as caught:
        s3.put_object_retention(Bucket=BUCKET, Key="k", Retention=retention)
    assert code_of(caught) == (code, 400)
    with pytest.raises(ClientError):
        s3.get_object_retention(Bucket=BUCKET, Key="k")


def test_bad_legal_hold_documents_are_refused(s3: Any, vault: dict[str, Any]) -> None:
    with pytest.raises(ClientError) as caught:
        s3.put_object_legal_hold(Bucket=BUCKET, Key="k", LegalHold={"Status": "MAYBE"})
    assert code_of(caught) == ("MalformedXML", 400)
    assert s3.get_object_legal_hold(Bucket=BUCKET, Key="k")["LegalHold"] == {"Status": "OFF"}


def test_puts_need_a_digest_header(gateway: Running, vault: dict[str, Any]) -> None:
    hold = b"<LegalHold><Status>ON</Status></LegalHold>"
    response = raw_request(gateway, "PUT", f"/{BUCKET}/k", {"legal-hold": ""}, hold)
    assert response.status_code == 400
    assert error_code(response) == "InvalidRequest"
    retention = b"<Retention><Mode>GOVERNANCE</Mode><RetainUntilDate>2999-01-01T00:00:00Z"
    retention += b"</RetainUntilDate></Retention>"
    response = raw_request(gateway, "PUT", f"/{BUCKET}/k", {"retention": ""}, retention)
    assert error_code(response) == "InvalidRequest"
    got = raw_request(gateway, "GET", f"/{BUCKET}/k", {"legal-hold": ""})
    assert got.status_code == 200
    assert b"<Status>OFF</Status>" in got.content


def test_keys_denied_write_or_read_are_refused(gateway: Running, vault: dict[str, Any]) -> None:
    reader, secret = create_key(gateway.services.db, gateway.data_dir, "alice", denied=("write",))
    with pytest.raises(ClientError) as caught:
        gateway.client(reader.access_key_id, secret).put_object_legal_hold(
            Bucket=BUCKET, Key="k", LegalHold={"Status": "ON"}
        )
    assert code_of(caught) == ("AccessDenied", 403)
    writer, secret = create_key(gateway.services.db, gateway.data_dir, "alice", denied=("read",))
    with pytest.raises(ClientError) as caught:
        gateway.client(writer.access_key_id, secret).get_object_legal_hold(Bucket=BUCKET, Key="k")
    assert code_of(caught) == ("AccessDenied", 403)
