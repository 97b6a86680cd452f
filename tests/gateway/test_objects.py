"""PutObject, GetObject, HeadObject and DeleteObject through boto3 against a live gateway:
data round trips (inline and file-backed), metadata, digests, ranges, conditionals,
response overrides, versions and delete markers, and that refused writes leave nothing."""

from __future__ import annotations

import base64
import hashlib
import socket
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from ripple.metabase import ObjectLocation, get_object
from tests.gateway.helpers import code_of, data_files, status_of
from tests.gateway.wire import FILE_SIZE, error_code, raw_request

INLINE_LIMIT = 64 * 1024  # objects up to this size are kept in their metabase row (docs)
KEYS = ["plain.txt", "a b/c d.txt", "plus+and%percent", "ünïcödé/日本", "~tilde/!$&'()*,;=:@"]


@pytest.mark.parametrize("size", [0, 5, 1025, 4096, INLINE_LIMIT, INLINE_LIMIT + 1, 300_000])
def test_round_trip_sizes(s3: Any, gateway: Any, size: int) -> None:
    s3.create_bucket(Bucket="bkt")
    body = bytes(range(256)) * (size // 256) + bytes(size % 256)
    put = s3.put_object(Bucket="bkt", Key="k", Body=body)
    assert put["ETag"] == f'"{hashlib.md5(body).hexdigest()}"'
    got = s3.get_object(Bucket="bkt", Key="k")
    assert got["Body"].read() == body
    assert got["ContentLength"] == size
    # up to the inline limit (64 KiB) in the metabase row; bigger: one data file holds it
    assert len(data_files(gateway.data_dir)) == (1 if size > INLINE_LIMIT else 0)


@pytest.mark.parametrize("key", KEYS)
def test_awkward_keys(s3: Any, key: str) -> None:
    s3.create_bucket(Bucket="bkt")
    s3.put_object(Bucket="bkt", Key=key, Body=key.encode())
    assert s3.get_object(Bucket="bkt", Key=key)["Body"].read() == key.encode()
    s3.delete_object(Bucket="bkt", Key=key)
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket="bkt", Key=key)
    assert status_of(e) == 404


def test_key_too_long(s3: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket="bkt", Key="k" * 1025, Body=b"x")
    assert code_of(e) == "KeyTooLongError"
    s3.put_object(Bucket="bkt", Key="k" * 1024, Body=b"x")


