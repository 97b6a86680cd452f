"""What the gateway's HTTP/1.1 connections take and refuse (`ripple.gateway.protocol` applies
it): the limits of one connection, the rules a request head must pass beyond llhttp's own,
S3's error for each refusal (including llhttp's, whose reasons are its error messages), and
the bytes of the answer to a request the app never saw."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from ripple.gateway.app import error_response
from ripple.gateway.context import RequestContext
from ripple.gateway.errors import S3Error

REQUEST_TIMEOUT = (
    "your socket connection to the server was not read from or written to within the "
    "timeout period; idle connections will be closed"
)

MALFORMED = "the HTTP request is malformed"
NOT_IMPLEMENTED = "a header you provided implies functionality that is not implemented"

BOTH_LENGTHS = (
    "a request may not carry both Content-Length and Transfer-Encoding (RFC 9112 section 6.1)"
)

# llhttp's reasons for a head with both lengths (as it meets the second), and for a transfer
# coding it does not frame (chunked not last, or twice)
_LLHTTP_BOTH_LENGTHS = (
    "Transfer-Encoding can't be present with Content-Length",
    "Content-Length can't be present with Transfer-Encoding",
)
_LLHTTP_CODING = (
    "Invalid `Transfer-Encoding` header value",
    "Request has invalid `Transfer-Encoding`",
)
_LLHTTP_VERSION = ("Invalid HTTP version", "Pause on PRI/Upgrade")  # the latter: HTTP/2's preface


# a request line's method (any token) and path, as far as needed to answer an unknown method
_REQUEST_LINE = re.compile(rb"(?:\r\n)*([!#$%&'*+\-.^_`|~0-9A-Za-z]+) (/[!->@-~]*|\*)[ ?]")


@dataclass(frozen=True)
class HttpLimits:
    """What one connection may take. The defaults: S3's 20 s for an idle socket; twice S3's
    8 KiB for a whole request head (S3 counts the request line and query too), so no
    request S3 takes is refused, 8 KiB for one header line; and a lingering close long
    enough to read off a refused request of boto3's and aws-cli's default part size."""

    header_timeout: float = 20.0  # seconds to receive a whole request head
    body_timeout: float = 20.0  # seconds between two body reads while the app waits
    max_header_field: int = 8 * 1024  # one header line: name and value
    max_header_section: int = 16 * 1024  # the request line and all header lines
    linger_timeout: float = 5.0  # seconds to read off a refused request before closing
    linger_bytes: int = 8 * 1024 * 1024  # bytes read off it at most


@dataclass
class Refusal:
    """A request refused by the connection, and what is known of it."""

    error: S3Error
    in_body: bool  # found in the body of a request the app is answering
    method: str = "GET"
    resource: str = "/"


def too_large(size: str, limit: int) -> S3Error:
    return S3Error(
        "RequestHeaderSectionTooLarge",
        f"your request header section exceeds the maximum allowed size: {size}",
        extra={"MaxSizeAllowed": str(limit)},
    )


def not_served(version: str) -> S3Error:
    return S3Error("BadRequest", f"HTTP/{version[:10]} is not served here: use HTTP/1.1")


def error_of(reason: str, in_body: bool, version: str) -> S3Error:
    """S3's error for llhttp's refusal `reason` (its message), found in a request's body or
    its head; `version`: the head's HTTP version as far as llhttp read it."""
    said = reason[:200]
    if in_body:
        return S3Error("BadRequest", f"the request body's chunked framing is malformed: {said}")
    if reason in _LLHTTP_BOTH_LENGTHS:
        return S3Error("BadRequest", BOTH_LENGTHS)
    if reason in _LLHTTP_CODING:
        return S3Error(
            "NotImplemented", f"{NOT_IMPLEMENTED}: {said}", extra={"Header": "Transfer-Encoding"}
        )
    if reason in _LLHTTP_VERSION:
        return not_served(version)
    return S3Error("BadRequest", f"{MALFORMED}: {said}")


