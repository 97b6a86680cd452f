"""The AMQP 0.9.1 (RabbitMQ) target: each delivery is one message published to one exchange.

Not one round trip per message: the target owns `amqp-connections` pika `SelectConnection`s
on one I/O loop in a thread of its own, from `open()` to `close()`; `publish` splits a batch
among them by a hash of bucket and key (so one object's events keep one connection and their
order), and each connection publishes back to back, at most `max-in-flight` unconfirmed,
settling messages as `Basic.Ack` / `Basic.Nack` / `Basic.Return` frames arrive. ripple never
declares exchanges, queues or bindings. Every failure is `retry`, a destination the guard
(`ripple.targets.guard`) refuses is `permanent`; delivery is at least once.

Message, ack levels, arguments, outcomes and the publishing design: docs/targets.md,
"AMQP 0.9.1 / RabbitMQ".
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, get_args

import pika
from pika import frame as pika_frame
from pika import spec
from pika.adapters.select_connection import IOLoop, SelectConnection
from pika.channel import Channel
from pika.exceptions import (
    AMQPConnectionError,
    ChannelClosed,
    ChannelClosedByBroker,
    ConnectionClosed,
    ProbableAccessDeniedError,
    ProbableAuthenticationError,
)

from ripple.notifications.arguments import choice, flag, positive, whole
from ripple.notifications.endpoints import Endpoint, parse_endpoint
from ripple.targets.base import OK, Delivery, Outcome, Result, one_line
from ripple.targets.guard import DestinationRefused, default_guard

__all__ = ["AckLevel", "AmqpTarget", "from_arguments"]

log = logging.getLogger(__name__)

AckLevel = Literal["none", "broker", "routable"]
ACK_LEVELS: tuple[str, ...] = get_args(AckLevel)
CONTENT_TYPE = "application/json"
_FLUSH_POLL_S = 0.001  # ack level none: how often to look whether the socket took the data
_CLOSE_WAIT_S = 5.0  # close(): how long the I/O thread may take to close the connection
MAX_CONNECTIONS = 16


class _Batch:
    """One `publish` call: its deliveries and, as they are settled, their results."""

    __slots__ = ("deliveries", "done", "lock", "progress", "remaining", "results", "settled")

    def __init__(self, deliveries: Sequence[Delivery]) -> None:
        self.deliveries = deliveries
        self.results: list[Result | None] = [None] * len(deliveries)
        self.remaining = len(deliveries)
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.progress = time.monotonic()  # last time the batch moved on (time-out clock)
        self.settled = False  # answered: later confirms change nothing
        if not deliveries:
            self.done.set()

    def settle(self, answers: Sequence[tuple[int, Result]]) -> None:
        with self.lock:
            if self.settled:
                return
            results = self.results
            for index, result in answers:
                if results[index] is None:
                    results[index] = result
                    self.remaining -= 1
            self.progress = time.monotonic()
            if self.remaining <= 0:
                self.settled = True
                self.done.set()

    def touch(self) -> None:
        self.progress = time.monotonic()

    def give_up(self, error: str) -> list[Result]:
        """Answer `retry` with `error` for every delivery not yet settled; the results."""
        with self.lock:
            failed = Result(Outcome.RETRY, error)
            self.results = [failed if r is None else r for r in self.results]
            self.remaining = 0
            self.settled = True
            self.done.set()
            return [r for r in self.results if r is not None]


_Entry = tuple[_Batch, int]  # a delivery of a batch: the batch and its index there


class AmqpTarget:
    """Publishes deliveries to one exchange of one broker; see the module docstring."""

    def __init__(
        self,
        endpoint: Endpoint | str,
        exchange: str,
        *,
        name: str,
        ack_level: AckLevel = "broker",
        verify_ssl: bool = True,
        timeout_s: float = 10.0,
        max_in_flight: int = 5000,
        connections: int = 1,
        routing_key: str | None = None,
    ) -> None:
        if isinstance(endpoint, str):
            endpoint = parse_endpoint(endpoint)
        if endpoint.kind != "amqp":
            raise ValueError(f"endpoint {endpoint.redacted!r} is not amqp:// or amqps://")
        if not exchange:
            raise ValueError("the exchange must be named (the default exchange is not used)")
        if ack_level not in ACK_LEVELS:
            raise ValueError(f"ack level must be one of {', '.join(ACK_LEVELS)}, not {ack_level!r}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be a positive number of seconds, not {timeout_s}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, not {max_in_flight}")
        if not 1 <= connections <= MAX_CONNECTIONS:
            raise ValueError(f"connections must be 1 to {MAX_CONNECTIONS}, not {connections}")
        if not name:
            raise ValueError("the target needs a name: it names its retry queue and metrics")
        self.name = name
        self.routing_key = routing_key or name
        self.endpoint = endpoint
        self.exchange = exchange
        self.ack_level: AckLevel = ack_level
        self.verify_ssl = verify_ssl
        self.timeout_s = timeout_s
        self.max_in_flight = max_in_flight
        self.connections = connections
        self._confirms = ack_level != "none"
        self._mandatory = ack_level == "routable"
        self._where = f"{endpoint.redacted} exchange {exchange!r}"
        self._loop: _Loop | None = None
        self._open_lock = threading.Lock()

    def open(self) -> None:
        with self._open_lock:
            if self._loop is None:
                self._loop = _Loop(self)
                self._loop.start()

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]:
        loop = self._loop
        if loop is None:
            raise RuntimeError(f"AMQP target {self.name!r} is not open: call open() first")
        if not deliveries:
            return []
        publishers = loop.publishers
        if len(publishers) == 1:
            return self._settled(publishers[0], _Batch(deliveries), submit=True)
        shares: list[list[int]] = [[] for _ in publishers]
        for index, delivery in enumerate(deliveries):
            shares[_object_hash(delivery) % len(publishers)].append(index)
        batches = []
        for io, share in zip(publishers, shares, strict=True):
            if share:
                batch = _Batch([deliveries[i] for i in share])
                io.submit(batch)
                batches.append((io, share, batch))
        results: list[Result] = [OK] * len(deliveries)
        for io, share, batch in batches:  # each has its own time-out clock
            for index, result in zip(share, self._settled(io, batch), strict=True):
                results[index] = result
        return results

    def _settled(self, io: _Publisher, batch: _Batch, *, submit: bool = False) -> list[Result]:
        """Wait until `batch` is answered, or has made no progress for `timeout_s`."""
        if submit:
            io.submit(batch)
        while not batch.done.wait(max(0.0, batch.progress + self.timeout_s - time.monotonic())):
            if time.monotonic() - batch.progress >= self.timeout_s:
                results = batch.give_up(io.stalled_error())
                io.abandon(batch)
                return results
        return [r if r is not None else OK for r in batch.results]  # all set once done

    def close(self) -> None:
        with self._open_lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            loop.stop()

    def connection_parameters(
        self, number: int = 0, address: str | None = None
    ) -> pika.ConnectionParameters:
        """How connection `number` connects (to `address`, default the endpoint's host):
        bounded waits, TLS for amqps:// (which verifies the endpoint's host name)."""
        ep = self.endpoint
        ssl_options = None
        if ep.tls:
            context = ssl.create_default_context()
            if not self.verify_ssl:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            ssl_options = pika.SSLOptions(context, server_hostname=ep.host)
        return pika.ConnectionParameters(
            host=address or ep.host,
            port=ep.port,
            virtual_host=ep.path or "/",
            credentials=pika.PlainCredentials(ep.username or "guest", ep.password or "guest"),
            ssl_options=ssl_options,
            connection_attempts=1,
            socket_timeout=self.timeout_s,
            stack_timeout=self.timeout_s,
            blocked_connection_timeout=self.timeout_s,
            client_properties={"connection_name": f"ripple {self.name} #{number}"},
        )


class _Loop:
    """The target's I/O thread: one pika I/O loop that runs all of its connections (two
    connections on one thread confirm faster than two threads contending for the GIL)."""

    def __init__(self, target: AmqpTarget) -> None:
        self.t = target
        self.ioloop = IOLoop()
        self.publishers = [_Publisher(target, n, self) for n in range(target.connections)]
        self.thread = threading.Thread(target=self._run, name=f"amqp-{target.name}", daemon=True)
        self.stopping = False

    def start(self) -> None:
        self.thread.start()
        for publisher in self.publishers:  # connect now, not on the first batch
            self.ioloop.add_callback_threadsafe(publisher._ensure)

    def stop(self) -> None:
        self.ioloop.add_callback_threadsafe(self._shutdown)
        self.thread.join(self.t.timeout_s + _CLOSE_WAIT_S)
        if self.thread.is_alive():
            log.warning("AMQP target %s: the I/O thread did not stop", self.t.name)
            return
        self.ioloop.close()

    def _run(self) -> None:
        while True:
            try:
                self.ioloop.start()
            except Exception as e:  # a bug in a callback: answer what is in flight, go on
                log.exception("AMQP target %s: error in the I/O loop", self.t.name)
                for publisher in self.publishers:
                    publisher._drop_connection(f"internal error: {one_line(e)}")
                    publisher._fail_all(f"internal error: {one_line(e)}")
            if self.stopping:
                return

    def _shutdown(self) -> None:
        self.stopping = True
        for publisher in self.publishers:
            publisher._shutdown()
        self.ioloop.call_later(_CLOSE_WAIT_S, self.ioloop.stop)  # in case one never closes
        self.closed()

    def closed(self) -> None:
        """When stopping: end the loop once every connection is closed."""
        if self.stopping and all(p.conn is None or p.conn.is_closed for p in self.publishers):
            self.ioloop.stop()


class _Publisher:
    """One connection of the target, its channel, and the deliveries waiting to be
    published or confirmed on it. Everything but `submit`, `abandon` and `stalled_error`
    runs on the loop's thread."""

    def __init__(self, target: AmqpTarget, number: int, loop: _Loop) -> None:
        self.t = target
        self.number = number
        self.loop = loop
        self.ioloop = loop.ioloop
        self.stopping = False
        self.conn: SelectConnection | None = None
        self.channel: Channel | None = None
        self.ready = False  # the channel is open, the exchange exists, confirms are on
        self.error: str | None = None  # why the last connection or channel failed
        self.blocked: str | None = None  # the broker blocked publishing (resource alarm)
        self.waiting: deque[_Entry] = deque()  # to publish, in order
        self.unconfirmed: dict[int, _Entry] = {}  # delivery tag -> delivery
        self.next_tag = 1  # the tag the broker gives the next message on this channel
        self.low = 1  # no unconfirmed tag is below this
        self.returned: dict[int, str] = {}  # tag -> why it was returned (routable)
        self.tags_by_id: dict[str, deque[int]] = {}  # message id -> unconfirmed tags (routable)
        self.flushing = False  # ack level none: a flush check is scheduled

    # called from other threads -------------------------------------------------------------

    def submit(self, batch: _Batch) -> None:
        self.ioloop.add_callback_threadsafe(lambda: self._submit(batch))

    def abandon(self, batch: _Batch) -> None:
        """`batch` timed out (and is answered): forget it and start on a new connection."""
        self.ioloop.add_callback_threadsafe(lambda: self._abandon(batch))

    def stalled_error(self) -> str:
        if self.blocked is not None:
            return f"the broker blocks publishing ({self.blocked}) at {self.t._where}"
        if not self.ready:
            return self.error or (f"no channel to {self.t._where} within {self.t.timeout_s:g}s")
        return f"not confirmed by the broker within {self.t.timeout_s:g}s: {self.t._where}"

    # the I/O thread --------------------------------------------------------------------------

    def _submit(self, batch: _Batch) -> None:
        if self.stopping:
            batch.give_up(f"the AMQP target {self.t.name!r} is closing")
            return
        batch.touch()
        self.waiting.extend((batch, i) for i in range(len(batch.deliveries)))
        self._ensure()

    def _ensure(self) -> None:
        """Move on: connect, open the channel, or publish, as the state allows."""
        if self.stopping:
            return
        conn = self.conn
        if conn is None:
            self._connect()
        elif conn.is_open and self.channel is None:
            self.channel = conn.channel(on_open_callback=self._on_channel_open)
        elif self.ready:
            self._pump()

    def _connect(self) -> None:
        ep = self.t.endpoint
        try:
            # pika would resolve the name again: connect to the address the guard checked
            address = default_guard().check_address(ep.host, ep.port)[0]
            params = self.t.connection_parameters(self.number, address)
        except DestinationRefused as e:
            self.error = one_line(e)
            log.warning("AMQP target %s: %s", self.t.name, self.error)
            self._fail_waiting(self.error, Outcome.PERMANENT)
            return
        except Exception as e:  # e.g. an unreadable TLS set-up, a name that does not resolve
            self._fail_waiting(f"cannot connect to {ep.redacted}: {one_line(e)}")
            return
        self.conn = SelectConnection(
            params,
            on_open_callback=self._on_connection_open,
            on_open_error_callback=self._on_connection_error,
            on_close_callback=self._on_connection_closed,
            custom_ioloop=self.ioloop,
        )

    def _on_connection_open(self, conn: SelectConnection) -> None:
        if conn is not self.conn:
            return
        self.error = None
        conn.add_on_connection_blocked_callback(self._on_blocked)
        conn.add_on_connection_unblocked_callback(self._on_unblocked)
        if self.stopping:
            conn.close()
            return
        self.channel = conn.channel(on_open_callback=self._on_channel_open)

    def _on_connection_error(self, conn: SelectConnection, error: BaseException) -> None:
        if conn is not self.conn:
            return
        self.conn = None
        self.error = self._connect_error(error)
        log.warning("AMQP target %s: %s", self.t.name, self.error)
        self._fail_all(self.error)
        if self.stopping:
            self.loop.closed()

    def _on_connection_closed(self, conn: SelectConnection, error: BaseException) -> None:
        if conn is not self.conn:
            return
        self.conn = None
        self.channel = None
        self.ready = False
        self.blocked = None
        if self.stopping:
            self._fail_all(f"the AMQP target {self.t.name!r} is closing")
            self.loop.closed()
            return
        self.error = f"connection to {self.t.endpoint.redacted} lost: {_reason(error)}"
        if self.unconfirmed or self.waiting:
            log.warning("AMQP target %s: %s", self.t.name, self.error)
        self._fail_all(self.error)

    def _on_blocked(
        self, conn: SelectConnection, method: pika_frame.Method[spec.Connection.Blocked]
    ) -> None:
        if conn is not self.conn:
            return
        self.blocked = getattr(method.method, "reason", None) or "a resource alarm"
        log.warning("AMQP target %s: the broker blocks publishing: %s", self.t.name, self.blocked)

    def _on_unblocked(self, conn: SelectConnection, _method: object) -> None:
        if conn is self.conn:
            self.blocked = None

    def _on_channel_open(self, channel: Channel) -> None:
        if channel is not self.channel:
            return
        # Every callback names its channel: one of a dropped connection changes nothing.
        channel.add_on_close_callback(self._on_channel_closed)
        if self.t._mandatory:
            channel.add_on_return_callback(
                lambda ch, method, properties, _body: self._on_return(ch, method, properties)
            )
        # passive: only checks that the exchange exists (and needs no permission)
        channel.exchange_declare(
            self.t.exchange, passive=True, callback=lambda _f: self._on_exchange_ok(channel)
        )

    def _on_exchange_ok(self, channel: Channel) -> None:
        if channel is not self.channel:
            return
        if self.t._confirms:
            channel.confirm_delivery(
                lambda f: self._on_confirm(channel, f),
                callback=lambda _f: self._on_channel_ready(channel),
            )
        else:
            self._on_channel_ready(channel)

    def _on_channel_ready(self, channel: Channel) -> None:
        if channel is not self.channel:
            return
        self.ready = True
        self.error = None
        self.next_tag = self.low = 1
        self._pump()

    def _on_channel_closed(self, channel: Channel, error: Exception) -> None:
        if channel is not self.channel:
            return
        self.channel = None
        self.ready = False
        if self.stopping:
            return
        if not isinstance(error, ChannelClosedByBroker):
            conn = self.conn
            if conn is None or not conn.is_open:
                return  # the connection is going: _on_connection_closed answers
            self.error = f"the channel at {self.t._where} closed: {_reason(error)}"
        elif error.reply_code == 404:
            self.error = (
                f"exchange {self.t.exchange!r} does not exist in vhost "
                f"{self.t.endpoint.path!r} at {self.t.endpoint.redacted} (ripple does not "
                f"declare exchanges: create it and bind queues to it): {_reason(error)}"
            )
        elif error.reply_code == 403:
            self.error = f"the broker refused access at {self.t._where}: {_reason(error)}"
        else:
            self.error = f"the broker closed the channel at {self.t._where}: {_reason(error)}"
        log.warning("AMQP target %s: %s", self.t.name, self.error)
        self._fail_all(self.error)

    def _pump(self) -> None:
        """Publish waiting deliveries while fewer than `max-in-flight` are unconfirmed."""
        channel = self.channel
        if channel is None or not self.ready:
            return
        t = self.t
        exchange, routing_key, mandatory = t.exchange, t.routing_key, t._mandatory
        window = t.max_in_flight
        waiting, unconfirmed = self.waiting, self.unconfirmed
        by_id = self.tags_by_id if mandatory else None
        touched: set[_Batch] = set()
        while waiting and len(unconfirmed) < window:
            batch, index = entry = waiting.popleft()
            if batch.settled:
                continue
            delivery = batch.deliveries[index]
            properties = pika.BasicProperties(
                content_type=CONTENT_TYPE,
                delivery_mode=2,
                message_id=delivery.event_id,
                headers=dict(delivery.attributes),
            )
            try:
                channel.basic_publish(exchange, routing_key, delivery.body, properties, mandatory)
            except Exception as e:
                if channel.is_open and self.conn is not None and self.conn.is_open:
                    # this message cannot be encoded: no later attempt would do better
                    batch.settle([(index, Result(Outcome.PERMANENT, f"cannot publish: {e}"))])
                    continue
                waiting.appendleft(entry)  # the channel or connection is closing
                self.ready = False
                return
            tag = self.next_tag
            self.next_tag = tag + 1
            unconfirmed[tag] = entry
            if by_id is not None:
                by_id.setdefault(delivery.event_id, deque()).append(tag)
            touched.add(batch)
        for batch in touched:
            batch.touch()
        if not t._confirms and unconfirmed and not self.flushing:
            self.flushing = True
            self.ioloop.call_later(_FLUSH_POLL_S, self._check_flushed)

    def _check_flushed(self) -> None:
        """Ack level none: what the socket has taken is delivered."""
        self.flushing = False
        conn = self.conn
        if conn is None or not conn.is_open or not self.unconfirmed:
            return
        if _write_buffer_size(conn) > 0:
            self.flushing = True
            self.ioloop.call_later(_FLUSH_POLL_S, self._check_flushed)
            return
        sent = list(self.unconfirmed.values())
        self.unconfirmed.clear()
        self.low = self.next_tag
        _settle(sent, OK)
        self._pump()

    def _on_confirm(
        self, channel: Channel, method_frame: pika_frame.Method[spec.Basic.Ack | spec.Basic.Nack]
    ) -> None:
        if channel is not self.channel:
            return
        method = method_frame.method
        tag = method.delivery_tag
        unconfirmed = self.unconfirmed
        tags: range | tuple[int, ...] = range(self.low, tag + 1) if method.multiple else (tag,)
        acked = isinstance(method, spec.Basic.Ack)
        nacked = Result(
            Outcome.RETRY, f"the broker refused the message (basic.nack) at {self.t._where}"
        )
        settled: list[tuple[_Entry, Result]] = []
        mandatory = self.t._mandatory
        for t in tags:
            entry = unconfirmed.pop(t, None)
            if entry is None:
                continue
            result = OK if acked else nacked
            if mandatory:
                self._forget_id(entry, t)
                why = self.returned.pop(t, None)
                if why is not None and acked:
                    result = Result(Outcome.RETRY, why)
            settled.append((entry, result))
        if method.multiple:
            self.low = max(self.low, tag + 1)
        while self.low < self.next_tag and self.low not in unconfirmed:
            self.low += 1
        _settle_each(settled)
        self._pump()

    def _on_return(
        self, channel: Channel, method: spec.Basic.Return, properties: spec.BasicProperties
    ) -> None:
        """An unroutable message (routable): the earliest unconfirmed one with its id."""
        if channel is not self.channel:
            return
        message_id = properties.message_id or ""
        for tag in self.tags_by_id.get(message_id, ()):
            if tag not in self.returned:
                self.returned[tag] = (
                    f"no queue bound to exchange {self.t.exchange!r} with routing key "
                    f"{self.t.routing_key!r}: the broker returned the message "
                    f"({method.reply_code} {method.reply_text})"
                )
                return

    def _forget_id(self, entry: _Entry, tag: int) -> None:
        batch, index = entry
        message_id = batch.deliveries[index].event_id
        tags = self.tags_by_id.get(message_id)
        if tags is None:
            return
        if tags and tags[0] == tag:
            tags.popleft()
        elif tag in tags:
            tags.remove(tag)
        if not tags:
            del self.tags_by_id[message_id]

    def _abandon(self, batch: _Batch) -> None:
        self.waiting = deque(e for e in self.waiting if e[0] is not batch)
        if any(e[0] is batch for e in self.unconfirmed.values()):
            # Its confirms may still come, or never: leave that connection to close in the
            # background (its callbacks are ignored from now on) and start a fresh one.
            self._drop_connection(
                f"not confirmed by the broker within {self.t.timeout_s:g}s: {self.t._where}"
            )
            self._ensure()

    def _drop_connection(self, error: str) -> None:
        """Forget the connection: what it has unconfirmed is answered `retry` with `error`;
        what waits is published on the next connection."""
        conn, self.conn = self.conn, None
        self.channel = None
        self.ready = False
        self.blocked = None
        failed = list(self.unconfirmed.values())
        self.unconfirmed.clear()
        self.returned.clear()
        self.tags_by_id.clear()
        _settle(failed, Result(Outcome.RETRY, error))
        if conn is not None and not (conn.is_closing or conn.is_closed):
            conn.close(reply_text="ripple: not confirmed in time")

    def _shutdown(self) -> None:
        self.stopping = True
        self._fail_waiting(f"the AMQP target {self.t.name!r} is closing")
        conn = self.conn
        if conn is not None and not (conn.is_closed or conn.is_closing):
            conn.close()

    def _fail_waiting(self, error: str, outcome: Outcome = Outcome.RETRY) -> None:
        waiting, self.waiting = list(self.waiting), deque()
        _settle(waiting, Result(outcome, error))

    def _fail_all(self, error: str) -> None:
        failed = list(self.unconfirmed.values())
        self.unconfirmed.clear()
        self.returned.clear()
        self.tags_by_id.clear()
        self.ready = False
        _settle(failed, Result(Outcome.RETRY, error))
        self._fail_waiting(error)

    def _connect_error(self, error: BaseException) -> str:
        ep = self.t.endpoint
        where = ep.redacted
        if isinstance(error, ProbableAuthenticationError):
            return f"authentication failed for user {ep.username!r} at {where}: {_reason(error)}"
        if isinstance(error, ProbableAccessDeniedError):
            return (
                f"access to vhost {ep.path!r} refused for user {ep.username!r} at {where}: "
                f"{_reason(error)}"
            )
        text = repr(error) if isinstance(error, AMQPConnectionError) else str(error)
        if "ConnectionRefusedError" in text or "Connection refused" in text:
            return f"connection refused: {where}"
        if "timeout" in text.lower() or "timed out" in text.lower():
            return f"timed out connecting to {where} after {self.t.timeout_s:g}s"
        return f"cannot connect to {where}: {one_line(_reason(error))}"


def _settle(entries: Sequence[_Entry], result: Result) -> None:
    _settle_each([(e, result) for e in entries])


def _settle_each(settled: Sequence[tuple[_Entry, Result]]) -> None:
    """Give each batch its answers, one call per batch."""
    by_batch: dict[_Batch, list[tuple[int, Result]]] = {}
    for (batch, index), result in settled:
        by_batch.setdefault(batch, []).append((index, result))
    for batch, answers in by_batch.items():
        batch.settle(answers)


def _reason(error: BaseException) -> str:
    """The broker's words for a closed connection or channel, else the error's text."""
    if isinstance(error, (ConnectionClosed, ChannelClosed)):
        return f"{error.reply_code} {error.reply_text}"
    inner = error.args[0] if len(error.args) == 1 else None
    if isinstance(inner, BaseException):
        return _reason(inner)
    if isinstance(error, AMQPConnectionError) and error.args:
        return one_line(" ".join(str(a) for a in error.args))
    return one_line(error)


def _write_buffer_size(conn: SelectConnection) -> int:
    """Bytes the connection has not yet written to its socket (pika keeps this private)."""
    size: Callable[[], int] | None = getattr(conn, "_get_write_buffer_size", None)
    return int(size()) if size is not None else 0


_ARGUMENTS = (
    "amqp-exchange",
    "amqp-ack-level",
    "amqp-connections",
    "amqp-routing-key",
    "verify-ssl",
    "timeout",
    "max-in-flight",
)


def _connections(value: str) -> int:
    number = whole("amqp-connections", value)
    if number > MAX_CONNECTIONS:
        raise ValueError(
            f"argument 'amqp-connections' must be 1 to {MAX_CONNECTIONS}, not {value!r}"
        )
    return number


def _object_hash(delivery: Delivery) -> int:
    """The same number for every event of one object: which connection publishes it."""
    return zlib.crc32(delivery.object_path.encode())


def from_arguments(name: str, endpoint: Endpoint | str, arguments: Mapping[str, str]) -> AmqpTarget:
    """An AMQP target for the topic `name` (the default routing key) from string arguments:
    `amqp-exchange` (mandatory), `amqp-ack-level` (none | broker | routable, default
    broker), `verify-ssl` (true/false, for amqps://), `timeout` (seconds, default 10),
    `max-in-flight` (unconfirmed messages per connection, default 5000), `amqp-connections`
    (1 to 16, default 1), `amqp-routing-key` (default: the topic name). A wrong, missing or unknown
    argument raises `ValueError` naming it."""
    try:
        for arg in arguments:
            if arg not in _ARGUMENTS:
                raise ValueError(
                    f"unknown argument {arg!r}; expected one of {', '.join(_ARGUMENTS)}"
                )
        exchange = arguments.get("amqp-exchange", "").strip()
        if not exchange:
            raise ValueError(
                "argument 'amqp-exchange' is mandatory: the name of an existing exchange "
                "(ripple does not declare it)"
            )
        level = choice("amqp-ack-level", arguments.get("amqp-ack-level", "broker"), ACK_LEVELS)
        ack_level: AckLevel = (
            "none" if level == "none" else "routable" if level == "routable" else "broker"
        )
        return AmqpTarget(
            endpoint,
            exchange,
            name=name,
            ack_level=ack_level,
            verify_ssl=flag("verify-ssl", arguments["verify-ssl"])
            if "verify-ssl" in arguments
            else True,
            timeout_s=positive("timeout", arguments["timeout"]) if "timeout" in arguments else 10.0,
            max_in_flight=whole("max-in-flight", arguments["max-in-flight"])
            if "max-in-flight" in arguments
            else 5000,
            connections=_connections(arguments.get("amqp-connections", "1")),
            routing_key=arguments.get("amqp-routing-key", "").strip() or None,
        )
    except ValueError as e:
        raise ValueError(f"AMQP topic {name!r}: {e}") from None