def test_metadata_and_stored_headers(s3: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    s3.put_object(
        Bucket="bkt",
        Key="k",
        Body=b"<p>hi</p>",
        ContentType="text/html",
        Metadata={"Color": "red", "mtime": "1700000000"},
        CacheControl="max-age=60",
        ContentDisposition='attachment; filename="k.html"',
        ContentLanguage="en",
    )
    head = s3.head_object(Bucket="bkt", Key="k")
    assert head["ContentType"] == "text/html"
    assert head["Metadata"] == {"color": "red", "mtime": "1700000000"}
    assert head["CacheControl"] == "max-age=60"
    assert head["ContentDisposition"] == 'attachment; filename="k.html"'
    assert head["ContentLanguage"] == "en"
    assert head["ContentLength"] == 9
    assert head["AcceptRanges"] == "bytes"
    assert abs(head["LastModified"] - datetime.now(UTC)) < timedelta(minutes=1)


def test_utf8_metadata_round_trips_byte_for_byte(s3: Any, gateway: Any) -> None:
    """boto3 sends header text as UTF-8 bytes; the metabase keeps the text they spell (what
    events and metadata filters see), and GET answers the same bytes."""
    s3.create_bucket(Bucket="bkt")
    text = "héllo € 日本"

    def utf8_metadata(params: dict[str, Any], **_: Any) -> None:
        params["headers"]["x-amz-meta-greeting"] = text
        params["headers"]["Content-Disposition"] = f"attachment; filename*=UTF-8''{text}"

    s3.meta.events.register("before-call.s3.PutObject", utf8_metadata)
    s3.put_object(Bucket="bkt", Key="k", Body=b"x")
    stored = get_object(gateway.services.db, ObjectLocation(gateway.key.project_id, "bkt", "k"))
    assert stored.user_metadata["greeting"] == text
    assert stored.user_metadata[":content-disposition"] == f"attachment; filename*=UTF-8''{text}"
    answered = raw_request(gateway, "HEAD", "/bkt/k")
    raw = dict(answered.headers.raw)
    assert raw[b"x-amz-meta-greeting"] == text.encode("utf-8")
    assert raw[b"content-disposition"] == f"attachment; filename*=UTF-8''{text}".encode()
    # metadata is counted in UTF-8 bytes against S3's 2 KiB: 1,800 bytes fit, 2,100 do not
    fits = raw_request(gateway, "PUT", "/bkt/fits", body=b"x", headers={"x-amz-meta-m": "€" * 600})
    assert fits.status_code == 200
    big = raw_request(gateway, "PUT", "/bkt/big", body=b"x", headers={"x-amz-meta-m": "€" * 700})
    assert (big.status_code, error_code(big)) == (400, "MetadataTooLarge")


def test_metadata_that_is_not_utf8_is_refused(gateway: Any, s3: Any) -> None:
    s3.create_bucket(Bucket="bkt", ACL="public-read-write")
    host, port = gateway.url.removeprefix("http://").split(":")
    request = (
        b"PUT /bkt/k HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
        b"x-amz-meta-m: caf\xe9\r\nConnection: close\r\n\r\nx"
    )
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(request)
        answer = b"".join(iter(lambda: sock.recv(65536), b""))
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert b"<Code>InvalidArgument</Code>" in answer
    assert "Contents" not in s3.list_objects_v2(Bucket="bkt")


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ("gzip", "gzip"),
        ("deflate, gzip", "deflate, gzip"),  # as sent, spaces and all
        ("deflate,gzip", "deflate,gzip"),
        ("gzip, aws-chunked", "gzip"),  # aws-chunked is framing, never stored
        ("aws-chunked, gzip", "gzip"),
        ("aws-chunked,deflate, gzip", "deflate, gzip"),
    ],
)
def test_content_encoding_is_kept_as_sent_but_aws_chunked(s3: Any, sent: str, kept: str) -> None:
    s3.create_bucket(Bucket="bkt")
    s3.put_object(Bucket="bkt", Key="k", Body=b"x", ContentEncoding=sent)
    assert s3.head_object(Bucket="bkt", Key="k")["ContentEncoding"] == kept
    s3.put_object(Bucket="bkt", Key="bare", Body=b"x", ContentEncoding="aws-chunked")
    assert "ContentEncoding" not in s3.head_object(Bucket="bkt", Key="bare")


def test_content_md5(s3: Any, gateway: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    body = b"y" * FILE_SIZE
    good = base64.b64encode(hashlib.md5(body).digest()).decode()
    s3.put_object(Bucket="bkt", Key="ok", Body=body, ContentMD5=good)
    wrong = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket="bkt", Key="bad", Body=body, ContentMD5=wrong)
    assert code_of(e) == "BadDigest"
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket="bkt", Key="bad", Body=body, ContentMD5="not-base64!")
    assert code_of(e) == "InvalidDigest"
    # nothing was written for the refused uploads: no version, no data, no temporary
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="bkt").get("Contents", [])] == ["ok"]
    assert len(data_files(gateway.data_dir)) == 1
    assert list((gateway.data_dir / "objects" / "tmp").iterdir()) == []


def test_default_trailing_checksum_is_verified(s3: Any, gateway: Any) -> None:
    """Current boto3 sends aws-chunked bodies with a trailing CRC32 by default."""
    s3.create_bucket(Bucket="bkt")
    body = b"z" * 70_000
    put = s3.put_object(Bucket="bkt", Key="k", Body=body)
    crc = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
    assert put["ChecksumCRC32"] == crc
    # a checksum header that does not match the body is refused
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket="bkt", Key="k2", Body=body, ChecksumSHA256="A" * 43 + "=")
    assert code_of(e) == "BadDigest"
    assert "k2" not in [o["Key"] for o in s3.list_objects_v2(Bucket="bkt").get("Contents", [])]


