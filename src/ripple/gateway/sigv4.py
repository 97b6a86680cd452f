"""AWS Signature Version 4 verification for S3 requests: who signed a request, or why not.

`verify` checks the `Authorization: AWS4-HMAC-SHA256 ...` header or a presigned URL's
`X-Amz-*` query parameters the way S3 does (the path is not normalized; clock skew of at
most 15 minutes; presigned URLs valid for `X-Amz-Expires` seconds). It returns None for an
anonymous request, a `SignedRequest` (with the signing key the `aws-chunked` decoder needs
for chunk signatures) for a valid one, and raises `S3Error` for everything else.
Pure functions over the request's raw parts: no web framework here.

S3 requests are signed for the service `s3`; the SNS-compatible topic API
(`ripple.gateway.topics`) verifies with `service="sns"`, whose clients sign the body's
SHA-256 without sending it as `x-amz-content-sha256` (`payload_sha256`).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from urllib.parse import quote, unquote_to_bytes

from ripple.gateway.errors import S3Error
from ripple.numbers import NumberError, whole_number

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
STREAMING_PAYLOAD = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
STREAMING_PAYLOAD_TRAILER = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
STREAMING_UNSIGNED_PAYLOAD_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
MAX_EXPIRES = 604800  # a presigned URL lives at most 7 days
AMZ_DATE_FORMAT = "%Y%m%dT%H%M%SZ"

_STREAMING = (STREAMING_PAYLOAD, STREAMING_PAYLOAD_TRAILER, STREAMING_UNSIGNED_PAYLOAD_TRAILER)
_PAYLOAD_NAMES = {UNSIGNED_PAYLOAD, *_STREAMING}
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_SIGNATURE = re.compile(r"[0-9a-f]{64}")
_AMZ_DATE = re.compile(r"[0-9]{8}T[0-9]{6}Z")
# what SigV4's URI encoding keeps as it is (RFC 3986's unreserved characters): most names,
# values and path segments are only these, and skip the decode-encode round trip
_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]*")
_UNSUPPORTED = (
    f"The authorization mechanism you have provided is not supported. Please use {ALGORITHM}."
)
_QUERY_AUTH = (
    *("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature"),
    *("X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Expires"),
)
_HEADER_ERROR = "AuthorizationHeaderMalformed"
_QUERY_ERROR = "AuthorizationQueryParametersError"


@dataclass(frozen=True)
class Credentials:
    """An access key and its secret: who signs requests."""

    access_key_id: str
    secret_key: str = field(repr=False)


@dataclass(frozen=True)
class SignedRequest:
    """A request whose signature checked out, with what its body's decoder needs."""

    access_key_id: str
    payload_hash: str  # x-amz-content-sha256 (hex lower-cased), or UNSIGNED-PAYLOAD
    signing_key: bytes = field(repr=False)  # the derived key, for chunk and trailer signatures
    seed_signature: str  # the request's signature: the first chunk's previous signature
    scope: str  # "20261121/us-east-1/s3/aws4_request"
    amz_date: str  # "20261121T101010Z"
    presigned: bool

    @property
    def streaming(self) -> bool:
        """Whether the body is `aws-chunked` (the payload hash names a streaming mode)."""
        return self.payload_hash.startswith("STREAMING-")

    @property
    def region(self) -> str:
        return self.scope.split("/")[1]


def verify(
    method: str,
    raw_path: str,
    query_string: str,
    headers: Mapping[str, str],
    lookup: Callable[[str], str | None],
    now: datetime,
    max_skew: timedelta = timedelta(minutes=15),
    *,
    service: str = "s3",
    payload_sha256: str | None = None,
) -> SignedRequest | None:
    """Check a request's SigV4 signature; None when it carries no signature at all.

    `raw_path` and `query_string` are exactly as on the wire (still percent-encoded);
    `headers` has lower-case names and values decoded as Latin-1 (as ASGI servers do);
    `lookup` maps an access key id to its secret key (or None). Raises `S3Error` for a
    signature that is malformed, expired or wrong, or made for another `service`.
    `payload_sha256`, the body's SHA-256 in hex, stands in for a missing
    `x-amz-content-sha256` header (the caller has read the body: SNS clients sign it so).
    """
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    params = _parse_query(query_string)
    names = {name for name, _ in params}
    authorization = headers.get("authorization")
    presigned = bool(names.intersection(_QUERY_AUTH))
    if authorization is not None and presigned:
        raise S3Error(
            "InvalidArgument",
            "Only one auth mechanism allowed; send either the Authorization header or the "
            "X-Amz-* query parameters, not both.",
        )
    if authorization is not None:
        claim = _header_claim(authorization, headers, params, service, payload_sha256)
    elif presigned:
        claim = _query_claim(params, service)
    elif "AWSAccessKeyId" in names or "Signature" in names:
        raise S3Error("InvalidRequest", _UNSUPPORTED)
    else:
        return None
    secret = lookup(claim.access_key_id)
    if secret is None:
        raise S3Error(
            "InvalidAccessKeyId",
            "The AWS Access Key Id you provided does not exist in our records; "
            "check the client's access key.",
            extra={"AWSAccessKeyId": claim.access_key_id},
        )
    _check_time(claim, now, max_skew)
    unsigned = sorted(h for h in headers if h.startswith("x-amz-") and h not in claim.headers)
    if unsigned:
        raise S3Error(
            "AccessDenied",
            "There were headers present in the request which were not signed: "
            f"{', '.join(unsigned)}; sign every x-amz-* header.",
            extra={"HeadersNotSigned": ", ".join(unsigned)},
        )
    return _check_signature(method, raw_path, headers, claim, secret, service)


