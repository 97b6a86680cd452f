"""`PUT`, `GET` and `DELETE /bucket?journal` through the running gateway, signed over plain
HTTP (boto3 has no such operation): the configuration stored and read back with its start,
record expiration, refused documents with nothing stored, `NoSuchJournalConfiguration`,
ownership, the route table (`?journal` is no listing or object write), and the gateway's
registry following along so the bucket's next write records its change."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from datetime import datetime
from typing import Any

import httpx
import pytest

from ripple.identity import create_user
from ripple.notifications.journal import Journal
from tests.gateway.conftest import Running
from tests.gateway.helpers import recorded_request_ids, signed_request

NS = {"s3": "http://s3.amazonaws.com/doc/2006-03-01/"}


def document(expiration: str | None = None, days: str | None = None) -> bytes:
    """A JournalConfiguration; a RecordExpiration when `expiration` is given."""
    inner = ""
    if expiration is not None:
        inner = f"<Expiration>{expiration}</Expiration>"
        inner += "" if days is None else f"<Days>{days}</Days>"
        inner = f"<RecordExpiration>{inner}</RecordExpiration>"
    return f'<JournalConfiguration xmlns="{NS["s3"]}">{inner}</JournalConfiguration>'.encode()


def error_of(response: httpx.Response) -> dict[str, str]:
    return {child.tag: child.text or "" for child in ET.fromstring(response.content)}


def configuration_of(response: httpx.Response) -> tuple[str, str | None, datetime]:
    """Expiration, Days and EnabledTime of a GET's document."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/xml"
    root = ET.fromstring(response.content)
    assert root.tag == f"{{{NS['s3']}}}JournalConfiguration"
    expiration = root.findtext("s3:RecordExpiration/s3:Expiration", namespaces=NS)
    days = root.findtext("s3:RecordExpiration/s3:Days", namespaces=NS)
    enabled = root.findtext("s3:EnabledTime", namespaces=NS)
    assert expiration is not None, response.text
    assert enabled is not None, response.text
    assert enabled.endswith("Z")
    assert len(enabled) == len("2026-11-21T10:00:00.000Z")
    return expiration, days, datetime.fromisoformat(enabled)


def stored(gateway: Running, bucket: str = "photos") -> Journal | None:
    return gateway.services.journals.get(gateway.key.project_id, bucket)


def test_put_get_and_delete(gateway: Running, s3: Any) -> None:
    s3.create_bucket(Bucket="photos")
    registry, project = gateway.services.registry, gateway.key.project_id
    before = time.time()
    put = signed_request(gateway, "PUT", "/photos?journal", document())
    assert (put.status_code, put.content) == (200, b"")
    expiration, days, enabled = configuration_of(signed_request(gateway, "GET", "/photos?journal"))
    assert (expiration, days) == ("DISABLED", None)
    assert before - 0.001 <= enabled.timestamp() <= time.time()
    journal = stored(gateway)
    assert journal is not None
    assert journal.expiration_days is None
    assert registry.is_eventing(project, "photos")  # applied before the answer

    # record expiration: the journal keeps its start
    put = signed_request(gateway, "PUT", "/photos?journal", document("ENABLED", "30"))
    assert put.status_code == 200, put.text
    got = configuration_of(signed_request(gateway, "GET", "/photos?journal"))
    assert got == ("ENABLED", "30", enabled)
    assert stored(gateway) == Journal(journal.enabled_ns, 30)

    deleted = signed_request(gateway, "DELETE", "/photos?journal")
    assert (deleted.status_code, deleted.content) == (204, b"")
    assert stored(gateway) is None
    assert not registry.is_eventing(project, "photos")
    missing = signed_request(gateway, "GET", "/photos?journal")
    assert missing.status_code == 404
    assert error_of(missing)["Code"] == "NoSuchJournalConfiguration"
    # no journal to delete: 204 all the same, as S3 deletes a bucket's subresources
    assert signed_request(gateway, "DELETE", "/photos?journal").status_code == 204


