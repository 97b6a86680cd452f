"""Hostile XML request documents against every S3 API that takes one: an encoding Python
does not know, a DTD, singletons given twice. Each is `400 MalformedXML`, nothing is
stored, and the gateway logs no traceback."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pytest

from tests.gateway.conftest import Running
from tests.gateway.wire import error_code, raw_request


@dataclass(frozen=True)
class XmlApi:
    name: str
    method: str
    path: str
    params: dict[str, str]
    root: str
    inner: str  # a valid document's children, for the variants below to break


APIS = [
    XmlApi("CreateBucket", "PUT", "/newbucket", {}, "CreateBucketConfiguration", ""),
    XmlApi(
        "PutBucketVersioning",
        "PUT",
        "/bkt",
        {"versioning": ""},
        "VersioningConfiguration",
        "<Status>Enabled</Status>",
    ),
    XmlApi(
        "PutObjectLockConfiguration",
        "PUT",
        "/bkt",
        {"object-lock": ""},
        "ObjectLockConfiguration",
        "<ObjectLockEnabled>Enabled</ObjectLockEnabled>",
    ),
    XmlApi(
        "PutObjectRetention",
        "PUT",
        "/bkt/k",
        {"retention": ""},
        "Retention",
        "<Mode>GOVERNANCE</Mode><RetainUntilDate>2099-01-01T00:00:00Z</RetainUntilDate>",
    ),
    XmlApi(
        "PutObjectLegalHold",
        "PUT",
        "/bkt/k",
        {"legal-hold": ""},
        "LegalHold",
        "<Status>ON</Status>",
    ),
    XmlApi(
        "PutObjectTagging",
        "PUT",
        "/bkt/k",
        {"tagging": ""},
        "Tagging",
        "<TagSet><Tag><Key>a</Key><Value>1</Value></Tag></TagSet>",
    ),
    XmlApi(
        "PutBucketLifecycleConfiguration",
        "PUT",
        "/bkt",
        {"lifecycle": ""},
        "LifecycleConfiguration",
        "<Rule><ID>r</ID><Status>Enabled</Status><Filter/><Expiration><Days>1</Days>"
        "</Expiration></Rule>",
    ),
    XmlApi(
        "PutBucketNotificationConfiguration",
        "PUT",
        "/bkt",
        {"notification": ""},
        "NotificationConfiguration",
        "",
    ),
    XmlApi(
        "PutBucketJournalConfiguration",
        "PUT",
        "/bkt",
        {"journal": ""},
        "JournalConfiguration",
        "<RecordExpiration><Expiration>ENABLED</Expiration><Days>7</Days></RecordExpiration>",
    ),
    XmlApi(
        "PutBucketAcl",
        "PUT",
        "/bkt",
        {"acl": ""},
        "AccessControlPolicy",
        "<AccessControlList/>",
    ),
    XmlApi(
        "PutObjectAcl",
        "PUT",
        "/bkt/k",
        {"acl": ""},
        "AccessControlPolicy",
        "<AccessControlList/>",
    ),
    XmlApi(
        "DeleteObjects", "POST", "/bkt", {"delete": ""}, "Delete", "<Object><Key>k</Key></Object>"
    ),
    XmlApi(
        "CompleteMultipartUpload",
        "POST",
        "/bkt/up",
        {"uploadId": "UPLOAD"},
        "CompleteMultipartUpload",
        "<Part><PartNumber>1</PartNumber><ETag>x</ETag></Part>",
    ),
]


@pytest.fixture
def world(gateway: Running, s3: Any) -> dict[str, str]:
    """A bucket with object lock, holding `k`, and an upload of `up` in progress."""
    s3.create_bucket(Bucket="bkt", ObjectLockEnabledForBucket=True)
    version = s3.put_object(Bucket="bkt", Key="k", Body=b"data")["VersionId"]
    upload = s3.create_multipart_upload(Bucket="bkt", Key="up")["UploadId"]
    return {"version": version, "upload": upload}


def send(gateway: Running, api: XmlApi, body: bytes, upload: str) -> Any:
    params = {k: (upload if v == "UPLOAD" else v) for k, v in api.params.items()}
    return raw_request(gateway, api.method, api.path, params, body, content_md5=True)


def assert_untouched(gateway: Running, s3: Any, world: dict[str, str]) -> None:
    """None of the documents changed anything."""
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["bkt"]
    assert s3.get_bucket_versioning(Bucket="bkt")["Status"] == "Enabled"
    assert "Rule" not in s3.get_object_lock_configuration(Bucket="bkt")["ObjectLockConfiguration"]
    head = s3.head_object(Bucket="bkt", Key="k")
    assert "ObjectLockMode" not in head
    assert "ObjectLockLegalHoldStatus" not in head
    assert s3.get_object_tagging(Bucket="bkt", Key="k")["TagSet"] == []
    versions = s3.list_object_versions(Bucket="bkt")
    assert [v["VersionId"] for v in versions["Versions"]] == [world["version"]]
    assert "DeleteMarkers" not in versions
    uploads = s3.list_multipart_uploads(Bucket="bkt")["Uploads"]
    assert [u["UploadId"] for u in uploads] == [world["upload"]]
    assert gateway.services.journals.get(gateway.key.project_id, "bkt") is None


def test_an_unknown_encoding_is_malformed_xml_on_every_api(
    gateway: Running, s3: Any, world: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    for api in APIS:
        body = (
            f'<?xml version="1.0" encoding="x-evil-9"?><{api.root}>{api.inner}</{api.root}>'
        ).encode()
        answer = send(gateway, api, body, world["upload"])
        assert (answer.status_code, error_code(answer)) == (400, "MalformedXML"), api.name
    assert_untouched(gateway, s3, world)
    assert "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.exc_info]


def test_a_dtd_is_malformed_xml_on_every_api(
    gateway: Running, s3: Any, world: dict[str, str]
) -> None:
    for api in APIS:
        for doctype in (
            f"<!DOCTYPE {api.root}>",
            f'<!DOCTYPE {api.root} [<!ENTITY e "x">]>',
            f'<!DOCTYPE {api.root} SYSTEM "file:///etc/passwd">',
        ):
            body = f"<?xml version='1.0'?>{doctype}<{api.root}>{api.inner}</{api.root}>".encode()
            answer = send(gateway, api, body, world["upload"])
            assert (answer.status_code, error_code(answer)) == (400, "MalformedXML"), (
                api.name,
                doctype,
            )
    assert_untouched(gateway, s3, world)


REPEATED = [
    ("PutObjectTagging", "<TagSet><Tag><Key>a</Key><Value>1</Value></Tag></TagSet>" * 2),
    ("PutObjectTagging", "<TagSet><Tag><Key>a</Key><Key>b</Key><Value>1</Value></Tag></TagSet>"),
    (
        "PutObjectTagging",
        "<TagSet><Tag><Key>a</Key><Value>1</Value><Value>2</Value></Tag></TagSet>",
    ),
    ("PutBucketVersioning", "<Status>Suspended</Status><Status>Enabled</Status>"),
    ("PutObjectLegalHold", "<Status>ON</Status><Status>OFF</Status>"),
    (
        "PutBucketJournalConfiguration",
        "<RecordExpiration><Expiration>ENABLED</Expiration><Expiration>DISABLED</Expiration>"
        "<Days>7</Days></RecordExpiration>",
    ),
    (
        "PutObjectRetention",
        "<Mode>GOVERNANCE</Mode><Mode>COMPLIANCE</Mode>"
        "<RetainUntilDate>2099-01-01T00:00:00Z</RetainUntilDate>",
    ),
    (
        "PutObjectLockConfiguration",
        "<ObjectLockEnabled>Enabled</ObjectLockEnabled><Rule><DefaultRetention>"
        "<Mode>GOVERNANCE</Mode><Days>1</Days><Days>2</Days></DefaultRetention></Rule>",
    ),
    (
        "PutObjectLockConfiguration",
        "<ObjectLockEnabled>Enabled</ObjectLockEnabled>"
        + "<Rule><DefaultRetention><Mode>GOVERNANCE</Mode><Days>1</Days></DefaultRetention></Rule>"
        * 2,
    ),
    ("DeleteObjects", "<Quiet>true</Quiet><Quiet>false</Quiet><Object><Key>k</Key></Object>"),
    ("DeleteObjects", "<Object><Key>k</Key><Key>other</Key></Object>"),
    (
        "DeleteObjects",
        "<Object><Key>k</Key><VersionId>a</VersionId><VersionId>b</VersionId></Object>",
    ),
    (
        "CompleteMultipartUpload",
        "<Part><PartNumber>1</PartNumber><PartNumber>2</PartNumber><ETag>x</ETag></Part>",
    ),
]


@pytest.mark.parametrize(("name", "inner"), REPEATED)
def test_a_singleton_given_twice_is_malformed_xml(
    gateway: Running, s3: Any, world: dict[str, str], name: str, inner: str
) -> None:
    [api] = [a for a in APIS if a.name == name]
    body = f"<{api.root}>{inner}</{api.root}>".encode()
    answer = send(gateway, api, body, world["upload"])
    assert (answer.status_code, error_code(answer)) == (400, "MalformedXML")
    assert_untouched(gateway, s3, world)


def test_eleven_tags_split_over_two_tag_sets_are_refused(
    gateway: Running, s3: Any, world: dict[str, str]
) -> None:
    """The limit of 10 tags is the whole document's: a second TagSet cannot hide tags."""
    [api] = [a for a in APIS if a.name == "PutObjectTagging"]
    tags = [f"<Tag><Key>k{i}</Key><Value>v</Value></Tag>" for i in range(11)]
    body = f"<Tagging><TagSet>{''.join(tags[:6])}</TagSet><TagSet>{''.join(tags[6:])}</TagSet>"
    answer = send(gateway, api, (body + "</Tagging>").encode(), world["upload"])
    assert answer.status_code == 400
    assert error_code(answer) == "MalformedXML"
    assert_untouched(gateway, s3, world)