def signing_key(secret_key: str, date: str, region: str, service: str = "s3") -> bytes:
    """The SigV4 key for a service (S3) on one day in one region (cached: it signs many
    requests)."""
    cache_key = (secret_key, date, region, service)
    key = _KEYS.get(cache_key)
    if key is None:
        key = _hmac(("AWS4" + secret_key).encode(), date)
        for part in (region, service, "aws4_request"):
            key = _hmac(key, part)
        if len(_KEYS) >= _KEYS_MAX:
            _KEYS.clear()
        _KEYS[cache_key] = key
    return key


_KEYS: dict[tuple[str, str, str, str], bytes] = {}
_KEYS_MAX = 1024


def sign(key: bytes, string_to_sign: str) -> str:
    """The hex HMAC-SHA256 of a string to sign."""
    return hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()


def canonical_uri(raw_path: str) -> str:
    """The path as S3 signs it: each segment decoded, then encoded (unreserved kept)."""
    if not raw_path:
        return "/"
    return "/".join(
        segment if _UNRESERVED.fullmatch(segment) else quote(unquote_to_bytes(segment), safe="")
        for segment in raw_path.split("/")
    )


def canonical_query(params: list[tuple[str, str]]) -> str:
    """Names and values URI-encoded, sorted by name then value, joined with '&'."""
    pairs = sorted((_encode(name), _encode(value)) for name, value in params)
    return "&".join(f"{name}={value}" for name, value in pairs)


def _encode(text: str) -> str:
    if _UNRESERVED.fullmatch(text):
        return text
    return quote(text.encode("utf-8", "surrogateescape"), safe="")


def _parse_query(query_string: str) -> list[tuple[str, str]]:
    """The raw query's parameters, decoded ('+' is a literal plus; no '=' means empty)."""
    params = []
    for piece in query_string.split("&"):
        if piece:
            name, _, value = piece.partition("=")
            params.append((_decode(name), _decode(value)))
    return params


def _decode(text: str) -> str:
    if "%" not in text:  # nothing to decode: the round trip below would give `text` back
        return text
    return unquote_to_bytes(text).decode("utf-8", "surrogateescape")


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode(), hashlib.sha256).digest()


@dataclass(frozen=True)
class _Claim:
    """What a signature claims, from the header or the query, before it is checked."""

    access_key_id: str
    region: str
    headers: list[str]  # the signed headers, sorted
    signature: str
    when: datetime
    payload: str  # the payload hash as sent: the canonical request's last line
    params: list[tuple[str, str]]  # the signed query parameters
    expires: int | None  # presigned URLs: seconds of validity

    amz_date: str  # `when` as signed: YYYYMMDDTHHMMSSZ, as sent


