"""SigV4 verification against requests signed by botocore itself (header auth, presigned
URLs, a real boto3 client's requests) and AWS's documented examples; then every refusal."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, unquote_to_bytes, urlsplit

import boto3
import pytest
from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials as BotoCredentials
from hypothesis import given
from hypothesis import strategies as st

from ripple.gateway.errors import S3Error
from ripple.gateway.sigv4 import (
    SignedRequest,
    _decode,
    _encode,
    canonical_uri,
    signing_key,
    verify,
)

ACCESS_KEY = "AKIDRIPPLETEST"
SECRET = "s3cr3t/+KEY=with-odd-chars"
KEYS = {ACCESS_KEY: SECRET}
ENDPOINT = "https://s3.example.com"

# AWS's documented example credentials and requests ("Signature Calculations for the
# Authorization Header" and "Query String Authentication" in the S3 API reference).
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
AWS_NOW = datetime(2013, 5, 24, tzinfo=UTC)


class Wire:
    """A signed request as the gateway receives it: raw path, raw query, lower-case headers."""

    def __init__(self, method: str, url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(url)
        self.method = method
        self.path = parts.path
        self.query = parts.query
        self.headers = {name.lower(): value for name, value in headers.items()}
        self.headers.setdefault("host", parts.netloc)  # what the HTTP client adds

    def verify(self, now: datetime | None = None, **changes: Any) -> SignedRequest | None:
        args: dict[str, Any] = {
            "method": self.method,
            "raw_path": self.path,
            "query_string": self.query,
            "headers": self.headers,
            "lookup": KEYS.get,
            "now": now or datetime.now(UTC),
        }
        args.update(changes)
        return verify(**args)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def signed(
    method: str,
    path: str,
    query: str = "",
    *,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    unsigned_payload: bool = False,
    secret: str = SECRET,
    region: str = "us-east-1",
) -> Wire:
    """A request signed with botocore's S3SigV4Auth (the Authorization header)."""
    url = ENDPOINT + path + (f"?{query}" if query else "")
    request = AWSRequest(method=method, url=url, headers=headers or {}, data=body)
    if unsigned_payload:
        request.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    S3SigV4Auth(BotoCredentials(ACCESS_KEY, secret), "s3", region).add_auth(request)
    prepared = request.prepare()
    return Wire(method, prepared.url, {k: _text(v) for k, v in prepared.headers.items()})


def presigned(method: str, path: str, query: str = "", *, expires: int = 3600) -> Wire:
    """A presigned URL made with botocore's S3SigV4QueryAuth."""
    url = ENDPOINT + path + (f"?{query}" if query else "")
    request = AWSRequest(method=method, url=url)
    S3SigV4QueryAuth(BotoCredentials(ACCESS_KEY, SECRET), "s3", "us-east-1", expires).add_auth(
        request
    )
    return Wire(method, request.prepare().url, {})


def object_path(key: str) -> str:
    return "/bucket/" + quote(key, safe="/~")  # how botocore puts a key in the URL


def refused(code: str, wire: Wire, **changes: Any) -> S3Error:
    with pytest.raises(S3Error) as caught:
        wire.verify(**changes)
    assert caught.value.code == code, caught.value.message
    assert "\n" not in caught.value.message
    return caught.value


KEYS_TO_TRY = [
    "plain.txt",
    "a b/c+d%2Fe~.txt",
    "dir/sub dir/file (1).txt",
    "ünïcødé/日本語 ファイル.txt",
    "!$&'()*,;=:@[]",
    "tilde~and.dots..",
    "trailing/",
]


@pytest.mark.parametrize("key", KEYS_TO_TRY)
@pytest.mark.parametrize("method", ["GET", "PUT", "HEAD", "DELETE"])
def test_header_auth_for_odd_keys(method: str, key: str) -> None:
    body = b"some bytes" if method == "PUT" else b""
    result = signed(method, object_path(key), body=body).verify()
    assert result is not None
    assert result.access_key_id == ACCESS_KEY
    assert not result.presigned
    assert result.scope.endswith("/us-east-1/s3/aws4_request")
    assert result.region == "us-east-1"


