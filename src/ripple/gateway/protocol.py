"""The gateway's HTTP/1.1 connections: uvicorn's h11 protocol with S3's framing rules,
limits and timeouts, so that what a client can send never reaches the app as something
it cannot answer, and a client that stops sending a request never holds its connection.
(One that stops reading an answer is not timed out here: a large GET to a client that never
reads keeps its connection until the client goes.)

- A request's head must arrive within `header_timeout` of the connection opening or of the
  previous response; one that started and stalled is answered `400 RequestTimeout`, a
  connection that sent nothing is closed without a word. (Between requests uvicorn's
  keep-alive timeout, 5 s, still closes an idle connection first.)
- While the app waits for body bytes, `body_timeout` may pass between two of them; then the
  app answers `400 RequestTimeout` (its `receive` raises the `S3Error`) and the connection
  closes, as S3 does for an idle socket.
- A request head over `max_header_section` bytes in all (the request line and every header
  line), or with a header line over `max_header_field`, is `400
  RequestHeaderSectionTooLarge`; h11 buffers no more than the section limit of a head
  still arriving.
- `Content-Length` with `Transfer-Encoding` is `400 BadRequest` (RFC 9112 §6.1: the message
  is one a proxy may frame differently, so the connection cannot carry another), and a PUT
  with a chunked body but neither length (`Content-Length`,
  `x-amz-decoded-content-length`) is `411 MissingContentLength`, as S3 answers.
- Whatever h11 refuses (conflicting lengths, a bad header line, a malformed chunked body)
  is S3's error XML too, not uvicorn's plain text.

Every such answer carries `Connection: close`, and the connection is closed *lingering*:
after the answer the gateway shuts its sending side and reads and drops what the client
still sends (at most `linger_bytes`, for at most `linger_timeout`), so a client that sends
its whole request before reading gets the answer instead of a connection reset. A response
of the app that closes a connection whose request body is unread is closed the same way.

Refusals made here never reach the app: they are counted in its `ripple_s3_requests`
metric as operation `Unknown` and logged at INFO, one line each.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, cast

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle
from uvicorn.server import ServerState

from ripple.gateway.app import Metrics, error_response
from ripple.gateway.context import RequestContext
from ripple.gateway.errors import S3Error

log = logging.getLogger("ripple.gateway.http")

REQUEST_TIMEOUT = (
    "your socket connection to the server was not read from or written to within the "
    "timeout period; idle connections will be closed"
)


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


def protocol_class(limits: HttpLimits, metrics: Metrics | None = None) -> type[S3Protocol]:
    """The protocol class for `uvicorn.Config(http=…)` with these limits, counting its
    refusals in `metrics` (the app's)."""

    class Configured(S3Protocol):
        pass

    Configured.limits = limits
    Configured.metrics = metrics
    return Configured


@dataclass
class Refusal:
    """A request refused by the connection, and what is known of it."""

    error: S3Error
    in_body: bool  # found in the body of a request the app is answering
    method: str = "GET"
    resource: str = "/"


class S3Connection(h11.Connection):
    """h11's server connection, checking each request head against S3's rules. A refused
    request ends the events (`NEED_DATA`) and leaves its `Refusal` in `refusal`."""

    def __init__(self, limits: HttpLimits) -> None:
        # h11 keeps at most this much of a request head that is still arriving
        super().__init__(h11.SERVER, max_incomplete_event_size=limits.max_header_section)
        self.limits = limits
        self.refusal: Refusal | None = None

    def next_event(self) -> Any:
        in_body = self.their_state is h11.SEND_BODY
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as e:
            self.refusal = Refusal(_error_of(e, in_body, self.limits), in_body)
            return h11.NEED_DATA
        if type(event) is h11.Request:
            error = _check_head(event, self.limits)
            if error is not None:
                target = event.target.split(b"?", 1)[0][:1024].decode("latin-1")
                self.refusal = Refusal(error, False, event.method.decode("ascii"), target)
                return h11.NEED_DATA
        return event


def _error_of(error: h11.RemoteProtocolError, in_body: bool, limits: HttpLimits) -> S3Error:
    said = str(error)[:200]
    if in_body:
        return S3Error("BadRequest", f"the request body's chunked framing is malformed: {said}")
    if error.error_status_hint == 431:
        return _too_large(f"over {limits.max_header_section} bytes", limits.max_header_section)
    if error.error_status_hint == 501:
        return S3Error(
            "NotImplemented",
            f"a header you provided implies functionality that is not implemented: {said}",
            extra={"Header": "Transfer-Encoding"},
        )
    return S3Error("BadRequest", f"the HTTP request is malformed: {said}")


def _too_large(size: str, limit: int) -> S3Error:
    return S3Error(
        "RequestHeaderSectionTooLarge",
        f"your request header section exceeds the maximum allowed size: {size}",
        extra={"MaxSizeAllowed": str(limit)},
    )


def _check_head(event: h11.Request, limits: HttpLimits) -> S3Error | None:
    """The refusal a request head earns, or None. Sizes count names and values as sent,
    with 4 bytes for each line's separator and end."""
    if event.http_version not in (b"1.0", b"1.1"):  # e.g. HTTP/2's preface, PRI * HTTP/2.0
        version = event.http_version.decode("latin-1")[:10]
        return S3Error("BadRequest", f"HTTP/{version} is not served here: use HTTP/1.1")
    size = len(event.method) + len(event.target) + 12  # "GET / HTTP/1.1\r\n"
    chunked = length = decoded = False
    for name, value in event.headers:
        field = len(name) + len(value)
        if field > limits.max_header_field:
            shown = name[:100].decode("latin-1")
            return _too_large(f"the {shown} header is {field} bytes", limits.max_header_field)
        size += field + 4
        if name == b"transfer-encoding":
            chunked = True
        elif name == b"content-length":
            length = True
        elif name == b"x-amz-decoded-content-length":
            decoded = True
    if size > limits.max_header_section:
        return _too_large(f"{size} bytes", limits.max_header_section)
    if chunked and length:
        return S3Error(
            "BadRequest",
            "a request may not carry both Content-Length and Transfer-Encoding "
            "(RFC 9112 section 6.1)",
        )
    if chunked and not decoded and event.method == b"PUT":
        return S3Error("MissingContentLength", "you must provide the Content-Length HTTP header")
    return None


class _Transport:
    """The connection's transport as uvicorn's code sees it: closing it closes lingering
    when the client may still be sending, and nothing is written once that began."""

    def __init__(self, transport: asyncio.Transport, protocol: S3Protocol) -> None:
        self._transport = transport
        self._protocol = protocol

    def write(self, data: bytes) -> None:
        if not self._protocol.lingering:
            self._transport.write(data)

    def close(self) -> None:
        self._protocol.close()

    def is_closing(self) -> bool:
        return self._protocol.lingering or self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class S3Protocol(H11Protocol):
    """uvicorn's h11 protocol with S3's limits (`HttpLimits`); see the module's docstring.
    Use `protocol_class` to make one with given limits."""

    limits = HttpLimits()
    metrics: Metrics | None = None

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.conn: S3Connection = S3Connection(self.limits)
        self.app = self._with_body_timeout(self.app)
        self.lingering = False  # closing: the answer is sent, what arrives is dropped
        self.dropping = False  # what arrives is dropped (lingering, or a broken body)
        self._raw: asyncio.Transport | None = None
        self._head_timer: asyncio.TimerHandle | None = None
        self._linger_timer: asyncio.TimerHandle | None = None
        self._dropped = 0
        # a broken body, for the app's next read of that request's body
        self._broken: tuple[RequestResponseCycle, S3Error] | None = None

    # --- the connection ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._raw = transport
        self.transport = cast(asyncio.Transport, _Transport(transport, self))
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.dropping:
            self._dropped += len(data)
            if self.lingering and self._dropped > self.limits.linger_bytes:
                self._close_now()
            return
        super().data_received(data)

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle and self._head_timer is not None:
            self._head_timer.cancel()  # a request head arrived
            self._head_timer = None
        refusal = self.conn.refusal
        if refusal is not None:
            self.conn.refusal = None
            self._refused(refusal)

    def on_response_complete(self) -> None:
        self._arm_head_timer()  # before uvicorn reads a pipelined request's head
        super().on_response_complete()

    def shutdown(self) -> None:
        if self.dropping:
            self._close_now()
        else:
            super().shutdown()

    def close(self) -> None:
        """Close, lingering if the client may still be sending this request."""
        assert self._raw is not None
        if self.lingering or self._raw.is_closing():
            return
        if self.conn.their_state in (h11.SEND_BODY, h11.ERROR):
            self._linger()
        else:
            self._raw.close()

    # --- refusals ----------------------------------------------------------------------

    def _refused(self, refusal: Refusal) -> None:
        cycle = self.cycle
        if refusal.in_body and cycle is not None and not cycle.response_complete:
            self.dropping = True
            if cycle.response_started:
                self.close()  # too late to answer
            else:
                # the app answers it when it next reads the body, then closes
                self._broken = (cycle, refusal.error)
                cycle.keep_alive = False
                cycle.message_event.set()
            return
        if refusal.in_body:  # the body of a request already answered
            self.close()
        else:
            self._answer(refusal)

    def _answer(self, refusal: Refusal) -> None:
        """Answer a request the app never saw with S3's error XML, then close."""
        assert self._raw is not None
        error = refusal.error
        client = self.client[0] if self.client else ""
        context = RequestContext.new(client)
        log.info(
            "refused a request from %s (%s %s): %s: %s",
            client or "?",
            refusal.method,
            refusal.resource[:200],
            error.code,
            error.message,
        )
        response = error_response(error, context, refusal.resource, refusal.method, has_body=True)
        head = [b"HTTP/1.1 %d %s\r\n" % (response.status_code, _reason(response.status_code))]
        head += [b"%s: %s\r\n" % header for header in response.raw_headers]
        if not self._raw.is_closing():
            self._raw.write(b"".join(head) + b"\r\n" + response.body)
        if self.metrics is not None:
            self.metrics.requests.labels("Unknown", str(response.status_code)).inc()
        self._linger()

    def _linger(self) -> None:
        """Shut the sending side once the answer is out, read off and drop what the client
        still sends; close when it closes, or past the linger limits."""
        assert self._raw is not None
        self.lingering = self.dropping = True
        self._cancel_timers()
        self._unset_keepalive_if_required()
        if self._raw.is_closing():
            return
        try:
            if self._raw.can_write_eof():
                self._raw.write_eof()
        except OSError:  # the client is gone already (ENOTCONN): nothing to linger for
            self._raw.close()
            return
        self._raw.resume_reading()
        self._linger_timer = self.loop.call_later(self.limits.linger_timeout, self._close_now)

    def _close_now(self) -> None:
        if self._raw is not None:
            self._raw.close()

    # --- timeouts ----------------------------------------------------------------------

    def _arm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(self.limits.header_timeout, self._head_timeout)

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.dropping or self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request is being answered
        if self.conn.trailing_data[0]:  # a request head started, and stalled
            self._answer(Refusal(S3Error("RequestTimeout", REQUEST_TIMEOUT), False))
            return
        with contextlib.suppress(h11.LocalProtocolError):  # nothing was sent: close quietly
            self.conn.send(h11.ConnectionClosed())
        self._close_now()

    def _cancel_timers(self) -> None:
        for timer in (self._head_timer, self._linger_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._linger_timer = None

    def _with_body_timeout(self, app: Any) -> Any:
        """The ASGI app with a `receive` that raises `S3Error` RequestTimeout when the
        client sends no body byte for `body_timeout` while the app waits for one, and the
        broken-body error when the framing failed."""
        protocol = self
        timeout = self.limits.body_timeout

        async def guarded(scope: Any, receive: Any, send: Any) -> None:
            cycle = protocol.cycle

            async def timed_receive() -> Any:
                if protocol._broken is not None and protocol._broken[0] is cycle:
                    raise protocol._broken[1]
                if cycle.body or not cycle.more_body or cycle.disconnected:
                    return await receive()  # no wait for the client
                try:
                    async with asyncio.timeout(timeout):
                        message = await receive()
                except TimeoutError:
                    raise S3Error("RequestTimeout", REQUEST_TIMEOUT) from None
                if protocol._broken is not None and protocol._broken[0] is cycle:
                    raise protocol._broken[1]
                return message

            await app(scope, timed_receive, send)

        return guarded


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""