def _header_claim(
    authorization: str,
    headers: Mapping[str, str],
    params: list[tuple[str, str]],
    service: str,
    payload_sha256: str | None,
) -> _Claim:
    algorithm, _, rest = authorization.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise S3Error("InvalidRequest", _UNSUPPORTED)
    fields: dict[str, str] = {}
    for item in rest.split(","):
        name, equals, value = item.strip().partition("=")
        if not equals or name in fields:
            raise _malformed(_HEADER_ERROR, f"cannot parse {item.strip()!r}")
        fields[name] = value.strip()
    if set(fields) != {"Credential", "SignedHeaders", "Signature"}:
        raise _malformed(
            _HEADER_ERROR,
            "the authorization header requires three components: Credential, "
            "SignedHeaders, and Signature",
        )
    payload = headers.get("x-amz-content-sha256", payload_sha256)
    if payload is None:
        raise S3Error(
            "InvalidRequest",
            "Missing required header for this request: x-amz-content-sha256; "
            "send the payload's SHA-256 or UNSIGNED-PAYLOAD.",
        )
    _payload_hash(payload)
    when: datetime | None = None
    amz_date: str | None = None
    if "x-amz-date" in headers:
        amz_date = headers["x-amz-date"].strip()
        when = _parse_amz_date(amz_date)
    elif "date" in headers:
        try:
            when = parsedate_to_datetime(headers["date"])
            if when is not None:
                when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
        except (TypeError, ValueError, IndexError, OverflowError):
            when = None  # OverflowError: a zone that moves year 9999 past datetime's range
    if when is None:
        raise S3Error(
            "AccessDenied",
            "AWS authentication requires a valid Date or x-amz-date header; send one.",
        )
    fields_in_order = (fields["Credential"], fields["SignedHeaders"], fields["Signature"])
    return _claim(_HEADER_ERROR, service, *fields_in_order, when, amz_date, payload, params, None)


def _query_claim(params: list[tuple[str, str]], service: str) -> _Claim:
    values: dict[str, str] = {}
    for name, value in params:
        if name in _QUERY_AUTH or name == "X-Amz-Content-Sha256":
            if name in values:
                raise _malformed(_QUERY_ERROR, f"{name} appears twice")
            values[name] = value
    if not all(name in values for name in _QUERY_AUTH):
        raise S3Error(
            _QUERY_ERROR,
            "Query-string authentication version 4 requires the X-Amz-Algorithm, "
            "X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, "
            "and X-Amz-Expires parameters.",
        )
    if values["X-Amz-Algorithm"] != ALGORITHM:
        raise S3Error(_QUERY_ERROR, f'X-Amz-Algorithm only supports "{ALGORITHM}".')
    when = _parse_amz_date(values["X-Amz-Date"])
    if when is None:
        raise S3Error(
            _QUERY_ERROR, "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"."
        )
    try:
        expires = whole_number(
            values["X-Amz-Expires"], "X-Amz-Expires", least=-MAX_EXPIRES, most=MAX_EXPIRES
        )
    except NumberError:
        raise S3Error(
            _QUERY_ERROR,
            f"X-Amz-Expires must be a number of seconds from 1 to {MAX_EXPIRES} (a week).",
        ) from None
    if expires <= 0:  # a URL that expired the moment it was signed
        raise S3Error("AccessDenied", "Request has expired; create a new presigned URL.")
    payload = values.get("X-Amz-Content-Sha256", UNSIGNED_PAYLOAD)
    _payload_hash(payload)
    signed_params = [(name, value) for name, value in params if name != "X-Amz-Signature"]
    fields = (values["X-Amz-Credential"], values["X-Amz-SignedHeaders"], values["X-Amz-Signature"])
    amz_date = values["X-Amz-Date"]
    return _claim(_QUERY_ERROR, service, *fields, when, amz_date, payload, signed_params, expires)


def _claim(
    code: str,
    expected_service: str,
    credential: str,
    signed_headers: str,
    signature: str,
    when: datetime,
    amz_date: str | None,
    payload: str,
    params: list[tuple[str, str]],
    expires: int | None,
) -> _Claim:
    """The claim, once its credential scope and signed header list are well formed.
    `amz_date`: `when` as the request sent it (YYYYMMDDTHHMMSSZ; None: from a Date header)."""
    pieces = credential.rsplit("/", 4)
    if len(pieces) != 5 or not all(pieces):
        raise _malformed(
            code,
            'the Credential is mal-formed; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/'
            'aws4_request"',
        )
    access_key_id, date, region, service, terminator = pieces
    if amz_date is None:  # from a Date header
        amz_date = when.strftime(AMZ_DATE_FORMAT)
    if date != amz_date[:8]:
        raise _malformed(code, f"Invalid credential date {date!r}: it is not the request's date")
    if service != expected_service:
        raise _malformed(
            code, f'incorrect service "{service}"; this endpoint belongs to "{expected_service}"'
        )
    if terminator != "aws4_request":
        detail = f'incorrect terminal "{terminator}"; this endpoint uses "aws4_request"'
        raise _malformed(code, detail)
    names = signed_headers.lower().split(";")
    if any(not name or name != name.strip() for name in names) or len(set(names)) < len(names):
        raise _malformed(code, f"SignedHeaders {signed_headers!r} is not a list of header names")
    if "host" not in names:
        raise _malformed(code, "SignedHeaders must include host")
    if not _SIGNATURE.fullmatch(signature):
        raise S3Error(
            "SignatureDoesNotMatch",
            "The signature is not 64 lower-case hex digits; check the client's signing method.",
        )
    names.sort()
    return _Claim(access_key_id, region, names, signature, when, payload, params, expires, amz_date)