@pytest.mark.parametrize(
    "body",
    [b"", b"<JournalConfiguration/>", document("DISABLED"), b"  \n"],
    ids=["empty-body", "empty-document", "disabled", "whitespace"],
)
def test_documents_that_keep_the_rows(gateway: Running, s3: Any, body: bytes) -> None:
    s3.create_bucket(Bucket="photos")
    assert signed_request(gateway, "PUT", "/photos?journal", body).status_code == 200
    journal = stored(gateway)
    assert journal is not None
    assert journal.expiration_days is None
    got = configuration_of(signed_request(gateway, "GET", "/photos?journal"))
    assert got[:2] == ("DISABLED", None)


def test_a_get_of_a_bucket_without_a_journal(gateway: Running, s3: Any) -> None:
    s3.create_bucket(Bucket="photos")
    s3.put_object(Bucket="photos", Key="k", Body=b"x")
    response = signed_request(gateway, "GET", "/photos?journal")  # not a ListObjects
    assert response.status_code == 404
    error = error_of(response)
    assert error["Code"] == "NoSuchJournalConfiguration"
    assert error["Resource"] == "/photos"
    assert "photos" in error["Message"]


@pytest.mark.parametrize(
    ("body", "code", "argument"),
    [
        (b"<JournalConfiguration><RecordExpiration>", "MalformedXML", None),
        (b"<LifecycleConfiguration/>", "MalformedXML", None),
        (b"<JournalConfiguration>on</JournalConfiguration>", "MalformedXML", None),
        (
            b"<JournalConfiguration><Expiration>ENABLED</Expiration></JournalConfiguration>",
            "MalformedXML",
            None,
        ),
        (
            b"<JournalConfiguration><RecordExpiration><Days>30</Days></RecordExpiration>"
            b"</JournalConfiguration>",
            "MalformedXML",
            None,
        ),
        (
            document("ENABLED", "30").replace(b"<Days>", b"<Days>30</Days><Days>"),
            "MalformedXML",
            None,
        ),
        (document("ENABLED", "<Value>30</Value>"), "MalformedXML", None),
        # the shape before what it says: a malformed document with bad days is MalformedXML
        (document("ENABLED", "3").replace(b"</Days>", b"</Days><Extra/>"), "MalformedXML", None),
        (b"<!DOCTYPE j [<!ENTITY e 'x'>]><JournalConfiguration/>", "MalformedXML", None),
        (document("ENABLED", "3"), "InvalidArgument", "Days"),
        (document("ENABLED", "0"), "InvalidArgument", "Days"),
        (document("ENABLED", "-30"), "InvalidArgument", "Days"),
        (document("ENABLED", "x"), "InvalidArgument", "Days"),
        (document("ENABLED", "30.5"), "InvalidArgument", "Days"),
        (document("ENABLED", "²"), "InvalidArgument", "Days"),
        (document("ENABLED", "9" * 400), "InvalidArgument", "Days"),
        (document("ENABLED", str(2**31)), "InvalidArgument", "Days"),
        (document("ENABLED"), "InvalidArgument", "Days"),
        (document("ENABLED", ""), "InvalidArgument", "Days"),
        (document("DISABLED", "30"), "InvalidArgument", "Days"),
        (document("enabled", "30"), "InvalidArgument", "Expiration"),
        (document("SOMETIMES"), "InvalidArgument", "Expiration"),
        (document(""), "InvalidArgument", "Expiration"),
    ],
)
def test_refused_documents_store_nothing(
    gateway: Running, s3: Any, body: bytes, code: str, argument: str | None
) -> None:
    s3.create_bucket(Bucket="photos")
    generation = gateway.services.eventing.generation()
    response = signed_request(gateway, "PUT", "/photos?journal", body)
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["Code"] == code
    assert error.get("ArgumentName") == argument
    assert len(response.content) < 1000  # 400 digits are not echoed back
    assert stored(gateway) is None
    assert gateway.services.eventing.generation() == generation
    assert signed_request(gateway, "GET", "/photos?journal").status_code == 404


def test_a_refused_document_leaves_the_journal_as_it_was(gateway: Running, s3: Any) -> None:
    s3.create_bucket(Bucket="photos")
    assert signed_request(gateway, "PUT", "/photos?journal", document("ENABLED", "30")).is_success
    before = stored(gateway)
    refused = signed_request(gateway, "PUT", "/photos?journal", document("ENABLED", "3"))
    assert refused.status_code == 400
    assert stored(gateway) == before


