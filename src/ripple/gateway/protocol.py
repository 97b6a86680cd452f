"""The gateway's HTTP/1.1 connections: uvicorn's httptools protocol (llhttp, with its strict
defaults) with S3's framing rules, limits and timeouts, so that what a client can send never
reaches the app as something it cannot answer, and a client that stops sending a request
never holds its connection. The rules and S3's errors are in `ripple.gateway.http_rules`,
the lingering close in `http_close`.

Here: a request head must arrive within `header_timeout`, and may not pass
`max_header_section` / `max_header_field` (counted as it arrives); `body_timeout` may pass
between two body bytes; framing that a proxy could read otherwise is refused; an upgrade is
served as plain HTTP/1.1. Every refusal is S3's error XML with `Connection: close`, closed
lingering, and never reaches the app: it is counted as operation `Unknown` and logged.

Each rule and its answer: docs/gateway.md, "Connections: limits and timeouts".
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from typing import Any, Literal

import httptools
from uvicorn.config import Config
from uvicorn.protocols.http.flow_control import service_unavailable
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import ServerState

from ripple.gateway.app import Metrics
from ripple.gateway.errors import S3Error
from ripple.gateway.http_close import Lingering
from ripple.gateway.http_rules import (
    REQUEST_TIMEOUT,
    HttpLimits,
    Refusal,
    answer,
    body_framing,
    check_head,
    error_of,
    too_large,
    unknown_method,
    with_body_timeout,
)

__all__ = ["HttpLimits", "S3Protocol", "protocol_class"]

log = logging.getLogger("ripple.gateway.http")

_HEAD_START = 1100  # bytes kept of a head's start: a method and a path S3 may answer


def protocol_class(limits: HttpLimits, metrics: Metrics | None = None) -> type[S3Protocol]:
    """The protocol class for `uvicorn.Config(http=…)` with these limits, counting its
    refusals in `metrics` (the app's)."""

    class Configured(S3Protocol):
        pass

    Configured.limits = limits
    Configured.metrics = metrics
    return Configured


class _Refused(Exception):
    """Raised by a parser callback to stop llhttp at a refusal (left in `_refusal`)."""


class S3Protocol(Lingering, HttpToolsProtocol):
    """uvicorn's httptools protocol with S3's limits (`HttpLimits`); see the module's
    docstring. Use `protocol_class` to make one with given limits."""

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
        # llhttp's strict defaults: uvicorn's parser is lenient to data after
        # `Connection: close`, which is refused here after the response (never answered)
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.init_lingering()
        self._head_timer: asyncio.TimerHandle | None = None
        # what the parser reads: a request's head (or the wait for one), or its body
        self._reading: Literal["head", "body"] = "head"
        self._heads = 0  # request heads read whole
        self._head_started = False  # bytes of the next request's head arrived
        self._head_bytes = 0  # bytes of reads that were all of one unfinished head
        self._head_start = b""  # its first bytes, if it began a read (for its method)
        self._begun = False  # a head began in this read
        self._fields = 0  # bytes of the header lines of the head, 4 a line for separators
        self._framing_bytes = 0  # bytes of body reads that brought no body (chunk lines)
        self._bodies = 0  # body pieces read
        self._failed = False  # the parser stopped at an error: the connection is done
        self._refusal: Refusal | None = None  # a callback's refusal (`_Refused`)
        self._deferred: Refusal | None = None  # a refusal behind requests being answered
        # an upgrade request's body framing, which llhttp skipped and is read on
        self._skipped_body: bytes | None = None
        self._synthetic = False  # the parser reads the head made for a skipped body
        # a broken body, for the app's next read of that request's body
        self._broken: tuple[RequestResponseCycle, S3Error] | None = None

    # --- the connection ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.transport = self.wrapped(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self.stop_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.dropped(data):
            return
        self._unset_keepalive_if_required()
        reading, heads, bodies = self._reading, self._heads, self._bodies
        if not self._head_started:  # a head starts at this read, or after a body in it
            self._head_start = data[:_HEAD_START] if reading == "head" else b""
        elif len(self._head_start) < _HEAD_START:
            self._head_start += data[: _HEAD_START - len(self._head_start)]
        self._begun = False
        self._feed(data)
        if self.dropping or self._reading != reading or self._heads != heads:
            return
        section = self.limits.max_header_section
        # the whole read went to one head, or to a body's framing (its chunk-size and
        # trailer lines), which llhttp holds until a line ends: bounded here
        if reading == "head":
            self._head_bytes += len(data)
            if self._head_bytes > section:
                self._failed = True
                self._refused(self._refusal_of(too_large(f"over {section} bytes", section)))
        elif self._bodies != bodies:
            self._framing_bytes = 0
        else:
            self._framing_bytes += len(data)
            if self._framing_bytes <= section:
                return
            error = f"a chunk or trailer line is over {section} bytes"
            self._failed = True
            self._refused(Refusal(error_of(error, True, ""), True))

    def _feed(self, data: bytes) -> None:
        while True:
            try:
                self.parser.feed_data(data)
                return
            except httptools.HttpParserUpgrade as upgrade:
                # llhttp stops after a head asking for another protocol (skipping its
                # body): served as HTTP/1.1, so what follows is read on as HTTP/1.1, the
                # skipped body after a head that frames it alike (`_synthetic`)
                data = data[upgrade.args[0] :]
                if self._skipped_body is not None:
                    data = b"PUT / HTTP/1.1\r\n%s\r\n\r\n%s" % (self._skipped_body, data)
                    self._skipped_body = None
                    self._synthetic = True
            except httptools.HttpParserError as error:
                self._failed = True
                self._refused(self._refusal_for(error))
                return

    def _should_upgrade(self) -> bool:
        return False  # no websockets here: an upgrade request is served as plain HTTP

    def on_response_complete(self) -> None:
        if not self.pipeline:
            self._arm_head_timer()  # before uvicorn reads the next request's head
        super().on_response_complete()
        refusal = self._deferred
        if refusal is not None and self.cycle.response_complete and not self.lingering:
            self._deferred = None  # the requests before it are answered
            self._answer(refusal)

    def shutdown(self) -> None:
        idle = self.cycle is None or self.cycle.response_complete
        if self.dropping:
            self.close_now()
        elif (
            idle
            and self.raw is not None
            and self.raw.get_extra_info("sslcontext")
            and not self.raw.get_write_buffer_size()
        ):
            # A TLS close waits for the client's goodbye, which an idle keep-alive client
            # never sends: the stop would wait out its graceful timeout. Nothing is in
            # flight or left to send, so the connection ends at once, as a plain one does.
            self.raw.abort()
        else:
            super().shutdown()

    def must_linger(self) -> bool:
        return self._failed or self._reading == "body"  # the client may still be sending

    # --- the parser's callbacks ----------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._synthetic:
            return
        super().on_message_begin()
        if self._begun:  # a second head in this read: where it starts is not known
            self._head_start = b""
        self._begun = self._head_started = True
        self._fields = 0

    def on_url(self, url: bytes) -> None:
        if self._synthetic:
            return
        self.url += url
        self._check_section()

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._synthetic or self._reading == "body":
            return  # a chunked body's trailer: dropped, as h11 did
        value = value.rstrip(b" \t")
        field = len(name) + len(value)
        if field > self.limits.max_header_field:
            shown = name[:100].lower().decode("latin-1")
            limit = self.limits.max_header_field
            self._refuse(too_large(f"the {shown} header is {field} bytes", limit))
        self._fields += field + 4
        self._check_section()
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self._synthetic:
            self._synthetic = False
            self._end_head()
            return
        method, version = self.parser.get_method(), self.parser.get_http_version()
        error = check_head(method, version, self.headers)
        if error is not None:
            self._refuse(error)
        self._end_head()
        if self.parser.should_upgrade():
            self._skipped_body = body_framing(self.headers)
        self.scope["method"] = method.decode("ascii")
        self.scope["http_version"] = version
        # the target as h11 took it: a path (or *, an authority, an absolute URL) and query
        raw_path, _, query = self.url.partition(b"?")
        path = urllib.parse.unquote(raw_path.decode("latin-1"))
        self.scope["path"] = self.root_path + path
        self.scope["raw_path"] = self.root_path.encode("ascii") + raw_path
        self.scope["query_string"] = query

        app = self.app
        if self.limit_concurrency is not None and (
            len(self.connections) >= self.limit_concurrency
            or len(self.tasks) >= self.limit_concurrency
        ):
            app = service_unavailable
            self.logger.warning("Exceeded concurrency limit.")

        existing = self.cycle
        self.cycle = RequestResponseCycle(
            scope=self.scope,
            transport=self.transport,
            flow=self.flow,
            logger=self.logger,
            access_logger=self.access_logger,
            access_log=self.access_log,
            default_headers=self.server_state.default_headers,
            message_event=asyncio.Event(),
            expect_100_continue=self.expect_100_continue,
            keep_alive=version != "1.0" and self.parser.should_keep_alive(),
            on_response=self.on_response_complete,
        )
        if existing is None or existing.response_complete:
            self._start_asgi_task(self.cycle, app)
        else:  # pipelined: answered after the requests before it
            self.flow.pause_reading()
            self.pipeline.appendleft((self.cycle, app))

    def on_body(self, body: bytes) -> None:
        self._bodies += 1
        super().on_body(body)

    def on_message_complete(self) -> None:
        if self._skipped_body is not None:
            return  # an upgrade request's body, which llhttp skipped: read next
        self._reading = "head"
        super().on_message_complete()

    def _end_head(self) -> None:
        self._heads += 1
        self._reading = "body"
        self._head_started = False
        self._head_bytes = self._framing_bytes = 0
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _check_section(self) -> None:
        size = len(self.parser.get_method()) + len(self.url) + 12 + self._fields
        if size > self.limits.max_header_section:  # "GET / HTTP/1.1\r\n" counted as 12
            self._refuse(too_large(f"{size} bytes", self.limits.max_header_section))

    # --- refusals ----------------------------------------------------------------------

    def _refuse(self, error: S3Error) -> None:
        """Stop the parser at this head, refused."""
        self._refusal = self._refusal_of(error)
        raise _Refused

    def _refusal_of(self, error: S3Error) -> Refusal:
        """A refusal of the request whose head is arriving, with what is known of it."""
        if not self._head_started or not self.url:
            return Refusal(error, False)
        method = self.parser.get_method().decode("latin-1")
        return Refusal(error, False, method, self.url.split(b"?", 1)[0][:1024].decode("latin-1"))

    def _refusal_for(self, error: httptools.HttpParserError) -> Refusal:
        refusal, self._refusal = self._refusal, None
        if refusal is not None:
            return refusal
        if isinstance(error, httptools.HttpParserCallbackError):  # a fault here, not the client's
            log.error("an HTTP parser callback failed", exc_info=error.__context__ or error)
            return self._refusal_of(S3Error("InternalError", "we encountered an internal error"))
        if self._reading == "body":
            return Refusal(error_of(str(error), True, ""), True)
        if isinstance(error, httptools.HttpParserInvalidMethodError):
            refusal = unknown_method(self._head_start)
            if refusal is not None:
                return refusal
        return self._refusal_of(error_of(str(error), False, self.parser.get_http_version()))

    def _refused(self, refusal: Refusal) -> None:
        self.dropping = True
        cycle = self.cycle
        if refusal.in_body:
            if cycle is None or cycle.response_complete:  # the body of an answered request
                self.close()
            elif cycle.response_started:
                self.close()  # too late to answer
            else:
                # the app answers it when it next reads the body, then closes
                self._broken = (cycle, refusal.error)
                cycle.keep_alive = False
                cycle.message_event.set()
        elif cycle is not None and not cycle.response_complete:
            self._deferred = refusal  # answered after the requests before it
        else:
            self._answer(refusal)

    def _answer(self, refusal: Refusal) -> None:
        """Answer a request the app never saw with S3's error XML, then close."""
        if self.raw is None:
            raise RuntimeError("a refusal to answer before the connection was made")
        error = refusal.error
        client = self.client[0] if self.client else ""
        log.info(
            "refused a request from %s (%s %s): %s: %s",
            client or "?",
            refusal.method,
            refusal.resource[:200],
            error.code,
            error.message,
        )
        status, data = answer(refusal, client)
        if not self.raw.is_closing():
            self.raw.write(data)
        if self.metrics is not None:
            self.metrics.requests.labels("Unknown", str(status)).inc()
        self.linger()

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
        if self._head_started:  # a request head started, and stalled
            self._answer(self._refusal_of(S3Error("RequestTimeout", REQUEST_TIMEOUT)))
        else:  # nothing was sent: close quietly
            self.close_now()

    def stop_timers(self) -> None:
        super().stop_timers()
        self._unset_keepalive_if_required()
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        timeout = self.limits.body_timeout
        super()._start_asgi_task(cycle, with_body_timeout(app, cycle, timeout, self._broken_body))

    def _broken_body(self, cycle: RequestResponseCycle) -> S3Error | None:
        broken = self._broken
        return broken[1] if broken is not None and broken[0] is cycle else None