def _malformed(code: str, detail: str) -> S3Error:
    where = "authorization header" if code == _HEADER_ERROR else "query"
    return S3Error(code, f"The {where} is malformed; {detail}; sign the request with SigV4.")


def _payload_hash(value: str) -> str:
    """The x-amz-content-sha256 value, checked (hex lower-cased)."""
    if _HEX64.fullmatch(value):
        return value.lower()
    if value in _PAYLOAD_NAMES:
        return value
    raise S3Error(
        "InvalidArgument",
        f"x-amz-content-sha256 must be a SHA-256 in hex, {UNSIGNED_PAYLOAD} or a STREAMING-* "
        f"mode, not {value[:80]!r}.",
    )


def _parse_amz_date(text: str) -> datetime | None:
    if not _AMZ_DATE.fullmatch(text):
        return None
    try:  # YYYYMMDDTHHMMSSZ, the pattern checked: slicing is much faster than strptime
        return datetime(
            int(text[0:4]),
            int(text[4:6]),
            int(text[6:8]),
            int(text[9:11]),
            int(text[11:13]),
            int(text[13:15]),
            tzinfo=UTC,
        )
    except ValueError:  # a month 13, a 30 February, a second 61
        return None


def _check_time(claim: _Claim, now: datetime, max_skew: timedelta) -> None:
    """Header auth: within the skew of our clock; presigned URLs: not expired yet."""
    iso = "%Y-%m-%dT%H:%M:%SZ"
    if claim.expires is None:
        if abs(now - claim.when) > max_skew:
            raise S3Error(
                "RequestTimeTooSkewed",
                "The difference between the request time and the current time is too large; "
                "set the client's clock right (NTP).",
                extra={
                    "RequestTime": claim.amz_date,
                    "ServerTime": now.strftime(iso),
                    "MaxAllowedSkewMilliseconds": str(int(max_skew.total_seconds() * 1000)),
                },
            )
        return
    if claim.when > now + max_skew:
        raise S3Error("AccessDenied", "Request is not valid yet; check the client's clock.")
    expires_at = claim.when + timedelta(seconds=claim.expires)
    if now > expires_at:
        raise S3Error(
            "AccessDenied",
            "Request has expired; create a new presigned URL.",
            extra={
                "X-Amz-Expires": str(claim.expires),
                "Expires": expires_at.strftime(iso),
                "ServerTime": now.strftime(iso),
            },
        )


def _wire_bytes(text: str) -> bytes:
    """The canonical request as bytes: header values were decoded as Latin-1."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape")


def _check_signature(
    method: str,
    raw_path: str,
    headers: Mapping[str, str],
    claim: _Claim,
    secret: str,
    service: str,
) -> SignedRequest:
    """Compare the signature with ours; the payload hash is signed exactly as sent."""
    missing = [name for name in claim.headers if name not in headers]
    if missing:
        raise S3Error(
            "SignatureDoesNotMatch",
            f"The signed header {missing[0]!r} is not in the request; send every header "
            "listed in SignedHeaders.",
        )
    canonical_headers = "".join(f"{h}:{' '.join(headers[h].split())}\n" for h in claim.headers)
    canonical_request = "\n".join(
        [
            method.upper(),
            canonical_uri(raw_path),
            canonical_query(claim.params),
            canonical_headers,
            ";".join(claim.headers),
            claim.payload,
        ]
    )
    date = claim.amz_date[:8]
    scope = f"{date}/{claim.region}/{service}/aws4_request"
    request_hash = hashlib.sha256(_wire_bytes(canonical_request)).hexdigest()
    string_to_sign = f"{ALGORITHM}\n{claim.amz_date}\n{scope}\n{request_hash}"
    key = signing_key(secret, date, claim.region, service)
    if not hmac.compare_digest(sign(key, string_to_sign), claim.signature):
        raise S3Error(
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided. "
            "Check your key and signing method.",
            extra={
                "AWSAccessKeyId": claim.access_key_id,
                "StringToSign": string_to_sign,
                "SignatureProvided": claim.signature,
                "CanonicalRequest": canonical_request,
            },
        )
    return SignedRequest(
        access_key_id=claim.access_key_id,
        payload_hash=_payload_hash(claim.payload),
        signing_key=key,
        seed_signature=claim.signature,
        scope=scope,
        amz_date=claim.amz_date,
        presigned=claim.expires is not None,
    )