def test_legacy_checksum_settings(gateway: Any) -> None:
    """boto3 configured as before 2025: no default checksums, a signed or unsigned body."""
    legacy = gateway.client(
        request_checksum_calculation="when_required", response_checksum_validation="when_required"
    )
    legacy.create_bucket(Bucket="bkt")
    body = b"legacy" * 1000
    legacy.put_object(Bucket="bkt", Key="k", Body=body)
    assert legacy.get_object(Bucket="bkt", Key="k")["Body"].read() == body
    signed = gateway.client(
        request_checksum_calculation="when_required", s3={"payload_signing_enabled": True}
    )
    signed.put_object(Bucket="bkt", Key="signed", Body=body)
    assert signed.get_object(Bucket="bkt", Key="signed")["Body"].read() == body


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("bytes=0-4", b"01234"),
        ("bytes=5-", b"56789"),
        ("bytes=-3", b"789"),
        ("bytes=8-100", b"89"),
    ],
)
def test_ranges(s3: Any, header: str, expected: bytes) -> None:
    s3.create_bucket(Bucket="bkt")
    s3.put_object(Bucket="bkt", Key="k", Body=b"0123456789")
    got = s3.get_object(Bucket="bkt", Key="k", Range=header)
    assert got["Body"].read() == expected
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert got["ContentRange"].endswith("/10")


def test_range_past_the_end(s3: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    s3.put_object(Bucket="bkt", Key="k", Body=b"0123456789")
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="bkt", Key="k", Range="bytes=10-")
    assert code_of(e) == "InvalidRange"
    assert status_of(e) == 416


def test_ranges_of_a_file_backed_object(s3: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    body = bytes(range(256)) * 4000
    s3.put_object(Bucket="bkt", Key="k", Body=body)
    got = s3.get_object(Bucket="bkt", Key="k", Range="bytes=300000-700000")
    assert got["Body"].read() == body[300000:700001]


def test_conditionals(s3: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    etag = s3.put_object(Bucket="bkt", Key="k", Body=b"v1")["ETag"]
    assert s3.get_object(Bucket="bkt", Key="k", IfMatch=etag)["Body"].read() == b"v1"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="bkt", Key="k", IfMatch='"0000"')
    assert status_of(e) == 412
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="bkt", Key="k", IfNoneMatch=etag)
    assert status_of(e) == 304
    future = datetime.now(UTC) + timedelta(hours=1)
    past = datetime.now(UTC) - timedelta(hours=1)
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="bkt", Key="k", IfModifiedSince=future)
    assert status_of(e) == 304
    assert s3.get_object(Bucket="bkt", Key="k", IfModifiedSince=past)["Body"].read() == b"v1"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="bkt", Key="k", IfUnmodifiedSince=past)
    assert status_of(e) == 412
    # If-Match that holds wins over If-Unmodified-Since that does not (RFC 7232, as S3)
    assert s3.get_object(Bucket="bkt", Key="k", IfMatch=etag, IfUnmodifiedSince=past)["Body"]


def test_response_header_overrides(s3: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    s3.put_object(Bucket="bkt", Key="k", Body=b"x", ContentType="text/plain")
    got = s3.get_object(
        Bucket="bkt",
        Key="k",
        ResponseContentType="application/json",
        ResponseContentDisposition="inline",
        ResponseCacheControl="no-cache",
    )
    assert got["ContentType"] == "application/json"
    assert got["ContentDisposition"] == "inline"
    assert got["CacheControl"] == "no-cache"


def test_overwrite_frees_the_old_data(s3: Any, gateway: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    s3.put_object(Bucket="bkt", Key="k", Body=b"a" * FILE_SIZE)
    first = data_files(gateway.data_dir)
    s3.put_object(Bucket="bkt", Key="k", Body=b"b" * FILE_SIZE)
    second = data_files(gateway.data_dir)
    assert len(first) == len(second) == 1
    assert first != second
    s3.delete_object(Bucket="bkt", Key="k")
    assert data_files(gateway.data_dir) == []


def test_delete_markers_and_versions(s3: Any, gateway: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    s3.put_bucket_versioning(Bucket="bkt", VersioningConfiguration={"Status": "Enabled"})
    v1 = s3.put_object(Bucket="bkt", Key="k", Body=b"1" * 2000)["VersionId"]
    deleted = s3.delete_object(Bucket="bkt", Key="k")
    assert deleted["DeleteMarker"] is True
    marker = deleted["VersionId"]
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="bkt", Key="k")
    assert status_of(e) == 404
    headers = e.value.response["ResponseMetadata"]["HTTPHeaders"]
    assert headers["x-amz-delete-marker"] == "true"
    # the old version is still there, and its data too
    assert s3.get_object(Bucket="bkt", Key="k", VersionId=v1)["Body"].read() == b"1" * 2000
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="bkt", Key="k", VersionId=marker)
    assert status_of(e) == 405
    # deleting the marker by version brings the object back
    removed = s3.delete_object(Bucket="bkt", Key="k", VersionId=marker)
    assert removed["DeleteMarker"] is True
    assert removed["VersionId"] == marker
    assert s3.get_object(Bucket="bkt", Key="k")["Body"].read() == b"1" * 2000
    s3.delete_object(Bucket="bkt", Key="k", VersionId=v1)
    assert data_files(gateway.data_dir) == []
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="bkt", Key="k", VersionId="not-a-version")
    assert code_of(e) == "InvalidArgument"


