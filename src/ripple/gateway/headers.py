"""Object headers both ways: what a write request sets (user metadata `x-amz-meta-*`, the
stored system headers, object lock, `x-amz-tagging`) and what GET/HEAD answer for a version
(`x-amz-tagging-count` among them); and the conditional headers a read, a copy's source or
a write is judged by (`check_conditions`, `write_condition`).

User metadata names are stored lower-cased without their `x-amz-meta-` prefix; the system
headers S3 stores with an object (Content-Encoding, Cache-Control, …) are kept in the same
map under `:name`, a key no HTTP header name can take.
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import Literal, cast
from urllib.parse import parse_qsl

from ripple.gateway import xml
from ripple.gateway.errors import S3Error
from ripple.gateway.request import S3Request
from ripple.metabase import (
    Object,
    ObjectLocation,
    Retention,
    RetentionMode,
    WriteCondition,
    check_write_condition,
    etag_matches,
)
from ripple.numbers import INT64_MAX

META_PREFIX = "x-amz-meta-"
STORED_HEADERS = (
    "cache-control",
    "content-disposition",
    "content-encoding",
    "content-language",
    "expires",
)
MAX_METADATA_BYTES = 2048  # S3's limit on user-defined metadata
MAX_SIZE = INT64_MAX  # a size any object could have


def from_wire(value: str, name: str) -> str:
    """A header value as the text its UTF-8 bytes spell. Starlette hands header bytes over
    decoded as Latin-1; bytes that are not UTF-8 are `InvalidArgument`."""
    if value.isascii():
        return value
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeDecodeError:
        raise S3Error(
            "InvalidArgument", f"the value of {name} is not UTF-8: send it as UTF-8"
        ) from None


def to_wire(value: str) -> str:
    """Stored text as a header value Starlette sends as its UTF-8 bytes (it encodes header
    values as Latin-1): what a client sent comes back byte for byte."""
    return value if value.isascii() else value.encode("utf-8").decode("latin-1")


def metadata_of(req: S3Request) -> dict[str, str]:
    """User metadata and stored system headers of a write request, as the UTF-8 text the
    client sent."""
    metadata: dict[str, str] = {}
    size = 0
    for name, raw in req.headers.items():
        if not (name.startswith(META_PREFIX) or name in STORED_HEADERS):
            continue
        value = from_wire(raw, name)
        if name.startswith(META_PREFIX):
            short = name[len(META_PREFIX) :]
            metadata[short] = value
            size += len(short) + len(value.encode())
        else:
            encoding = value
            tokens = [t.strip() for t in value.split(",")]
            # aws-chunked is transfer framing, not stored; the rest is kept as sent
            if name == "content-encoding" and "aws-chunked" in (t.lower() for t in tokens):
                encoding = ", ".join(t for t in tokens if t and t.lower() != "aws-chunked")
            if encoding:
                metadata[":" + name] = encoding
    if size > MAX_METADATA_BYTES:
        raise S3Error(
            "MetadataTooLarge",
            f"your metadata headers are {size} bytes; the limit is {MAX_METADATA_BYTES}",
        )
    return metadata


def tagging_of(req: S3Request) -> list[tuple[str, str]]:
    """The tags of `x-amz-tagging` (PutObject, CopyObject, CreateMultipartUpload): a
    URL-encoded query string, `k1=v1&k2=v2`; a tag without `=` has an empty value. The
    metabase checks them against S3's rules (`check_tags`)."""
    header = req.header("x-amz-tagging")
    if not header:
        return []
    try:
        return parse_qsl(header, keep_blank_values=True, errors="strict")
    except (ValueError, UnicodeDecodeError):
        raise S3Error(
            "InvalidArgument",
            "the header 'x-amz-tagging' shall be encoded as UTF-8 then URL-encoded URL query "
            "parameters without tag name duplicates",
        ) from None


def tagging_directive_of(req: S3Request) -> Literal["COPY", "REPLACE"]:
    """CopyObject's `x-amz-tagging-directive`: COPY (the default) or REPLACE."""
    directive = req.header("x-amz-tagging-directive") or "COPY"
    if directive not in ("COPY", "REPLACE"):
        raise S3Error(
            "InvalidArgument", f"unknown tagging directive {directive!r}: COPY or REPLACE"
        )
    return cast(Literal["COPY", "REPLACE"], directive)


def content_type_of(req: S3Request) -> str:
    return req.header("content-type") or "binary/octet-stream"


def lock_of(req: S3Request) -> tuple[Retention | None, bool]:
    """The object lock a write request asks for: retention and legal hold."""
    mode = req.header("x-amz-object-lock-mode")
    until = req.header("x-amz-object-lock-retain-until-date")
    hold = req.header("x-amz-object-lock-legal-hold")
    retention = None
    if bool(mode) != bool(until):
        raise S3Error(
            "InvalidArgument",
            "x-amz-object-lock-mode and x-amz-object-lock-retain-until-date must be given together",
        )
    if mode:
        retention = Retention(retention_mode(mode), parse_timestamp(until, "retain-until date"))
    if hold not in ("", "ON", "OFF"):
        raise S3Error("InvalidArgument", "x-amz-object-lock-legal-hold must be ON or OFF")
    return retention, hold == "ON"


