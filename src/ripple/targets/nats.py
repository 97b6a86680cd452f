"""The NATS JetStream target: each delivery is one JetStream publish to one subject.

The data is the S3 event message, with `Nats-Msg-Id: <event id>` (so the stream's duplicate
window drops a redelivery) and one `Ripple-…` header per delivery attribute; a delivery is
`ok` once the stream's PubAck arrives. nats-py is asyncio: the target owns a private event
loop in a thread from `open()` to `close()`, keeps one connection on it and runs each batch
there, at most `max_in_flight` publishes at a time. Each new client asks the destination
guard (`ripple.targets.guard`) first and is given the address it checked; a refusal is
`permanent`. Streams are the operator's to create.

Subjects, headers, duplicates, outages and arguments: docs/targets.md, "NATS JetStream".
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import re
import threading
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext

from ripple.events.keys import encode_key
from ripple.notifications.arguments import positive, whole
from ripple.notifications.endpoints import Endpoint
from ripple.targets.base import OK, Delivery, Outcome, Result, one_line
from ripple.targets.guard import DestinationRefused, default_guard

__all__ = ["NatsTarget", "default_subject", "from_arguments", "subject_problem"]

log = logging.getLogger(__name__)
T = TypeVar("T")

_SUBJECT_TOKEN = re.compile(r"^[^\s.*>]+$")  # no whitespace, separators or wildcards
_NOT_SUBJECT = re.compile(r"[^A-Za-z0-9_-]")  # replaced by `_` in a default subject
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_MESSAGE_TOO_LARGE = 10054  # JetStream's "message size exceeds maximum allowed"
_RECONNECT_WAIT_S = 1  # between reconnection attempts
_PING_INTERVAL_S = 30  # a silently dead connection is noticed after a few of these
_CONNECTION_LOST = (
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.ConnectionDrainingError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.StaleConnectionError,
    OSError,
)


class NatsTarget:
    """Publishes deliveries to one JetStream subject; see the module docstring."""

    def __init__(
        self,
        endpoint: Endpoint,
        subject: str,
        *,
        name: str | None = None,
        timeout_s: float = 5.0,
        max_in_flight: int = 256,
    ) -> None:
        if endpoint.scheme != "nats" or not endpoint.host:
            raise ValueError(f"endpoint {endpoint.redacted!r} is not nats://host[:port]")
        problem = subject_problem(subject)
        if problem is not None:
            raise ValueError(f"subject {subject!r} {problem}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be a positive number of seconds, not {timeout_s}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, not {max_in_flight}")
        self.name = name if name is not None else subject
        self.endpoint = endpoint
        self.subject = subject
        self.timeout_s = timeout_s
        self.max_in_flight = max_in_flight
        host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
        self.server = f"nats://{host}:{endpoint.port}"  # no credentials: used in errors
        self.duplicates = 0  # PubAcks saying the stream already had the message
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        # the rest is used on the loop only
        self._client: Client | None = None
        self._js: JetStreamContext | None = None
        self._connecting: asyncio.Future[None] | None = None
        self._slots: asyncio.Semaphore | None = None
        self._closing: set[asyncio.Future[None]] = set()  # old clients being closed
        self._last_error = "not connected yet"
        self._refused: str | None = None  # the guard refused the destination

    # the Target protocol -----------------------------------------------------------------

    def open(self) -> None:
        with self._lock:
            if self._loop is not None:
                return
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name=f"nats-{self.name}")
            thread.daemon = True
            thread.start()
            self._loop, self._thread = loop, thread
        if not self._run(loop, self._open()):
            if self._refused is not None:
                log.warning("NATS %s: %s", self.name, self._refused)
                return
            log.warning(
                "NATS %s: cannot connect to %s yet (%s); publishes answer retry until it can",
                self.name,
                self.server,
                self._last_error,
            )

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]:
        loop = self._loop
        if loop is None:
            raise RuntimeError(f"NATS target {self.name!r} is not open: call open() first")
        if not deliveries:
            return []
        return self._run(loop, self._publish(list(deliveries)))

    def close(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        try:
            self._run(loop, self._shutdown())
        except Exception as e:  # closing a connection that is already gone
            log.warning("NATS %s: error while closing: %s", self.name, one_line(e))
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()

    @property
    def connected(self) -> bool:
        """Whether the connection is up now (for health checks and tests)."""
        client = self._client
        return client is not None and client.is_connected

    def headers(self, delivery: Delivery) -> dict[str, str]:
        """The headers the message of `delivery` is published with."""
        headers = {"Nats-Msg-Id": delivery.event_id, "Content-Type": "application/json"}
        for attribute, value in delivery.attributes.items():
            header = _header_name(attribute)
            if header is not None:
                headers[header] = encode_key(value) if attribute == "key" else value
        return headers

    # on the loop ---------------------------------------------------------------------------

    def _run(self, loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

    async def _open(self) -> bool:
        self._slots = asyncio.Semaphore(self.max_in_flight)
        connecting = self._connect()
        try:
            await asyncio.wait_for(asyncio.shield(connecting), self.timeout_s)
        except TimeoutError:
            return False
        except Exception as e:
            self._last_error = one_line(e)
            return False
        return True

    def _connect(self) -> asyncio.Future[None]:
        """Start connecting a new client; it then reconnects by itself, for ever (to the
        address the guard checked: a failed future if it refuses or the name does not
        resolve)."""
        self._refused = None
        try:
            address = default_guard().check_address(self.endpoint.host, self.endpoint.port)[0]
        except (DestinationRefused, OSError) as e:
            self._last_error = one_line(e)
            if isinstance(e, DestinationRefused):
                self._refused = self._last_error
            self._client = self._js = None  # the next batch asks again
            failed = asyncio.get_running_loop().create_future()
            failed.set_exception(e)
            failed.exception()  # retrieved: asyncio need not log it
            self._connecting = failed
            return failed
        host = f"[{address}]" if ":" in address else address
        client = Client()
        self._client, self._js = client, client.jetstream()
        user, password = self.endpoint.username, self.endpoint.password
        token = None
        if user and password is None:  # nats://token@host, as NATS URLs say
            user, token = None, user
        self._connecting = asyncio.ensure_future(
            client.connect(
                servers=[f"nats://{host}:{self.endpoint.port}"],
                name=f"ripple {self.name}",
                connect_timeout=max(1, math.ceil(self.timeout_s)),
                reconnect_time_wait=_RECONNECT_WAIT_S,
                max_reconnect_attempts=-1,
                ping_interval=_PING_INTERVAL_S,
                pending_size=0,  # nothing buffered while disconnected: retry at once
                error_cb=self._on_error,
                disconnected_cb=self._on_disconnected,
                reconnected_cb=self._on_reconnected,
                user=user or None,
                password=password,
                token=token,
            )
        )
        return self._connecting

    def _not_connected(self) -> str | None:
        """Why publishing cannot start now (and a new client started if the old one is
        gone for good), or None when connected."""
        client, connecting = self._client, self._connecting
        if client is not None and client.is_connected:
            return None
        if client is None or connecting is None:
            self._connect()
        elif connecting.done():  # connected once: the client reconnects, unless closed
            failed = connecting.cancelled() or connecting.exception() is not None
            if failed and not connecting.cancelled():
                self._last_error = one_line(connecting.exception())
            if failed or client.is_closed:  # gone for good: start again
                closing = asyncio.ensure_future(_quietly_close(client))
                self._closing.add(closing)
                closing.add_done_callback(self._closing.discard)
                self._connect()
        return f"not connected to {self.server}: {self._last_error}"

    async def _publish(self, deliveries: list[Delivery]) -> list[Result]:
        problem = self._not_connected()
        if self._refused is not None:
            return [Result(Outcome.PERMANENT, self._refused)] * len(deliveries)
        js, slots = self._js, self._slots
        if problem is not None or js is None or slots is None:
            return [Result(Outcome.RETRY, problem)] * len(deliveries)
        results: list[Result] = [OK] * len(deliveries)
        broken: list[str] = []  # set once the connection fails: the rest are not sent
        indexes = iter(range(len(deliveries)))

        async def worker() -> None:
            for i in indexes:
                async with slots:
                    if broken:
                        results[i] = Result(Outcome.RETRY, f"not sent: {broken[0]}")
                    else:
                        results[i] = await self._send(js, deliveries[i], broken)

        await asyncio.gather(*(worker() for _ in range(min(len(deliveries), self.max_in_flight))))
        return results

    async def _send(self, js: JetStreamContext, delivery: Delivery, broken: list[str]) -> Result:
        subject = self.subject
        try:
            ack = await js.publish(
                subject, delivery.body, timeout=self.timeout_s, headers=self.headers(delivery)
            )
        except nats.js.errors.NoStreamResponseError:
            return Result(
                Outcome.RETRY,
                f"no stream captures subject {subject!r} on {self.server} "
                "(JetStream answered no responders); create a stream for it",
            )
        except nats.errors.TimeoutError:
            error = f"no PubAck within {self.timeout_s:g}s from {self.server} for {subject!r}"
            broken.append(error)
            return Result(Outcome.RETRY, error)
        except nats.js.errors.APIError as e:
            error = f"JetStream refused the message for {subject!r}: {e.description} "
            error += f"(code {e.code}, err_code {e.err_code})"
            permanent = e.err_code == _MESSAGE_TOO_LARGE
            return Result(Outcome.PERMANENT if permanent else Outcome.RETRY, error)
        except nats.errors.MaxPayloadError:
            return Result(
                Outcome.PERMANENT,
                f"message of {len(delivery.body)} bytes exceeds the max_payload of {self.server}",
            )
        except _CONNECTION_LOST as e:
            error = f"connection to {self.server} lost: {one_line(e)}"
            broken.append(error)
            return Result(Outcome.RETRY, error)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # we are being cancelled: not a result
            error = f"publish to {self.server} cancelled: the connection closed"
            broken.append(error)
            return Result(Outcome.RETRY, error)
        except Exception as e:
            return Result(Outcome.RETRY, f"{type(e).__name__} from {self.server}: {one_line(e)}")
        if ack.duplicate:
            self.duplicates += 1
        return OK

    async def _shutdown(self) -> None:
        connecting, client = self._connecting, self._client
        self._connecting = self._client = self._js = None
        if connecting is not None and not connecting.done():
            connecting.cancel()
        if client is not None:
            await _quietly_close(client, self.timeout_s)
        current = asyncio.current_task()
        rest = [t for t in asyncio.all_tasks() if t is not current]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    async def _on_error(self, error: Exception) -> None:
        self._last_error = one_line(error)
        log.debug("NATS %s: %s", self.name, self._last_error)

    async def _on_disconnected(self) -> None:
        if self._client is not None and not self._client.is_closed:
            log.warning("NATS %s: disconnected from %s; reconnecting", self.name, self.server)

    async def _on_reconnected(self) -> None:
        log.info("NATS %s: reconnected to %s", self.name, self.server)


async def _quietly_close(client: Client, timeout_s: float = 5.0) -> None:
    try:
        await asyncio.wait_for(client.close(), timeout_s)
    except Exception as e:
        log.debug("closing a NATS client: %s", one_line(e))


@functools.cache
def _header_name(attribute: str) -> str | None:
    """`eventName` → `Ripple-Event-Name`; None for a name no header can carry."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", attribute).split("-")
    header = "Ripple-" + "-".join(w[:1].upper() + w[1:] for w in words)
    return header if _HEADER_NAME.match(header) else None