@pytest.mark.parametrize(
    "query",
    [
        "versioning",
        "uploads",
        "list-type=2&prefix=a%2Fb",
        "list-type=2&prefix=%C3%BC%20x&delimiter=%2F&max-keys=10",
        "uploadId=abc&partNumber=3",
        "tagging&versionId=v1",
        "prefix=a%2Bb&marker=",
    ],
)
def test_header_auth_with_query(query: str) -> None:
    assert signed("GET", "/bucket", query).verify() is not None


def test_payload_hash_is_returned() -> None:
    result = signed("PUT", object_path("k"), body=b"hello").verify()
    assert result is not None
    assert result.payload_hash == "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    assert not result.streaming


def test_unsigned_payload() -> None:
    wire = signed("PUT", object_path("k"), body=b"hello", unsigned_payload=True)
    assert wire.headers["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"
    result = wire.verify()
    assert result is not None
    assert result.payload_hash == "UNSIGNED-PAYLOAD"


def test_any_region_is_accepted_and_recorded() -> None:
    result = signed("GET", "/bucket", region="eu-west-3").verify()
    assert result is not None
    assert result.scope.split("/")[1:] == ["eu-west-3", "s3", "aws4_request"]


def test_signing_key_is_derived_and_cached() -> None:
    result = signed("GET", "/bucket").verify()
    assert result is not None
    date = result.amz_date[:8]
    assert result.signing_key == signing_key(SECRET, date, "us-east-1")
    assert signing_key(SECRET, date, "us-east-1") is signing_key(SECRET, date, "us-east-1")
    assert signing_key(SECRET, date, "eu-west-1") != result.signing_key
    assert "signing_key" not in repr(result)


def test_canonical_uri_reencodes_each_segment() -> None:
    assert canonical_uri("/b/a b/c+d%2Fe~.txt") == "/b/a%20b/c%2Bd%2Fe~.txt"
    assert canonical_uri("/b/%C3%BC") == canonical_uri("/b/ü")
    assert canonical_uri("/b/a%7eb") == "/b/a~b"
    assert canonical_uri("") == "/"


_WIRE_TEXT = st.one_of(
    st.text(alphabet="aZ09-._~%+ /=&2Fü\xff", max_size=30),  # mostly unreserved, some not
    st.text(alphabet=st.characters(codec="latin-1"), max_size=30),  # as ASGI decodes the wire
)


@given(_WIRE_TEXT)
def test_canonical_encoding_matches_the_decode_encode_round_trip(text: str) -> None:
    """Names, values and segments with nothing to decode or encode skip the round trip;
    they must come out as the round trip makes them."""
    decoded = unquote_to_bytes(text).decode("utf-8", "surrogateescape")
    assert _decode(text) == decoded
    assert _encode(decoded) == quote(decoded.encode("utf-8", "surrogateescape"), safe="")
    segment = text.replace("/", "")
    assert canonical_uri("/" + segment) == "/" + quote(unquote_to_bytes(segment), safe="")


# A real boto3 client: whatever it sends (checksum headers, trailers, expect) verifies.


class Captured(Exception):
    def __init__(self, request: Any) -> None:
        self.request = request


def _capture(request: Any, **_: Any) -> None:
    raise Captured(request)


@pytest.fixture
def client() -> Any:
    s3 = boto3.client(
        "s3",
        endpoint_url=ENDPOINT,
        region_name="us-east-1",
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    s3.meta.events.register("before-send.s3", _capture)
    return s3


def sent(call: Any, **params: Any) -> Wire:
    with pytest.raises(Captured) as caught:
        call(**params)
    request = caught.value.request
    return Wire(request.method, request.url, {k: _text(v) for k, v in request.headers.items()})


def test_boto3_requests_verify(client: Any) -> None:
    wires = [
        sent(client.put_object, Bucket="b", Key="a b/c+d%2Fe~.txt", Body=b"hello world"),
        sent(client.list_objects_v2, Bucket="b", Prefix="a/b", Delimiter="/"),
        sent(client.get_bucket_versioning, Bucket="b"),
        sent(client.create_multipart_upload, Bucket="b", Key="ü ~+"),
        sent(client.upload_part, Bucket="b", Key="k", UploadId="u+/=", PartNumber=2, Body=b"x"),
        sent(client.get_object, Bucket="b", Key="k", Range="bytes=0-9", VersionId="v 1"),
        sent(client.delete_objects, Bucket="b", Delete={"Objects": [{"Key": "a"}]}),
    ]
    for wire in wires:
        result = wire.verify()
        assert result is not None, wire.path
    put = wires[0].verify()
    assert put is not None
    assert put.payload_hash == "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    assert put.streaming


def test_boto3_presigned_url_verifies() -> None:
    s3 = boto3.client(
        "s3",
        endpoint_url=ENDPOINT,
        region_name="us-east-1",
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET,
        config=Config(signature_version="s3v4"),
    )
    url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": "b", "Key": "a b/ü+~.txt"}, ExpiresIn=60
    )
    result = Wire("GET", url, {}).verify()
    assert result is not None
    assert result.presigned
    assert result.payload_hash == "UNSIGNED-PAYLOAD"


def test_boto3_default_presigned_url_is_sigv2_and_refused(client: Any) -> None:
    # boto3 presigns with SigV2 for a custom endpoint in us-east-1 unless told "s3v4".
    url = client.generate_presigned_url("get_object", Params={"Bucket": "b", "Key": "k"})
    assert "AWSAccessKeyId=" in url
    error = refused("InvalidRequest", Wire("GET", url, {}))
    assert "AWS4-HMAC-SHA256" in error.message


# Presigned URLs made by botocore's query signer.


@pytest.mark.parametrize("key", KEYS_TO_TRY)
def test_presigned_url(key: str) -> None:
    result = presigned("GET", object_path(key)).verify()
    assert result is not None
    assert result.presigned
    assert result.payload_hash == "UNSIGNED-PAYLOAD"


def test_presigned_put_with_query() -> None:
    result = presigned("PUT", object_path("k"), "partNumber=1&uploadId=x%2By").verify()
    assert result is not None


def test_presigned_url_expires() -> None:
    wire = presigned("GET", object_path("k"), expires=60)
    assert wire.verify(now=datetime.now(UTC) + timedelta(seconds=30)) is not None
    error = refused("AccessDenied", wire, now=datetime.now(UTC) + timedelta(seconds=90))
    assert "expired" in error.message
    assert error.status == 403


def test_presigned_url_from_the_future() -> None:
    wire = presigned("GET", object_path("k"))
    refused("AccessDenied", wire, now=datetime.now(UTC) - timedelta(minutes=20))


@pytest.mark.parametrize("expires", ["604801", "abc", "9" * 5000, "+5"])
def test_presigned_expires_out_of_range(expires: str) -> None:
    wire = presigned("GET", object_path("k"))
    wire.query = wire.query.replace("X-Amz-Expires=3600", f"X-Amz-Expires={expires}")
    refused("AuthorizationQueryParametersError", wire)


@pytest.mark.parametrize("expires", ["0", "-5", "-604800"])
def test_a_presigned_url_of_no_lifetime_has_expired(expires: str) -> None:
    """An expiry of zero or less seconds expired the moment it was signed."""
    wire = presigned("GET", object_path("k"))
    wire.query = wire.query.replace("X-Amz-Expires=3600", f"X-Amz-Expires={expires}")
    refused("AccessDenied", wire)


def test_presigned_missing_parameter() -> None:
    wire = presigned("GET", object_path("k"))
    wire.query = "&".join(p for p in wire.query.split("&") if not p.startswith("X-Amz-Date="))
    refused("AuthorizationQueryParametersError", wire)


def test_presigned_tampered_query() -> None:
    wire = presigned("GET", "/bucket", "prefix=a")
    wire.query = wire.query.replace("prefix=a", "prefix=b")
    refused("SignatureDoesNotMatch", wire)


def test_presigned_unsigned_amz_header() -> None:
    wire = presigned("PUT", object_path("k"))
    wire.headers["x-amz-acl"] = "public-read"
    error = refused("AccessDenied", wire)
    assert "x-amz-acl" in error.message


# AWS's documented examples: independent of botocore.


def test_aws_example_get_object() -> None:
    headers = {
        "host": "examplebucket.s3.amazonaws.com",
        "range": "bytes=0-9",
        "x-amz-content-sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "x-amz-date": "20130524T000000Z",
        "authorization": f"AWS4-HMAC-SHA256 Credential={AWS_KEY}/20130524/us-east-1/s3/"
        "aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature="
        "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
    }
    result = verify("GET", "/test.txt", "", headers, {AWS_KEY: AWS_SECRET}.get, AWS_NOW)
    assert result is not None
    assert result.amz_date == "20130524T000000Z"
    headers["range"] = "bytes=0-10"
    with pytest.raises(S3Error) as caught:
        verify("GET", "/test.txt", "", headers, {AWS_KEY: AWS_SECRET}.get, AWS_NOW)
    assert caught.value.code == "SignatureDoesNotMatch"
    assert caught.value.status == 403
    assert "range:bytes=0-10" in caught.value.extra["CanonicalRequest"]


def test_aws_example_presigned() -> None:
    query = (
        "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2F"
        "us-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&"
        "X-Amz-SignedHeaders=host&X-Amz-Signature="
        "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
    )
    headers = {"host": "examplebucket.s3.amazonaws.com"}
    lookup = {AWS_KEY: AWS_SECRET}.get
    later = AWS_NOW + timedelta(hours=23)
    result = verify("GET", "/test.txt", query, headers, lookup, later)
    assert result is not None
    assert result.seed_signature.startswith("aeeed9bb")
    with pytest.raises(S3Error) as caught:
        verify("GET", "/test.txt", query, headers, lookup, AWS_NOW + timedelta(hours=25))
    assert caught.value.code == "AccessDenied"


# Refusals of header-signed requests.


def test_anonymous_request_is_none() -> None:
    assert verify("GET", "/bucket/k", "a=1", {"host": "h"}, KEYS.get, datetime.now(UTC)) is None


def test_tampered_path() -> None:
    wire = signed("GET", object_path("a b"))
    wire.path = object_path("a c")
    refused("SignatureDoesNotMatch", wire)


def test_tampered_header() -> None:
    wire = signed("PUT", object_path("k"), headers={"Content-Type": "text/plain"})
    wire.headers["content-type"] = "text/html"
    refused("SignatureDoesNotMatch", wire)


def test_tampered_query() -> None:
    wire = signed("GET", "/bucket", "list-type=2&prefix=a%2Fb")
    wire.query = "list-type=2&prefix=a%2Fc"
    refused("SignatureDoesNotMatch", wire)


def test_tampered_method() -> None:
    wire = signed("GET", object_path("k"))
    wire.method = "DELETE"
    refused("SignatureDoesNotMatch", wire)


def test_tampered_payload_hash() -> None:
    wire = signed("PUT", object_path("k"), body=b"hello")
    wire.headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
    refused("SignatureDoesNotMatch", wire)


def test_plus_in_raw_query_is_a_literal_plus() -> None:
    wire = signed("GET", "/bucket", "prefix=a%20b")
    wire.query = "prefix=a+b"  # not the same as a space
    refused("SignatureDoesNotMatch", wire)


def test_unknown_access_key() -> None:
    error = refused("InvalidAccessKeyId", signed("GET", "/bucket"), lookup=lambda _: None)
    assert error.status == 403


def test_wrong_secret() -> None:
    refused("SignatureDoesNotMatch", signed("GET", "/bucket", secret="not-the-secret"))


def test_clock_skew() -> None:
    wire = signed("GET", "/bucket")
    now = datetime.now(UTC)
    assert wire.verify(now=now + timedelta(minutes=14)) is not None
    assert wire.verify(now=now - timedelta(minutes=14)) is not None
    error = refused("RequestTimeTooSkewed", wire, now=now + timedelta(minutes=16))
    assert error.status == 403
    refused("RequestTimeTooSkewed", wire, now=now - timedelta(minutes=16))


def test_missing_content_sha256() -> None:
    wire = signed("GET", "/bucket")
    del wire.headers["x-amz-content-sha256"]
    error = refused("InvalidRequest", wire)
    assert "x-amz-content-sha256" in error.message
    assert error.status == 400


def test_invalid_content_sha256() -> None:
    wire = signed("GET", "/bucket")
    wire.headers["x-amz-content-sha256"] = "STREAMING-SOMETHING-ELSE"
    refused("InvalidArgument", wire)


def test_missing_date() -> None:
    wire = signed("GET", "/bucket")
    del wire.headers["x-amz-date"]
    refused("AccessDenied", wire)


def test_date_header_instead_of_x_amz_date() -> None:
    wire = signed("GET", "/bucket", headers={"Date": "Thu, 01 Jan 2026 00:00:00 GMT"})
    assert "x-amz-date" not in wire.headers
    assert wire.verify() is not None


def test_credential_date_must_match_request_date() -> None:
    wire = signed("GET", "/bucket")
    old = wire.headers["x-amz-date"][:8]
    yesterday = (datetime.strptime(old, "%Y%m%d") - timedelta(days=1)).strftime("%Y%m%d")
    wire.headers["authorization"] = wire.headers["authorization"].replace(
        f"/{old}/", f"/{yesterday}/"
    )
    refused("AuthorizationHeaderMalformed", wire)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("/s3/", "/ec2/"),
        ("aws4_request", "aws5_request"),
        ("Credential=", "Credentials="),
        (", Signature=", ", "),
        ("SignedHeaders=", "SignedHeaders=;"),
        ("SignedHeaders=", "SignedHeaders=x-amz-date;"),  # listed twice
        ("/us-east-1/s3/", "/s3/"),
    ],
)
def test_malformed_authorization(old: str, new: str) -> None:
    wire = signed("GET", "/bucket")
    wire.headers["authorization"] = wire.headers["authorization"].replace(old, new, 1)
    error = refused("AuthorizationHeaderMalformed", wire)
    assert error.status == 400