def retention_mode(name: str) -> RetentionMode:
    if name not in ("GOVERNANCE", "COMPLIANCE"):
        raise S3Error(
            "InvalidArgument", f"unknown object lock mode {name!r}: GOVERNANCE or COMPLIANCE"
        )
    return RetentionMode[name]


def parse_timestamp(value: str, what: str) -> datetime:
    """An ISO 8601 time as S3 takes it (2026-11-21T10:00:00Z, with or without fraction)."""
    shown = value if len(value) <= 60 else value[:60] + "…"
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.astimezone(UTC)
    except ValueError:
        raise S3Error("InvalidArgument", f"{what} {shown!r} is not an ISO 8601 time") from None
    except OverflowError:  # 9999-12-31T23:59:59-01:00 is past the last time there is
        raise S3Error("InvalidArgument", f"{what} {shown!r} is out of range") from None


def condition_time(value: str, what: str) -> datetime:
    """A time a conditional request compares with a last-modified time: an HTTP date (what
    SDKs send, also in XML) or ISO 8601; anything else is `InvalidArgument`."""
    parsed = parse_http_date(value)
    return parsed if parsed is not None else parse_timestamp(value, what)


def parse_http_date(value: str) -> datetime | None:
    """An HTTP date in UTC; None for one that is not, or that its zone moves past the range
    of times there are (`Fri, 31 Dec 9999 23:59:59 -0100`)."""
    try:
        parsed = parsedate_to_datetime(value)
        return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except (TypeError, ValueError, OverflowError):
        return None


def http_date(when: datetime) -> str:
    return format_datetime(when.astimezone(UTC).replace(microsecond=0), usegmt=True)


def quoted(etag: str) -> str:
    return f'"{etag}"'


def version_headers(obj: Object) -> dict[str, str]:
    """`x-amz-version-id` for a version that has one (null versions of unversioned buckets
    answer without it)."""
    version_id = obj.version_id
    return {} if version_id == "null" else {"x-amz-version-id": version_id}


def object_headers(obj: Object) -> dict[str, str]:
    """What GET and HEAD answer about a version, apart from the body's length and range."""
    headers = {
        "etag": quoted(obj.etag),
        "last-modified": http_date(obj.created_at),
        "content-type": obj.content_type or "binary/octet-stream",
        "accept-ranges": "bytes",
        **version_headers(obj),
    }
    for name, value in obj.user_metadata.items():
        if name.startswith(":"):
            headers[name[1:]] = to_wire(value)
        else:
            headers[META_PREFIX + name] = to_wire(value)
    if obj.retention is not None:
        headers["x-amz-object-lock-mode"] = obj.retention.mode.name
        headers["x-amz-object-lock-retain-until-date"] = xml.timestamp(obj.retention.retain_until)
    if obj.legal_hold:
        headers["x-amz-object-lock-legal-hold"] = "ON"
    if obj.tags:
        headers["x-amz-tagging-count"] = str(len(obj.tags))
    return headers


def check_conditions(req: S3Request, obj: Object, *, prefix: str = "") -> int | None:
    """Evaluate If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since as S3 does:
    None to go on, 304 for not-modified (GET/HEAD); refusals raise PreconditionFailed.
    `prefix` reads the `x-amz-copy-source-if-*` variants instead."""
    if_match = req.header(f"{prefix}if-match")
    if_none_match = req.header(f"{prefix}if-none-match")
    modified_since = parse_http_date(req.header(f"{prefix}if-modified-since"))
    unmodified_since = parse_http_date(req.header(f"{prefix}if-unmodified-since"))
    last_modified = obj.created_at.replace(microsecond=0)
    failed = S3Error(
        "PreconditionFailed", "at least one of the preconditions you specified did not hold"
    )
    if if_match:
        if not etag_matches(if_match, obj.etag):
            raise failed
    elif unmodified_since is not None and last_modified > unmodified_since:
        raise failed
    if if_none_match:
        if etag_matches(if_none_match, obj.etag):
            if prefix:
                raise failed
            return 304
    elif modified_since is not None and last_modified <= modified_since:
        if prefix:
            raise failed
        return 304
    return None


async def write_condition(req: S3Request, loc: ObjectLocation) -> WriteCondition:
    """A conditional write's `If-Match` / `If-None-Match` on the object it writes, judged
    now, before the body is read (412 PreconditionFailed, or 404 NoSuchKey for an If-Match
    on no object); the commit judges it again (409 ConditionalRequestConflict)."""
    condition = WriteCondition(req.header("if-match"), req.header("if-none-match"))
    if condition:
        owner_only_conditions(req)
        await req.run(check_write_condition, req.db, loc, condition)
    return condition


def owner_only_conditions(req: S3Request) -> None:
    """Conditional writes and deletes are the bucket owner's: judging one for another
    project, or anyone, would tell a requester that may only write (or delete) whether a
    key exists and what it holds, an answer a read permission guards."""
    if req.cross_project:
        raise S3Error(
            "AccessDenied",
            f"only the owner of bucket {req.bucket!r} may send conditional writes or deletes",
            resource=req.resource,
        )