def subject_problem(subject: str) -> str | None:
    """What keeps `subject` from being a subject to publish to, or None."""
    tokens = subject.split(".")
    if not subject or not all(_SUBJECT_TOKEN.match(t) for t in tokens):
        return (
            "must be tokens separated by dots, without spaces or wildcards (* >), "
            "e.g. ripple.photos"
        )
    if subject.startswith("$"):
        return "starts with $: such subjects are NATS's own ($JS, $SYS, $KV, …)"
    return None


def default_subject(topic: str) -> str:
    """The topic name as a subject: `/` separates tokens like `.`, every character other
    than A-Z a-z 0-9 - _ becomes `_`, and empty tokens are dropped
    (`projects/p/topics/photos` → `projects.p.topics.photos`, `s3 events` → `s3_events`)."""
    tokens = (_NOT_SUBJECT.sub("_", t) for t in topic.replace("/", ".").split("."))
    return ".".join(t for t in tokens if t)


_ARGUMENTS = ("nats-subject", "timeout", "max-in-flight")


def from_arguments(name: str, endpoint: Endpoint, arguments: Mapping[str, str]) -> NatsTarget:
    """A NATS JetStream target named `name` (the topic) publishing through `endpoint`, from
    string arguments: `nats-subject` (default: `default_subject(name)`), `timeout` (seconds),
    `max-in-flight`. A wrong or unknown argument raises `ValueError` naming it."""
    try:
        for arg in arguments:
            if arg not in _ARGUMENTS:
                raise ValueError(
                    f"unknown argument {arg!r}; expected one of {', '.join(_ARGUMENTS)}"
                )
        if "nats-subject" in arguments:
            subject = arguments["nats-subject"]
            problem = subject_problem(subject)
            if problem is not None:
                raise ValueError(f"argument 'nats-subject' {subject!r} {problem}")
        else:
            subject = default_subject(name)
            if not subject:
                raise ValueError(
                    "the topic name gives no NATS subject; set the argument 'nats-subject'"
                )
        timeout_s = positive("timeout", arguments["timeout"]) if "timeout" in arguments else 5.0
        max_in_flight = 256
        if "max-in-flight" in arguments:
            max_in_flight = whole("max-in-flight", arguments["max-in-flight"])
        return NatsTarget(
            endpoint, subject, name=name, timeout_s=timeout_s, max_in_flight=max_in_flight
        )
    except ValueError as e:
        raise ValueError(f"NATS topic {name!r}: {e}") from None
