"""Request bodies: read as they stream in, decoded and checked on the way.

- `aws-chunked` bodies (`STREAMING-…` payload hashes) go through `ChunkedDecoder`, which
  checks chunk signatures and returns trailing headers;
- a signed SHA-256 payload hash is recomputed and compared (`XAmzContentSHA256Mismatch`);
- `Content-MD5` is compared with the MD5 of what arrived (`InvalidDigest`, `BadDigest`);
- `x-amz-checksum-*` values, as headers or trailers, are recomputed (`BadDigest`); a body
  comes with at most one, as S3 requires.
Nothing is committed before all of these pass: the caller writes to a temporary file.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass, field

from ripple.gateway import threads
from ripple.gateway.checksums import CHECKSUM_PREFIX, NOT_CHECKSUMS, Checksums, header_of
from ripple.gateway.chunked import ChunkedDecoder
from ripple.gateway.errors import S3Error
from ripple.gateway.request import S3Request
from ripple.numbers import INT64_MAX, NumberError, whole_number

MAX_PUT_SIZE = 5 * 1024**3  # S3's limit for one PutObject or UploadPart
MAX_DECLARED = INT64_MAX  # a declared length beyond this is simply too large
BATCH_BYTES = 1024 * 1024  # body bytes hashed and written per worker-thread hop


@dataclass
class Received:
    size: int
    md5: bytes
    checksums: dict[str, str] = field(default_factory=dict)  # header name -> base64 value

    @property
    def etag(self) -> str:
        return self.md5.hex()


def _content_md5(req: S3Request) -> bytes | None:
    value = req.header("content-md5")
    if not value:
        return None
    try:
        digest = base64.b64decode(value, validate=True)
    except binascii.Error:
        digest = b""
    if len(digest) != 16:
        raise S3Error(
            "InvalidDigest", "the Content-MD5 you specified is not valid base64 of 16 bytes"
        )
    return digest


def _checksum_names(
    req: S3Request, *, body_checksums: bool = True
) -> tuple[dict[str, str], list[str]]:
    """Checksums sent as headers (name -> value) and those announced as trailers."""
    headers = {
        name: value
        for name, value in req.headers.items()
        if body_checksums and name.startswith(CHECKSUM_PREFIX) and name not in NOT_CHECKSUMS
    }
    trailers = [t.strip().lower() for t in req.header("x-amz-trailer").split(",") if t.strip()]
    for name in trailers:
        if not name.startswith(CHECKSUM_PREFIX):
            raise S3Error("InvalidRequest", f"unsupported trailer {name!r}: only x-amz-checksum-*")
    if len(headers) + len(trailers) > 1:
        raise S3Error(
            "InvalidRequest",
            "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.",
        )
    return headers, trailers


def _announced_length(raw: str, name: str, limit: int, malformed: str) -> int:
    """A body length a header announces (`Content-Length`, `x-amz-decoded-content-length`):
    text that is no number is `malformed` (an S3 error code), and more than `limit` is
    `EntityTooLarge` before anything is read, however many digits it has."""
    try:
        length = whole_number(raw, name, most=MAX_DECLARED)
    except NumberError as e:
        if not e.out_of_range:
            raise S3Error(malformed, f"{name} {raw[:40]!r} is not a number") from None
        length = MAX_DECLARED
    if length > limit:
        raise S3Error(
            "EntityTooLarge",
            f"your proposed upload of {length} bytes exceeds the maximum allowed size of {limit}",
        )
    return length


def require_length(req: S3Request) -> None:
    """An object's or part's body must say how long it is (`Content-Length`, or for an
    aws-chunked body `x-amz-decoded-content-length`): S3 answers `411 MissingContentLength`
    to a PUT without one, rather than storing an empty object."""
    headers = req.http.headers
    if "content-length" in headers or "x-amz-decoded-content-length" in headers:
        return
    raise S3Error("MissingContentLength", "you must provide the Content-Length HTTP header")


def require_digest(req: S3Request) -> None:
    """Refuse a request that carries neither Content-MD5 nor an x-amz-checksum-* value (as a
    header or announced trailer), which S3 requires of DeleteObjects and of the lifecycle,
    tagging and object lock puts. `receive` then checks whichever was sent."""
    headers = req.headers
    if headers.get("content-md5"):
        return
    if any(n.startswith(CHECKSUM_PREFIX) and n != "x-amz-checksum-type" for n in headers):
        return
    trailers = headers.get("x-amz-trailer", "").lower()
    if CHECKSUM_PREFIX in trailers:
        return
    raise S3Error(
        "InvalidRequest",
        "Missing required header for this request: Content-MD5 "
        "(or an x-amz-checksum-* header, as current AWS SDKs send)",
    )


async def receive(
    req: S3Request,
    sink: Callable[[bytes], None],
    *,
    limit: int = MAX_PUT_SIZE,
    body_checksums: bool = True,
    compute: str | None = None,
) -> Received:
    """Stream the request body into `sink`, then check every digest the client sent.

    `body_checksums=False`: the request's `x-amz-checksum-*` headers are about something
    else (CompleteMultipartUpload: the whole object), not this body. `compute`: an
    algorithm whose checksum the caller needs even when the client sent none ('SHA256');
    it is in `Received.checksums` either way."""
    if req.header("content-length"):
        _announced_length(req.header("content-length"), "Content-Length", limit, "BadRequest")
    expected_md5 = _content_md5(req)
    checksum_headers, trailer_names = _checksum_names(req, body_checksums=body_checksums)
    # checksums sent as headers; the chunked decoder checks those sent as trailers
    sums = Checksums(checksum_headers)
    extra = None
    if compute is not None and header_of(compute) not in [*checksum_headers, *trailer_names]:
        extra = Checksums([compute])
    md5 = hashlib.md5(usedforsecurity=False)
    payload_hash = req.signed.payload_hash if req.signed else req.header("x-amz-content-sha256")
    if trailer_names and not (
        payload_hash.startswith("STREAMING-") and payload_hash.endswith("-TRAILER")
    ):
        raise S3Error(
            "InvalidRequest",
            "x-amz-trailer announces trailing checksums, which only an aws-chunked body "
            "with a STREAMING-...-TRAILER payload carries; send the checksum as a header",
        )
    sha256 = hashlib.sha256() if _is_hex_sha256(payload_hash) else None
    decoder: ChunkedDecoder | None = None
    if payload_hash.startswith("STREAMING-"):
        decoded = req.header("x-amz-decoded-content-length")
        decoder = ChunkedDecoder(
            req.signed,
            decoded_length=(
                _announced_length(decoded, "x-amz-decoded-content-length", limit, "InvalidArgument")
                if decoded
                else None
            ),
            trailer_names=trailer_names,
        )
    size = 0

    def take(data: bytes) -> None:
        nonlocal size
        if not data:
            return
        size += len(data)
        if size > limit:
            raise S3Error(
                "EntityTooLarge", f"the upload exceeds the maximum allowed size of {limit}"
            )
        md5.update(data)
        sums.update(data)
        if extra is not None:
            extra.update(data)
        sink(data)

    def process(chunks: list[bytes]) -> None:
        for chunk in chunks:
            if sha256 is not None:
                sha256.update(chunk)
            take(decoder.feed(chunk) if decoder is not None else chunk)

    # Hashing and writing a large body happens on worker threads, a batch at a time (hashlib
    # releases the GIL), so the event loop keeps serving; a small body is done in place.
    batch: list[bytes] = []
    batched = 0
    async for chunk in req.http.stream():
        batch.append(chunk)
        batched += len(chunk)
        if batched >= BATCH_BYTES:
            await threads.run_data(process, batch)
            batch, batched = [], 0
    process(batch)
    trailers: dict[str, str] = decoder.finish() if decoder is not None else {}

    if sha256 is not None and not hmac.compare_digest(sha256.hexdigest(), payload_hash.lower()):
        raise S3Error(
            "XAmzContentSHA256Mismatch",
            "the provided x-amz-content-sha256 header does not match what was computed",
        )
    if expected_md5 is not None and expected_md5 != md5.digest():
        raise S3Error("BadDigest", "the Content-MD5 you specified did not match what we received")
    sums.verify(checksum_headers)
    computed = extra.digests() if extra is not None else {}
    return Received(size, md5.digest(), {**checksum_headers, **trailers, **computed})


def _is_hex_sha256(value: str) -> bool:
    return len(value) == 64 and all(c in "0123456789abcdefABCDEF" for c in value)


async def read_document(req: S3Request, limit: int, *, body_checksums: bool = True) -> bytes:
    """A small request body (an XML document), whole; over `limit` bytes is refused."""
    parts: list[bytes] = []
    try:
        await receive(req, parts.append, limit=limit, body_checksums=body_checksums)
    except S3Error as e:
        if e.code == "EntityTooLarge":
            raise S3Error(
                "MaxMessageLengthExceeded", f"your request was too big: {e.message}"
            ) from e
        raise
    return b"".join(parts)