def test_signed_headers_without_host() -> None:
    wire = signed("GET", "/bucket")
    auth = wire.headers["authorization"]
    wire.headers["authorization"] = auth.replace("SignedHeaders=host;", "SignedHeaders=")
    refused("AuthorizationHeaderMalformed", wire)


def test_garbage_authorization() -> None:
    wire = signed("GET", "/bucket")
    wire.headers["authorization"] = "AWS4-HMAC-SHA256 nonsense"
    refused("AuthorizationHeaderMalformed", wire)


def test_signature_v2_is_refused() -> None:
    wire = signed("GET", "/bucket")
    wire.headers["authorization"] = f"AWS {ACCESS_KEY}:c2lnbmF0dXJl"
    error = refused("InvalidRequest", wire)
    assert "AWS4-HMAC-SHA256" in error.message
    v2_query = Wire("GET", f"{ENDPOINT}/b/k?AWSAccessKeyId=AK&Expires=1&Signature=x", {})
    refused("InvalidRequest", v2_query)


def test_header_and_query_auth_together() -> None:
    wire = presigned("GET", object_path("k"))
    wire.headers["authorization"] = signed("GET", object_path("k")).headers["authorization"]
    refused("InvalidArgument", wire)


def test_unsigned_amz_header_is_refused() -> None:
    wire = signed("PUT", object_path("k"))
    wire.headers["x-amz-copy-source"] = "/other/secret"
    error = refused("AccessDenied", wire)
    assert "x-amz-copy-source" in error.message


def test_signed_header_missing_from_request() -> None:
    wire = signed("PUT", object_path("k"), headers={"Content-Type": "text/plain"})
    del wire.headers["content-type"]
    refused("SignatureDoesNotMatch", wire)


def test_header_values_are_trimmed_and_collapsed() -> None:
    wire = signed("PUT", object_path("k"), headers={"X-Amz-Meta-Note": "a  b   c"})
    wire.headers["x-amz-meta-note"] = "  a b c "
    assert wire.verify() is not None
