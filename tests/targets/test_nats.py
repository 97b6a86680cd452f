"""NatsTarget against the real nats-server on 127.0.0.1:4222 (JetStream): the exact bytes and
headers that land in a stream, de-duplication of redeliveries, a subject no stream captures,
an unreachable server, a server restart in the middle of a Deliverer's batch, and
`from_arguments`.

Each test makes its own stream on a fresh subject with an independent nats-py client and
reads back what arrived with its own pull consumer (and the raw stored message for the exact
header bytes). The restart test stops and starts nats-server with start-stop-daemon, waits
for conditions (never fixed times) and leaves the server running, even when it fails.
Without a server the tests skip, or fail when `CI` is set.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote_plus

import nats
import pytest
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, StorageType, StreamConfig
from prometheus_client import REGISTRY

from ripple.metabase import Metabase
from ripple.notifications.endpoints import parse_endpoint
from ripple.pipeline.deliver import Deliverer
from ripple.pipeline.queue import RetryQueue
from ripple.targets.base import OK, Delivery, Outcome, Result, one_line
from ripple.targets.nats import NatsTarget, default_subject, from_arguments
from ripple.targets.retry import RetryPolicy
from tests.conftest import service_missing
from tests.targets.conftest import delivery, event_record
from tests.waiting import wait_for

HOST, PORT = "127.0.0.1", 4222
SERVER = f"nats://{HOST}:{PORT}"
NATS_SERVER = "/usr/sbin/nats-server"
START = [
    "start-stop-daemon", "--start", "--oknodo", "--background", "--exec", NATS_SERVER, "--",
    "-a", HOST, "-p", str(PORT), "-js", "-sd", "/var/lib/nats-server",
    "-l", "/var/log/nats-server.log",
]  # fmt: skip
STOP = ["start-stop-daemon", "--stop", "--oknodo", "--exec", NATS_SERVER]

T = TypeVar("T")
MakeTarget = Callable[..., NatsTarget]


def jetstream(action: Callable[[JetStreamContext], Awaitable[T]]) -> T:
    """Run `action` with an independent client (a connection of its own, closed after)."""

    async def main() -> T:
        nc = await nats.connect(  # two quick attempts, then NoServersError
            SERVER,
            connect_timeout=2,
            allow_reconnect=False,
            max_reconnect_attempts=1,
            reconnect_time_wait=0,
            error_cb=_quiet,
        )
        try:
            return await action(nc.jetstream(timeout=5))
        finally:
            await nc.close()

    return asyncio.run(main())


async def _quiet(error: Exception) -> None:
    """nats-py logs every failed connection attempt as an error; these are expected."""


def accepting() -> bool:
    """Whether the server takes connections and JetStream answers."""
    try:
        jetstream(lambda js: js.account_info())
    except Exception:
        return False
    return True


def port_closed() -> bool:
    try:
        socket.create_connection((HOST, PORT), timeout=0.5).close()
    except OSError:
        return True
    return False


@pytest.fixture(scope="module")
def nats_available() -> None:
    try:
        jetstream(lambda js: js.account_info())
    except Exception as e:
        service_missing(f"NATS JetStream at {SERVER}", one_line(e))


class NatsServer:
    """Stops and starts the local nats-server with its own commands."""

    def stop(self) -> None:
        subprocess.run(STOP, check=True, capture_output=True)
        wait_for(port_closed, "nats-server has stopped")

    def start(self) -> None:
        subprocess.run(START, check=True, capture_output=True)
        wait_for(accepting, "nats-server accepts connections again")

    def ensure_running(self) -> None:
        if not accepting():
            self.start()


@pytest.fixture
def nats_server(nats_available: None) -> Iterator[NatsServer]:
    server = NatsServer()
    try:
        yield server
    finally:
        server.ensure_running()


@dataclass(frozen=True)
class Stored:
    seq: int
    data: bytes
    headers: dict[str, str]


@dataclass(frozen=True)
class Stream:
    name: str
    subject: str

    def count(self) -> int:
        async def count(js: JetStreamContext) -> int:
            return (await js.stream_info(self.name)).state.messages

        return jetstream(count)

    def messages(self) -> list[Stored]:
        """Every message in the stream, read by a pull consumer of its own."""

        async def read(js: JetStreamContext) -> list[Stored]:
            total = (await js.stream_info(self.name)).state.messages
            durable = f"check_{uuid.uuid4().hex[:8]}"
            config = ConsumerConfig(ack_policy=AckPolicy.ALL)
            sub = await js.pull_subscribe(
                self.subject, durable=durable, stream=self.name, config=config
            )
            got: list[Stored] = []
            while len(got) < total:
                fetched = await sub.fetch(min(500, total - len(got)), timeout=5)
                for m in fetched:
                    got.append(Stored(m.metadata.sequence.stream, m.data, dict(m.headers or {})))
                await fetched[-1].ack()  # and every one before it
            await js.delete_consumer(self.name, durable)
            return got

        return jetstream(read)

    def raw_headers(self, seq: int) -> bytes:
        """The header block of stored message `seq`, byte for byte."""

        async def get(js: JetStreamContext) -> Any:
            return await js.get_msg(self.name, seq)

        return base64.b64decode(jetstream(get).hdrs)


@pytest.fixture
def stream(nats_available: None) -> Iterator[Stream]:
    suffix = uuid.uuid4().hex[:10]
    s = Stream(f"RIPPLE_TEST_{suffix}", f"ripple.test.{suffix}")
    jetstream(
        lambda js: js.add_stream(
            StreamConfig(name=s.name, subjects=[s.subject], storage=StorageType.FILE)
        )
    )
    yield s
    NatsServer().ensure_running()  # a failed restart test must not leave the stream behind
    jetstream(lambda js: js.delete_stream(s.name))


@pytest.fixture
def target_for(nats_available: None) -> Iterator[MakeTarget]:
    """Opened targets on the local server (unless told otherwise), closed at the end."""
    opened: list[NatsTarget] = []

    def make(subject: str, uri: str = SERVER, **options: Any) -> NatsTarget:
        options.setdefault("timeout_s", 5.0)
        target = NatsTarget(parse_endpoint(uri), subject, **options)
        target.open()
        opened.append(target)
        return target

    yield make
    for target in opened:
        target.close()


def versioned(key: str, n: int) -> Delivery:
    """A delivery in a versioned bucket (it has a versionId attribute)."""
    event = event_record(key, n=n)
    event["s3"]["object"]["versionId"] = f"v{n}"
    d = delivery(key, n=n)
    return Delivery.of(d.event_id, event, {**d.attributes, "versionId": f"v{n}"}, batch_id=7)


def expected_headers(d: Delivery, key_header: str) -> dict[str, str]:
    headers = {
        "Nats-Msg-Id": d.event_id,
        "Content-Type": "application/json",
        "Ripple-Event-Name": d.attributes["eventName"],
        "Ripple-Bucket": d.attributes["bucket"],
        "Ripple-Key": key_header,
        "Ripple-Sequencer": d.attributes["sequencer"],
    }
    if "versionId" in d.attributes:
        headers["Ripple-Version-Id"] = d.attributes["versionId"]
    return headers


def test_bodies_and_headers_land_in_the_stream_exactly(
    stream: Stream, target_for: MakeTarget
) -> None:
    plain = [delivery(f"2026/{n}.jpg", n=n) for n in range(20)]
    odd = delivery("2026/red flower ü~+.jpg", n=20)
    version = versioned("docs/report.pdf", 21)
    deliveries = [*plain, odd, version]
    target = target_for(stream.subject)

    assert target.publish(deliveries) == [OK] * 22

    stored = {m.headers["Nats-Msg-Id"]: m for m in stream.messages()}
    assert len(stored) == 22 == stream.count()
    for d in deliveries:
        assert stored[d.event_id].data == d.body
    for d in plain:
        assert stored[d.event_id].headers == expected_headers(d, d.attributes["key"])
    assert stored[odd.event_id].headers == expected_headers(odd, "2026/red+flower+%C3%BC%7E%2B.jpg")
    assert unquote_plus(stored[odd.event_id].headers["Ripple-Key"]) == "2026/red flower ü~+.jpg"
    assert stored[version.event_id].headers["Ripple-Version-Id"] == "v21"
    assert stored[version.event_id].headers == expected_headers(version, "docs/report.pdf")

    d = plain[0]
    assert stream.raw_headers(stored[d.event_id].seq) == (
        b"NATS/1.0\r\n"
        b"Nats-Msg-Id: photos-18EA07F04CD9E115-0\r\n"
        b"Content-Type: application/json\r\n"
        b"Ripple-Event-Name: ObjectCreated:Put\r\n"
        b"Ripple-Bucket: photos\r\n"
        b"Ripple-Key: 2026/0.jpg\r\n"
        b"Ripple-Sequencer: 18EA07F04CD9E115\r\n"
        b"\r\n"
    )
    assert target.headers(d) == expected_headers(d, "2026/0.jpg")


def test_a_forced_redelivery_lands_once(stream: Stream, target_for: MakeTarget) -> None:
    deliveries = [delivery(f"k/{n}", n=n) for n in range(10)]
    target = target_for(stream.subject)

    assert target.publish(deliveries) == [OK] * 10
    assert stream.count() == 10
    assert target.duplicates == 0

    assert target.publish(deliveries) == [OK] * 10  # the same event ids again

    assert stream.count() == 10
    assert target.duplicates == 10  # each PubAck said duplicate: true
    ack = jetstream(
        lambda js: js.publish(stream.subject, b"x", headers={"Nats-Msg-Id": deliveries[3].event_id})
    )
    assert ack.duplicate is True
    assert stream.count() == 10
    assert sorted(m.headers["Nats-Msg-Id"] for m in stream.messages()) == sorted(
        d.event_id for d in deliveries
    )


def test_a_subject_no_stream_captures_is_retry_naming_it(target_for: MakeTarget) -> None:
    subject = f"ripple.nostream.{uuid.uuid4().hex[:10]}"
    target = target_for(subject)

    results = target.publish([delivery(n=n) for n in range(3)])

    assert [r.outcome for r in results] == [Outcome.RETRY] * 3
    assert results[0].error == (
        f"no stream captures subject {subject!r} on {SERVER} "
        "(JetStream answered no responders); create a stream for it"
    )


def test_an_unreachable_server_is_retry_and_open_does_not_fail(target_for: MakeTarget) -> None:
    with socket.socket() as bound:  # bound but not listening: connections are refused
        bound.bind((HOST, 0))
        port = bound.getsockname()[1]
        target = target_for("ripple.nowhere", uri=f"nats://{HOST}:{port}", timeout_s=0.3)

        results = target.publish([delivery(n=n) for n in range(4)])

    assert [r.outcome for r in results] == [Outcome.RETRY] * 4
    assert results[0].error is not None
    assert results[0].error.startswith(f"not connected to nats://{HOST}:{port}: ")
    assert not target.connected


class SilentServer:
    """Speaks just enough NATS to be connected to (INFO, PONG) and never answers a publish:
    a server that hangs with its connection open."""

    def __init__(self) -> None:
        self.listener = socket.create_server((HOST, 0))
        self.port = self.listener.getsockname()[1]
        self.published = 0
        self.connections: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections.append(conn)
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        info = {"server_id": "silent", "version": "2.9.10", "headers": True, "proto": 1}
        info |= {"max_payload": 1 << 20, "host": HOST, "port": self.port}
        buffered = b""
        try:
            conn.sendall(b"INFO " + json.dumps(info).encode() + b"\r\n")
            while chunk := conn.recv(65536):
                *lines, buffered = (buffered + chunk).split(b"\r\n")
                for line in lines:
                    if line == b"PING":
                        conn.sendall(b"PONG\r\n")
                    elif line.startswith(b"HPUB "):
                        self.published += 1
        except OSError:
            return

    def close(self) -> None:
        self.listener.close()
        for conn in self.connections:
            conn.close()


def test_no_puback_in_time_is_retry_and_the_rest_of_the_batch_is_not_sent(
    target_for: MakeTarget,
) -> None:
    server = SilentServer()
    try:
        target = target_for(
            "ripple.silent", uri=f"nats://{HOST}:{server.port}", timeout_s=0.3, max_in_flight=2
        )
        assert target.connected

        results = target.publish([delivery(n=n) for n in range(10)])
    finally:
        server.close()

    error = f"no PubAck within 0.3s from nats://{HOST}:{server.port} for 'ripple.silent'"
    assert results[:2] == [Result(Outcome.RETRY, error)] * 2
    assert results[2:] == [Result(Outcome.RETRY, f"not sent: {error}")] * 8
    assert server.published == 2


def test_one_connection_serves_every_batch(stream: Stream, target_for: MakeTarget) -> None:
    target = target_for(stream.subject)
    client = target._client

    for n in range(3):
        assert target.publish([delivery(n=n), delivery(n=n + 10)]) == [OK, OK]

    assert target._client is client
    assert target.connected
    assert stream.count() == 6


def test_at_most_max_in_flight_publishes(stream: Stream, target_for: MakeTarget) -> None:
    target = target_for(stream.subject, max_in_flight=4)
    js = target._js
    assert js is not None
    inner = js.publish
    in_flight = most = 0

    async def counting(*args: Any, **kwargs: Any) -> Any:  # runs on the target's loop
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        try:
            return await inner(*args, **kwargs)
        finally:
            in_flight -= 1

    js.publish = counting  # type: ignore[method-assign]

    assert target.publish([delivery(f"k/{n}", n=n) for n in range(200)]) == [OK] * 200
    assert most == 4
    assert stream.count() == 200


def test_open_and_close_are_idempotent_and_publish_needs_open(stream: Stream) -> None:
    target = NatsTarget(parse_endpoint(SERVER), stream.subject)
    with pytest.raises(RuntimeError, match="open"):
        target.publish([delivery()])
    target.open()
    target.open()
    assert target.publish([]) == []
    assert target.publish([delivery()]) == [OK]
    target.close()
    target.close()
    with pytest.raises(RuntimeError, match="open"):
        target.publish([delivery()])


def push_fail(destination: str) -> float:
    return REGISTRY.get_sample_value("ripple_push_fail_total", {"destination": destination}) or 0


def queue_gauge(destination: str) -> float | None:
    return REGISTRY.get_sample_value("ripple_retry_queue_length", {"destination": destination})


def events(start: int, count: int) -> list[Delivery]:
    return [delivery(f"restart/{n}", n=n) for n in range(start, start + count)]


def test_a_restart_during_delivery_loses_and_duplicates_nothing(
    db: Metabase, stream: Stream, nats_server: NatsServer
) -> None:
    topic = f"nats-restart-{uuid.uuid4().hex[:8]}"
    target = from_arguments(
        topic,
        parse_endpoint(SERVER),
        {"nats-subject": stream.subject, "timeout": "1", "max-in-flight": "16"},
    )
    queue = RetryQueue(db.writer)
    deliverer = Deliverer(
        {topic: [target]},
        queue,
        default_policy=RetryPolicy(attempts_in_batch=2, base_delay_s=0.01, max_delay_s=0.05),
    )
    deliverer.open()
    try:
        before = push_fail(topic)
        first, big, late, after = events(0, 200), events(200, 10_000), events(10_200, 100), []
        deliverer.deliver({topic: first})
        assert queue.length(topic) == 0

        errors: list[BaseException] = []

        def deliver_big() -> None:
            try:
                deliverer.deliver({topic: big})
            except BaseException as e:
                errors.append(e)

        thread = threading.Thread(target=deliver_big)
        thread.start()
        try:
            wait_for(lambda: stream.count() >= 700, "part of the big batch is in the stream")
            nats_server.stop()
        finally:
            thread.join(60)
        assert not thread.is_alive()
        assert errors == []
        assert queue.length(topic) > 0  # the server went away in the middle of the batch
        deliverer.deliver({topic: late})  # while it is down: queued behind the others
        assert push_fail(topic) > before
        assert queue.length(topic) > len(late)

        nats_server.start()

        def drained() -> bool:
            deliverer.drain(now_ns=time.time_ns() + 60 * 10**9, limit=2000)
            return queue.length(topic) == 0

        wait_for(drained, "the retry queue has drained", timeout=40)
        after = events(10_300, 100)
        deliverer.deliver({topic: after})
        duplicates = target.duplicates
        deliverer.deliver({topic: first + big[:1000]})  # redelivered after the restart
        assert target.duplicates - duplicates == 1200  # the stream remembered their ids
        assert queue.length(topic) == 0
        assert queue_gauge(topic) == 0
        assert queue.dead_count(topic) == 0
    finally:
        deliverer.close()

    sent = {d.body: d.event_id for d in [*first, *big, *late, *after]}
    messages = stream.messages()
    landed = Counter(m.data for m in messages)
    assert set(landed) == set(sent)  # every event arrived, byte for byte
    assert max(landed.values()) == 1  # within the duplicate window: exactly once
    assert all(m.headers["Nats-Msg-Id"] == sent[m.data] for m in messages)
    assert stream.count() == len(sent)


def test_from_arguments() -> None:
    endpoint = parse_endpoint("nats://alice:s3cr3t@127.0.0.1:4223")
    target = from_arguments(
        "events",
        endpoint,
        {"nats-subject": "ripple.photos.events", "timeout": "2.5", "max-in-flight": "8"},
    )

    assert target.name == "events"
    assert target.subject == "ripple.photos.events"
    assert target.timeout_s == 2.5
    assert target.max_in_flight == 8
    assert target.server == "nats://127.0.0.1:4223"
    assert target.endpoint == endpoint


def test_from_arguments_defaults() -> None:
    target = from_arguments("projects/my-team/topics/photos", parse_endpoint("nats://h"), {})

    assert target.name == "projects/my-team/topics/photos"
    assert target.subject == "projects.my-team.topics.photos"
    assert target.timeout_s == 5.0
    assert target.max_in_flight == 256
    assert target.server == "nats://h:4222"


@pytest.mark.parametrize(
    ("topic", "subject"),
    [
        ("photos", "photos"),
        ("projects/my-team/topics/photos", "projects.my-team.topics.photos"),
        ("s3 events*", "s3_events_"),
        ("a..b/", "a.b"),
        ("$SYS.x", "_SYS.x"),
        ("fotos/ü>", "fotos.__"),
    ],
)
def test_default_subject(topic: str, subject: str) -> None:
    assert default_subject(topic) == subject


@pytest.mark.parametrize(
    ("topic", "arguments", "named"),
    [
        ("t", {"nats-subject": ""}, "'nats-subject'"),
        ("t", {"nats-subject": "a b"}, "'nats-subject'"),
        ("t", {"nats-subject": "a.*"}, "'nats-subject'"),
        ("t", {"nats-subject": "a.>"}, "'nats-subject'"),
        ("t", {"nats-subject": "a..b"}, "'nats-subject'"),
        ("t", {"nats-subject": "$JS.API.STREAM.LIST"}, "'nats-subject'"),
        ("///", {}, "'nats-subject'"),
        ("t", {"timeout": "0"}, "'timeout'"),
        ("t", {"timeout": "soon"}, "'timeout'"),
        ("t", {"max-in-flight": "0"}, "'max-in-flight'"),
        ("t", {"max-in-flight": "1.5"}, "'max-in-flight'"),
        ("t", {"stream": "EVENTS"}, "'stream'"),
    ],
)
def test_from_arguments_errors_name_the_argument(
    topic: str, arguments: dict[str, str], named: str
) -> None:
    with pytest.raises(ValueError, match=named) as raised:
        from_arguments(topic, parse_endpoint(SERVER), arguments)

    message = str(raised.value)
    assert message.startswith(f"NATS topic {topic!r}: ")
    assert "\n" not in message
    if named == "'stream'":
        assert "nats-subject, timeout, max-in-flight" in message
