"""Integers of any length, and numbers that are not ASCII digits, in every header, query
parameter and XML field the gateway reads: S3's 400 (or, for a Range it cannot satisfy as
written, what S3 does with one), never a 500 and never a traceback in the log. Several are
sent without credentials: anyone could."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from tests.gateway.conftest import Running
from tests.gateway.wire import error_code, raw_request

HUGE = "9" * 5000
ODD = ["²", "\u0661\u0662", "1_000", "+5", "0x10", "1e3"]


@pytest.fixture
def world(gateway: Running, s3: Any, caplog: pytest.LogCaptureFixture) -> Iterator[str]:
    """A public-read-write bucket holding `k` (10 bytes) and an upload of `up`; afterwards,
    the gateway must have logged no traceback."""
    caplog.set_level(logging.WARNING)
    s3.create_bucket(Bucket="bkt", ACL="public-read-write")
    s3.put_object(Bucket="bkt", Key="k", Body=b"0123456789", ACL="public-read")
    upload = s3.create_multipart_upload(Bucket="bkt", Key="up")["UploadId"]
    yield upload
    assert not [r for r in caplog.records if r.exc_info], caplog.text
    assert "Traceback" not in caplog.text


def anonymous(
    gateway: Running,
    method: str,
    path: str,
    *,
    headers: dict[str, str] | None = None,
    **kwargs: Any,
) -> httpx.Response:
    """An unsigned request; header values go out as their UTF-8 bytes, whatever they hold."""
    raw = {name: value.encode() for name, value in (headers or {}).items()}
    return httpx.request(method, gateway.url + path, headers=raw, **kwargs)


def test_a_range_of_any_length_is_answered_as_s3_does(gateway: Running, world: str) -> None:
    past = anonymous(gateway, "GET", "/bkt/k", headers={"Range": f"bytes={HUGE}-"})
    assert (past.status_code, error_code(past)) == (416, "InvalidRange")
    suffix = anonymous(gateway, "GET", "/bkt/k", headers={"Range": f"bytes=-{HUGE}"})
    assert (suffix.status_code, suffix.content) == (206, b"0123456789")
    to_end = anonymous(gateway, "GET", "/bkt/k", headers={"Range": f"bytes=2-{HUGE}"})
    assert (to_end.status_code, to_end.content) == (206, b"23456789")
    head = anonymous(gateway, "HEAD", "/bkt/k", headers={"Range": f"bytes={HUGE}-"})
    assert head.status_code == 416
    for odd in ODD:  # not a byte range S3 can read: ignored, the whole object
        ignored = anonymous(gateway, "GET", "/bkt/k", headers={"Range": f"bytes={odd}-"})
        assert (ignored.status_code, ignored.content) == (200, b"0123456789"), odd


def test_a_presigned_expiry_of_any_length_is_refused_before_any_key_is_looked_up(
    gateway: Running, world: str
) -> None:
    now = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    for expires in [HUGE, *ODD, "604801", "-" + HUGE]:
        query = {
            "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
            "X-Amz-Credential": f"RKNOBODY0000000000XX/{now[:8]}/us-east-1/s3/aws4_request",
            "X-Amz-Date": now,
            "X-Amz-Expires": expires,
            "X-Amz-SignedHeaders": "host",
            "X-Amz-Signature": "0" * 64,
        }
        answer = anonymous(gateway, "GET", "/nobucket/x", params=query)
        assert answer.status_code == 400, expires
        assert error_code(answer) == "AuthorizationQueryParametersError"


def test_a_date_past_the_last_time_there_is_is_access_denied(gateway: Running, world: str) -> None:
    headers = {
        "Authorization": "AWS4-HMAC-SHA256 Credential=RKNOBODY0000000000XX/20261126/us-east-1/"
        "s3/aws4_request, SignedHeaders=host, Signature=" + "0" * 64,
        "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
        "Date": "Fri, 31 Dec 9999 23:59:59 -1200",
    }
    answer = anonymous(gateway, "GET", "/bkt/k", headers=headers)
    assert (answer.status_code, error_code(answer)) == (403, "AccessDenied")


@pytest.mark.parametrize("value", [HUGE, *ODD, "-1"])
def test_multipart_counts_and_numbers_are_invalid_arguments(
    gateway: Running, world: str, value: str
) -> None:
    for method, path, params in [
        ("GET", "/bkt", {"uploads": "", "max-uploads": value}),
        ("GET", "/bkt/up", {"uploadId": world, "max-parts": value}),
        ("GET", "/bkt/up", {"uploadId": world, "part-number-marker": value}),
        ("PUT", "/bkt/up", {"uploadId": world, "partNumber": value}),
        ("GET", "/bkt/k", {"partNumber": value}),
    ]:
        answer = raw_request(gateway, method, path, params, b"x" if method == "PUT" else b"")
        assert (answer.status_code, error_code(answer)) == (400, "InvalidArgument"), (
            path,
            params,
        )


def test_a_part_number_of_any_length_in_a_complete_is_refused(
    gateway: Running, s3: Any, world: str
) -> None:
    for number, code in [
        (HUGE, "InvalidArgument"),
        ("0", "InvalidArgument"),
        ("²", "MalformedXML"),
    ]:
        body = (
            f"<CompleteMultipartUpload><Part><PartNumber>{number}</PartNumber>"
            "<ETag>x</ETag></Part></CompleteMultipartUpload>"
        ).encode()
        answer = raw_request(gateway, "POST", "/bkt/up", {"uploadId": world}, body)
        assert (answer.status_code, error_code(answer)) == (400, code), number
    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket="bkt")["Uploads"]] == [world]


def test_a_copy_source_range_of_any_length_is_not_satisfiable(gateway: Running, world: str) -> None:
    for header, expected in [
        (f"bytes=0-{HUGE}", (416, "InvalidRange")),
        (f"bytes={HUGE[:3000]}-{HUGE[:3000]}", (416, "InvalidRange")),  # a header under 8 KiB
        ("bytes=+1-3", (400, "InvalidArgument")),
        ("bytes=5-2", (400, "InvalidArgument")),
    ]:
        answer = raw_request(
            gateway,
            "PUT",
            "/bkt/up",
            {"uploadId": world, "partNumber": "1"},
            headers={"x-amz-copy-source": "/bkt/k", "x-amz-copy-source-range": header},
        )
        assert (answer.status_code, error_code(answer)) == expected, header


def test_a_decoded_content_length_of_any_length_is_refused_before_the_body(
    gateway: Running, s3: Any, world: str
) -> None:
    for declared, expected in [(HUGE, "EntityTooLarge"), ("²", "InvalidArgument")]:
        answer = anonymous(
            gateway,
            "PUT",
            "/bkt/new",
            content=b"0\r\n\r\n",
            headers={
                "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                "content-encoding": "aws-chunked",
                "x-amz-decoded-content-length": declared,
            },
        )
        assert (answer.status_code, error_code(answer)) == (400, expected), declared
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="bkt")["Contents"]] == ["k"]


def test_a_retain_until_date_past_the_last_time_there_is_is_invalid(
    gateway: Running, s3: Any, world: str
) -> None:
    s3.create_bucket(Bucket="vault", ObjectLockEnabledForBucket=True)
    for when in ("9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00", HUGE):
        answer = raw_request(
            gateway,
            "PUT",
            "/vault/k",
            body=b"x",
            headers={
                "x-amz-object-lock-mode": "GOVERNANCE",
                "x-amz-object-lock-retain-until-date": when,
            },
        )
        assert (answer.status_code, error_code(answer)) == (400, "InvalidArgument"), when
    assert "Contents" not in s3.list_objects_v2(Bucket="vault")


def test_a_default_retention_period_of_any_length_is_invalid(
    gateway: Running, s3: Any, world: str
) -> None:
    s3.create_bucket(Bucket="vault", ObjectLockEnabledForBucket=True)
    for period, code in [
        (f"<Days>{HUGE}</Days>", "InvalidRetentionPeriod"),
        (f"<Years>-{HUGE}</Years>", "InvalidRetentionPeriod"),
        ("<Days>²</Days>", "MalformedXML"),
    ]:
        body = (
            "<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled><Rule>"
            f"<DefaultRetention><Mode>GOVERNANCE</Mode>{period}</DefaultRetention></Rule>"
            "</ObjectLockConfiguration>"
        ).encode()
        answer = raw_request(gateway, "PUT", "/vault", {"object-lock": ""}, body)
        assert (answer.status_code, error_code(answer)) == (400, code), period
    s3.put_object(Bucket="vault", Key="k", Body=b"x")