def test_delete_of_a_missing_key_is_not_an_error(s3: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    assert s3.delete_object(Bucket="bkt", Key="never")["ResponseMetadata"]["HTTPStatusCode"] == 204


def test_unknown_bucket_and_key(s3: Any) -> None:
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket="nothing-here", Key="k", Body=b"x")
    assert code_of(e) == "NoSuchBucket"
    s3.create_bucket(Bucket="bkt")
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="bkt", Key="missing")
    assert code_of(e) == "NoSuchKey"


def test_object_lock_headers_on_put(s3: Any) -> None:
    s3.create_bucket(Bucket="vault", ObjectLockEnabledForBucket=True)
    until = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    put = s3.put_object(
        Bucket="vault",
        Key="k",
        Body=b"x",
        ObjectLockMode="GOVERNANCE",
        ObjectLockRetainUntilDate=until,
        ObjectLockLegalHoldStatus="ON",
    )
    head = s3.head_object(Bucket="vault", Key="k")
    assert head["ObjectLockMode"] == "GOVERNANCE"
    assert head["ObjectLockRetainUntilDate"] == until
    assert head["ObjectLockLegalHoldStatus"] == "ON"
    with pytest.raises(ClientError) as e:
        s3.delete_object(Bucket="vault", Key="k", VersionId=put["VersionId"])
    assert code_of(e) == "AccessDenied"


def signed_put(gateway: Any, path: str, body: bytes, headers: dict[str, str]) -> Any:
    """A PUT signed by botocore with exactly these headers, sent over a real socket."""
    import httpx
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest("PUT", f"{gateway.url}{path}", data=body, headers=headers)
    credentials = Credentials(gateway.key.access_key_id, gateway.secret)
    S3SigV4Auth(credentials, "s3", "us-east-1").add_auth(request)
    return httpx.put(f"{gateway.url}{path}", content=body, headers=dict(request.headers.items()))


def test_a_lying_decoded_length_does_not_make_a_big_body_inline(s3: Any, gateway: Any) -> None:
    """What arrives decides where data is kept, not what a header announces."""
    s3.create_bucket(Bucket="bkt")
    body = b"L" * 200_000
    response = signed_put(gateway, "/bkt/big", body, {"x-amz-decoded-content-length": "5"})
    assert response.status_code == 200, response.text
    assert len(data_files(gateway.data_dir)) == 1
    assert s3.get_object(Bucket="bkt", Key="big")["Body"].read() == body


def test_range_of_an_empty_object(s3: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    s3.put_object(Bucket="bkt", Key="empty", Body=b"")
    for header in ("bytes=0-10", "bytes=-5"):
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket="bkt", Key="empty", Range=header)
        assert code_of(e) == "InvalidRange"
    assert s3.get_object(Bucket="bkt", Key="empty")["Body"].read() == b""


def test_override_values_must_be_header_values(s3: Any) -> None:
    s3.create_bucket(Bucket="bkt")
    s3.put_object(Bucket="bkt", Key="k", Body=b"x")
    for value in ("attachment; filename=€.txt", "a\r\nX-Evil: 1"):
        with pytest.raises(ClientError) as e:
            s3.get_object(Bucket="bkt", Key="k", ResponseContentDisposition=value)
        assert code_of(e) == "InvalidArgument"


def test_keys_never_name_paths(s3: Any, gateway: Any) -> None:
    """Data is stored under its stream id: a key full of `..` stays inside objects/."""
    s3.create_bucket(Bucket="bkt")
    key = "../../../../escape/../x"
    s3.put_object(Bucket="bkt", Key=key, Body=b"e" * FILE_SIZE)
    (stored,) = data_files(gateway.data_dir)
    objects_dir = (gateway.data_dir / "objects").resolve()
    assert stored.resolve().is_relative_to(objects_dir)
    assert "escape" not in str(stored)
    assert s3.get_object(Bucket="bkt", Key=key)["Body"].read() == b"e" * FILE_SIZE