def test_an_oversized_document_is_refused(gateway: Running, s3: Any) -> None:
    s3.create_bucket(Bucket="photos")
    body = document("ENABLED", "30").replace(b"<Days>", b" " * 100_000 + b"<Days>")
    response = signed_request(gateway, "PUT", "/photos?journal", body)
    assert response.status_code == 400
    assert error_of(response)["Code"] == "MaxMessageLengthExceeded"
    assert stored(gateway) is None


@pytest.mark.parametrize("method", ["PUT", "GET", "DELETE"])
def test_a_bucket_that_does_not_exist(gateway: Running, method: str) -> None:
    response = signed_request(gateway, method, "/nobody-has-this?journal", b"")
    assert response.status_code == 404
    assert error_of(response)["Code"] == "NoSuchBucket"
    assert stored(gateway, "nobody-has-this") is None


def test_the_document_is_judged_before_the_bucket_is_looked_at(gateway: Running) -> None:
    malformed = signed_request(gateway, "PUT", "/nobody-has-this?journal", b"<Journal")
    assert (malformed.status_code, error_of(malformed)["Code"]) == (400, "MalformedXML")
    short = signed_request(gateway, "PUT", "/nobody-has-this?journal", document("ENABLED", "3"))
    assert short.status_code == 400
    assert (error_of(short)["Code"], error_of(short)["ArgumentName"]) == ("InvalidArgument", "Days")


def test_only_the_buckets_owner_configures_its_journal(gateway: Running, s3: Any) -> None:
    s3.create_bucket(Bucket="photos")
    s3.put_bucket_acl(Bucket="photos", ACL="public-read-write")  # no ACL grants this
    assert signed_request(gateway, "PUT", "/photos?journal", document("ENABLED", "7")).is_success
    before = stored(gateway)
    _, key, secret = create_user(gateway.services.db, gateway.data_dir, "bob")
    bob = {"access_key": key.access_key_id, "secret": secret}
    for method, body in [("PUT", document()), ("GET", b""), ("DELETE", b"")]:
        response = signed_request(gateway, method, "/photos?journal", body, **bob)
        assert response.status_code == 403, (method, response.text)
        assert error_of(response)["Code"] == "AccessDenied"
        anonymous = httpx.request(method, f"{gateway.url}/photos?journal", content=body)
        assert anonymous.status_code == 403, (method, anonymous.text)
        assert error_of(anonymous)["Code"] == "AccessDenied"
    assert stored(gateway) == before
    # his own bucket is his to journal
    bob_s3 = gateway.client(key.access_key_id, secret)
    bob_s3.create_bucket(Bucket="bobs")
    assert signed_request(gateway, "PUT", "/bobs?journal", b"", **bob).status_code == 200
    assert gateway.services.journals.get(key.project_id, "bobs") is not None
    assert stored(gateway, "bobs") is None


def test_journal_on_an_object_is_not_an_object_write(gateway: Running, s3: Any) -> None:
    s3.create_bucket(Bucket="photos")
    response = signed_request(gateway, "PUT", "/photos/key?journal", b"data")
    assert response.status_code == 501
    assert error_of(response)["Code"] == "NotImplemented"
    assert s3.list_objects_v2(Bucket="photos")["KeyCount"] == 0


def test_the_gateway_records_changes_once_the_bucket_has_a_journal(
    gateway: Running, s3: Any
) -> None:
    db = gateway.services.db
    db.eventing = gateway.services.registry.is_eventing  # as `ripple serve` wires it
    s3.create_bucket(Bucket="photos")
    s3.put_object(Bucket="photos", Key="before", Body=b"x")
    assert signed_request(gateway, "PUT", "/photos?journal", b"").status_code == 200
    put = s3.put_object(Bucket="photos", Key="after", Body=b"x")
    assert recorded_request_ids(db) == [put["ResponseMetadata"]["RequestId"]]


def test_deleting_the_bucket_forgets_its_journal(gateway: Running, s3: Any) -> None:
    s3.create_bucket(Bucket="photos")
    assert signed_request(gateway, "PUT", "/photos?journal", b"").status_code == 200
    s3.delete_bucket(Bucket="photos")
    s3.create_bucket(Bucket="photos")
    response = signed_request(gateway, "GET", "/photos?journal")
    assert error_of(response)["Code"] == "NoSuchJournalConfiguration"