def unknown_method(head: bytes) -> Refusal | None:
    """S3's 405 for a request whose method llhttp does not know, from the start of its
    `head`, when that is a well-formed request line (h11 took any method; the app answered
    405 MethodNotAllowed, as S3 does); None if it is not."""
    match = _REQUEST_LINE.match(head)
    if match is None:
        return None
    method, path = match[1].decode("ascii")[:20], match[2].decode("ascii")
    names = path.strip("/").split("/", 1)
    level = "SERVICE" if not names[0] else "BUCKET" if len(names) == 1 else "OBJECT"
    error = S3Error(
        "MethodNotAllowed",
        f"the specified method is not allowed against this resource: {method}",
        extra={"Method": method, "ResourceType": level},
    )
    return Refusal(error, False, method, path[:1024])


def check_head(method: bytes, version: str, headers: list[tuple[bytes, bytes]]) -> S3Error | None:
    """The refusal a whole request head earns beyond llhttp's own checks and the size limits
    (counted as it arrives), or None. `headers`: names lowercased."""
    if version not in ("1.0", "1.1"):  # llhttp reads HTTP/0.9 and HTTP/2.0 heads too
        return not_served(version)
    hosts = codings = 0
    chunked = length = decoded = False
    for name, value in headers:
        if name == b"host":
            hosts += 1
        elif name == b"transfer-encoding":
            codings += 1
            chunked = value.strip(b" \t").lower() == b"chunked"
        elif name == b"content-length":
            length = True
        elif name == b"x-amz-decoded-content-length":
            decoded = True
    if hosts > 1:
        return S3Error("BadRequest", f"{MALFORMED}: Found multiple Host: headers")
    if hosts == 0 and version == "1.1":
        return S3Error("BadRequest", f"{MALFORMED}: Missing mandatory Host: header")
    if codings > 1:
        return S3Error(
            "NotImplemented",
            f"{NOT_IMPLEMENTED}: multiple Transfer-Encoding headers",
            extra={"Header": "Transfer-Encoding"},
        )
    if codings and not chunked:
        return S3Error(
            "NotImplemented",
            f"{NOT_IMPLEMENTED}: Only Transfer-Encoding: chunked is supported",
            extra={"Header": "Transfer-Encoding"},
        )
    if chunked and length:  # llhttp refuses it first; kept as the rule it is
        return S3Error("BadRequest", BOTH_LENGTHS)
    if chunked and not decoded and method == b"PUT":
        return S3Error("MissingContentLength", "you must provide the Content-Length HTTP header")
    return None


def body_framing(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The header that frames a request's body, None if it has none."""
    for name, value in headers:
        if name == b"transfer-encoding":
            return b"Transfer-Encoding: chunked"
        if name == b"content-length" and value.strip(b"0"):
            return b"Content-Length: " + value
    return None


def with_body_timeout(
    app: Any,
    cycle: RequestResponseCycle,
    timeout: float,
    broken: Callable[[RequestResponseCycle], S3Error | None],
) -> Any:
    """The ASGI app, for the request of `cycle`, with a `receive` that raises `S3Error`
    RequestTimeout when the client sends no body byte for `timeout` while the app waits for
    one, and the request's `broken` error when its body's framing failed."""

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        async def timed_receive() -> Any:
            if (error := broken(cycle)) is not None:
                raise error
            if cycle.body or not cycle.more_body or cycle.disconnected:
                return await receive()  # no wait for the client
            try:
                async with asyncio.timeout(timeout):
                    message = await receive()
            except TimeoutError:
                raise S3Error("RequestTimeout", REQUEST_TIMEOUT) from None
            if (error := broken(cycle)) is not None:
                raise error
            return message

        await app(scope, timed_receive, send)

    return guarded


def answer(refusal: Refusal, client: str) -> tuple[int, bytes]:
    """The status and the bytes of S3's answer to a refused request, `Connection: close`."""
    context = RequestContext.new(client)
    response = error_response(
        refusal.error, context, refusal.resource, refusal.method, has_body=True
    )
    status = response.status_code
    head = [b"HTTP/1.1 %d %s\r\n" % (status, _reason(status))]
    head += [b"%s: %s\r\n" % header for header in response.raw_headers]
    return status, b"".join(head) + b"\r\n" + response.body


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""
