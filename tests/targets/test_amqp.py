"""AmqpTarget against the real RabbitMQ on 127.0.0.1:5672: the exact messages that land in a
queue bound to the exchange, the three ack levels, a missing exchange that appears later, a
vhost and credentials from the URI, a wrong password, a broker that blocks publishing, a
RabbitMQ restart in the middle of a Deliverer's batches, and `from_arguments`.

Each test declares its own exchange and queue (fresh names, deleted afterwards) with an
independent pika connection, and reads back what arrived with its own consumer. Tests that
change the broker (a vhost and a user, a memory alarm, `stop_app` / `start_app`) use
rabbitmqctl, wait for conditions rather than fixed times, and leave the broker as they found
it, even when they fail. Without a broker (or rabbitmqctl) they skip, or fail when `CI` is set.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pika
import pytest
from prometheus_client import REGISTRY

from ripple.metabase import Metabase
from ripple.notifications.endpoints import parse_endpoint
from ripple.pipeline.deliver import Deliverer
from ripple.pipeline.queue import RetryQueue
from ripple.pipeline.route import delivery as route_delivery
from ripple.targets.amqp import AmqpTarget, from_arguments
from ripple.targets.base import OK, Delivery, Outcome, Result, one_line
from ripple.targets.retry import RetryPolicy
from tests.conftest import service_missing
from tests.targets.conftest import delivery, event_record
from tests.targets.rabbitmq import HOST, PORT, URL, Route, connect, fresh_route
from tests.waiting import wait_for

MakeTarget = Callable[..., AmqpTarget]


def accepting() -> bool:
    try:
        connect().close()
    except Exception:
        return False
    return True


@pytest.fixture(scope="module")
def rabbitmq() -> None:
    try:
        connect().close()
    except Exception as e:
        service_missing(f"RabbitMQ at {HOST}:{PORT}", one_line(repr(e)))


def rabbitmqctl(*args: str) -> str:
    done = subprocess.run(
        ["rabbitmqctl", *args], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"rabbitmqctl {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


@pytest.fixture(scope="module")
def ctl(rabbitmq: None) -> Callable[..., str]:
    """rabbitmqctl, when it is installed and may manage the local broker."""
    if shutil.which("rabbitmqctl") is None:
        service_missing("rabbitmqctl", "not on PATH")
    try:
        rabbitmqctl("status")
    except (AssertionError, OSError, subprocess.TimeoutExpired) as e:
        service_missing("rabbitmqctl", one_line(e))
    return rabbitmqctl


@pytest.fixture
def route(rabbitmq: None) -> Iterator[Route]:
    r = fresh_route()
    yield r
    r.cleanup()


@pytest.fixture
def target_for(route: Route) -> Iterator[MakeTarget]:
    """Opened targets publishing to the route's exchange, closed at the end."""
    opened: list[AmqpTarget] = []

    def make(url: str = URL, **arguments: str) -> AmqpTarget:
        arguments.setdefault("amqp-exchange", route.exchange)
        arguments.setdefault("timeout", "5")
        target = from_arguments(route.topic, url, arguments)
        target.open()
        opened.append(target)
        return target

    yield make
    for target in opened:
        target.close()


def deliveries(n: int, prefix: str = "2026/cat", start: int = 0) -> list[Delivery]:
    """`n` deliveries with distinct event ids (from `start` on)."""
    return [delivery(f"{prefix}-{i}.jpg", n=i) for i in range(start, start + n)]


def per_object(ids: list[str], sent: list[Delivery]) -> dict[tuple[str, str], list[str]]:
    """The event ids of each object (bucket, key), in the order of `ids`."""
    objects = {d.event_id: (d.attributes["bucket"], d.attributes["key"]) for d in sent}
    order: dict[tuple[str, str], list[str]] = {}
    for event_id in ids:
        order.setdefault(objects[event_id], []).append(event_id)
    return order


def assert_arrived(route: Route, sent: list[Delivery], *, whole_order: bool = False) -> None:
    """What the queue holds is exactly `sent`, byte for byte, each object's events in the
    order they were given (with `whole_order`, all of them: one connection)."""
    received = route.consume()
    ids = [properties.message_id for _, properties, _ in received]
    if whole_order:
        assert ids == [d.event_id for d in sent]
    assert sorted(body for _, _, body in received) == sorted(d.body for d in sent)
    assert per_object(ids, sent) == per_object([d.event_id for d in sent], sent)
    by_id = {d.event_id: d for d in sent}
    for method, properties, body in received:
        d = by_id[properties.message_id]
        assert body == d.body
        assert method.exchange == route.exchange
        assert method.routing_key == route.topic
        assert properties.message_id == d.event_id
        assert properties.delivery_mode == 2
        assert properties.content_type == "application/json"
        assert properties.headers == dict(d.attributes)


# the messages --------------------------------------------------------------------------------


@pytest.mark.parametrize("level", ["none", "broker", "routable"])
def test_a_batch_arrives_byte_for_byte(route: Route, target_for: MakeTarget, level: str) -> None:
    route.declare_exchange()
    route.bind_queue()
    sent = deliveries(20)
    versioned = event_record("2026/ünïcødé key+%2F.jpg", n=99)
    versioned["s3"]["object"]["versionId"] = "v-3HL4kqtJlcpXroDTDmJ"
    sent.append(
        Delivery.of(
            "photos-versioned-99",
            versioned,
            {
                "eventName": "ObjectCreated:Put",
                "bucket": "photos",
                "key": "2026/ünïcødé key+%2F.jpg",
                "versionId": "v-3HL4kqtJlcpXroDTDmJ",
                "sequencer": versioned["s3"]["object"]["sequencer"],
            },
        )
    )
    target = target_for(**{"amqp-ack-level": level})

    assert target.publish(sent) == [OK] * len(sent)

    assert_arrived(route, sent)
    record = orjson.loads(sent[-1].body)["Records"][0]
    assert record["s3"]["object"]["versionId"] == "v-3HL4kqtJlcpXroDTDmJ"


def test_the_routing_key_is_the_topic_name_on_a_direct_exchange(rabbitmq: None) -> None:
    route = fresh_route(exchange_type="direct")
    other = f"{route.queue}-other"
    try:
        route.declare_exchange()
        route.bind_queue()
        route.channel().queue_declare(other, durable=True)
        route.channel().queue_bind(other, route.exchange, "some-other-topic")
        target = from_arguments(route.topic, URL, {"amqp-exchange": route.exchange})
        target.open()
        try:
            sent = deliveries(3)
            assert target.publish(sent) == [OK] * 3
        finally:
            target.close()
        assert_arrived(route, sent)
        assert route.channel().queue_declare(other, passive=True).method.message_count == 0
    finally:
        route.channel().queue_delete(other)
        route.cleanup()


def test_a_batch_larger_than_max_in_flight(route: Route, target_for: MakeTarget) -> None:
    """The window refills as confirms (single and multiple) come back; order is kept."""
    route.declare_exchange()
    route.bind_queue()
    sent = deliveries(2500)
    target = target_for(**{"max-in-flight": "64", "amqp-connections": "1"})
    assert target.publish(sent) == [OK] * len(sent)
    assert target.publish(sent[:10]) == [OK] * 10  # the same connection goes on
    assert_arrived(route, sent + sent[:10], whole_order=True)


def test_each_objects_events_keep_their_order_across_connections(
    route: Route, target_for: MakeTarget
) -> None:
    """Four connections share a batch of 40 objects x 25 events, given interleaved: every
    connection publishes, and each object's events arrive in the order given."""
    route.declare_exchange()
    route.bind_queue()
    sent = [delivery(f"2026/object-{k}.jpg", n=1000 * k + v) for v in range(25) for k in range(40)]
    target = target_for(**{"max-in-flight": "32", "amqp-connections": "4"})
    assert target.publish(sent) == [OK] * len(sent)
    assert_arrived(route, sent)
    assert target._loop is not None
    published = [io.next_tag - 1 for io in target._loop.publishers]
    assert len(published) == 4
    assert all(n > 0 for n in published)
    assert sum(published) == len(sent)


def test_concurrent_batches_share_the_connection(route: Route, target_for: MakeTarget) -> None:
    """A batch and a retry-queue drain may publish at the same time."""
    route.declare_exchange()
    route.bind_queue()
    target = target_for(**{"max-in-flight": "50", "amqp-connections": "1"})
    batches = [deliveries(300, prefix=f"thread-{t}", start=1000 * t) for t in range(4)]
    results: dict[int, list[Any]] = {}

    def publish(t: int) -> None:
        results[t] = target.publish(batches[t])

    threads = [threading.Thread(target=publish, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert {t: set(r) for t, r in results.items()} == {t: {OK} for t in range(4)}
    received = route.consume()
    ids = [p.message_id for _, p, _ in received]
    assert sorted(ids) == sorted(d.event_id for b in batches for d in b)
    for batch in batches:  # each batch in its own order
        mine = {d.event_id for d in batch}
        assert [i for i in ids if i in mine] == [d.event_id for d in batch]


# ack levels and routing ------------------------------------------------------------------------


def test_routable_with_no_queue_bound_is_retry(route: Route, target_for: MakeTarget) -> None:
    route.declare_exchange()
    target = target_for(**{"amqp-ack-level": "routable"})

    results = target.publish(deliveries(5))

    assert {r.outcome for r in results} == {Outcome.RETRY}
    error = results[0].error or ""
    assert (
        f"no queue bound to exchange {route.exchange!r} with routing key {route.topic!r}" in error
    )
    assert "NO_ROUTE" in error
    # once a queue is bound, the same target delivers
    route.bind_queue()
    sent = deliveries(5)
    assert target.publish(sent) == [OK] * 5
    assert_arrived(route, sent)


def test_broker_level_takes_unroutable_messages(route: Route, target_for: MakeTarget) -> None:
    """The broker confirms a message no queue receives: at level broker that is delivered."""
    route.declare_exchange()
    target = target_for(**{"amqp-ack-level": "broker"})
    assert target.publish(deliveries(5)) == [OK] * 5
    route.bind_queue()
    assert route.consume(idle_s=0.5) == []  # they were dropped, as the level allows


@pytest.mark.parametrize("level", ["none", "broker", "routable"])
def test_a_missing_exchange_is_retry_until_it_is_declared(
    route: Route, target_for: MakeTarget, level: str
) -> None:
    target = target_for(**{"amqp-ack-level": level})
    sent = deliveries(10)

    results = target.publish(sent)

    assert {r.outcome for r in results} == {Outcome.RETRY}
    error = results[0].error or ""
    assert f"exchange {route.exchange!r} does not exist in vhost '/'" in error
    assert "404 NOT_FOUND" in error
    assert {r.outcome for r in target.publish(sent)} == {Outcome.RETRY}  # still missing
    assert not route.exchange_exists()  # the target declares nothing

    route.declare_exchange()
    route.bind_queue()
    assert target.publish(sent) == [OK] * len(sent)
    assert_arrived(route, sent)


# connections, vhosts and credentials ----------------------------------------------------------


def test_vhost_and_credentials_come_from_the_uri(ctl: Callable[..., str]) -> None:
    tag = uuid.uuid4().hex[:8]
    vhost, user, password = f"ripple/test-{tag}", f"ripple-{tag}", f"p@ss:{tag}/ü"
    ctl("add_vhost", vhost)
    try:
        ctl("add_user", user, password)
        ctl("set_permissions", "-p", vhost, user, ".*", ".*", ".*")
        route = fresh_route(vhost=vhost, user=user, password=password)
        route.declare_exchange()
        route.bind_queue()
        quoted_vhost = vhost.replace("/", "%2F")
        quoted_password = password.replace("@", "%40").replace(":", "%3A").replace("/", "%2F")
        url = f"amqp://{user}:{quoted_password}@{HOST}:{PORT}/{quoted_vhost}"
        assert parse_endpoint(url).path == vhost
        target = from_arguments(route.topic, url, {"amqp-exchange": route.exchange})
        target.open()
        try:
            sent = deliveries(5)
            assert target.publish(sent) == [OK] * 5
        finally:
            target.close()
        assert_arrived(route, sent)
        # the default vhost has no such exchange: the target used the URI's vhost
        assert not Route(route.exchange, route.topic, route.queue).exchange_exists()
        route.cleanup()
    finally:
        subprocess.run(["rabbitmqctl", "delete_user", user], capture_output=True, check=False)
        subprocess.run(["rabbitmqctl", "delete_vhost", vhost], capture_output=True, check=False)


def test_a_wrong_password_is_retry_saying_authentication_failed(
    route: Route, target_for: MakeTarget
) -> None:
    route.declare_exchange()
    route.bind_queue()
    target = target_for(f"amqp://guest:not-the-password@{HOST}:{PORT}/")

    results = target.publish(deliveries(3))

    assert {r.outcome for r in results} == {Outcome.RETRY}
    error = results[0].error or ""
    assert error.startswith("authentication failed for user 'guest'")
    assert "not-the-password" not in error
    assert "ACCESS_REFUSED" in error


def test_an_unknown_vhost_and_a_closed_port_are_retry(route: Route, target_for: MakeTarget) -> None:
    vhost = f"no-such-vhost-{uuid.uuid4().hex[:6]}"
    [result] = target_for(f"amqp://{HOST}:{PORT}/{vhost}").publish(deliveries(1))
    assert result.outcome is Outcome.RETRY
    assert f"access to vhost {vhost!r} refused" in (result.error or "")

    [result] = target_for(f"amqp://{HOST}:1/").publish(deliveries(1))
    assert result == Result(Outcome.RETRY, f"connection refused: amqp://{HOST}:1/")


def test_a_broker_that_blocks_publishing_is_retry_after_the_timeout(
    route: Route, target_for: MakeTarget, ctl: Callable[..., str]
) -> None:
    """A memory alarm: the broker stops reading, no confirm comes; the batch is answered
    within the timeout, and the target recovers on a new connection once the alarm ends."""
    route.declare_exchange()
    route.bind_queue()
    target = target_for(timeout="1")
    assert target.publish(deliveries(3)) == [OK] * 3
    watermark = ctl("eval", "vm_memory_monitor:get_vm_memory_high_watermark().").strip()
    restore = ["absolute", watermark.strip("{}").split(",")[1]] if "," in watermark else [watermark]
    ctl("set_vm_memory_high_watermark", "0.0000001")
    try:
        started = time.monotonic()
        results = target.publish(deliveries(20, prefix="blocked", start=100))
        took = time.monotonic() - started
        assert {r.outcome for r in results} == {Outcome.RETRY}
        assert "the broker blocks publishing (low on memory)" in (results[0].error or "")
        assert took < 10  # bounded by the timeout (1 s), not by the alarm
    finally:
        ctl("set_vm_memory_high_watermark", *restore)

    sent = deliveries(5, prefix="after", start=200)
    deadline = time.monotonic() + 30
    while (results := target.publish(sent)) != [OK] * 5:
        assert time.monotonic() < deadline, results
        time.sleep(0.2)
    received = route.consume()
    ids = {p.message_id for _, p, _ in received}
    assert {d.event_id for d in sent} <= ids  # (and the blocked batch maybe, in part)


# a restart during delivery --------------------------------------------------------------------


class Broker:
    def __init__(self, ctl: Callable[..., str]) -> None:
        self.ctl = ctl

    def stop(self) -> None:
        self.ctl("stop_app")

    def start(self) -> None:
        self.ctl("start_app")
        wait_for(accepting, "RabbitMQ accepts connections again")

    def ensure_running(self) -> None:
        if not accepting():
            self.start()


@pytest.fixture
def broker(ctl: Callable[..., str]) -> Iterator[Broker]:
    b = Broker(ctl)
    try:
        yield b
    finally:
        b.ensure_running()


def metric(name: str, destination: str) -> float:
    return REGISTRY.get_sample_value(name, {"destination": destination}) or 0.0


def test_a_restart_during_delivery_loses_nothing(
    db: Metabase, route: Route, broker: Broker
) -> None:
    """Batches go through a Deliverer with a real retry queue while RabbitMQ stops and starts
    again: the outage shows in the metrics, the retry queue drains by itself, and every
    event reaches the durable queue at least once."""
    route.declare_exchange()
    route.bind_queue()
    topic = route.topic
    target = from_arguments(topic, URL, {"amqp-exchange": route.exchange, "timeout": "3"})
    queue = RetryQueue(db.writer)
    deliverer = Deliverer(
        {topic: [target]},
        queue,
        default_policy=RetryPolicy(attempts_in_batch=2, base_delay_s=0.05, max_delay_s=0.5),
    )
    fails_before = metric("ripple_push_fail_total", topic)
    sent: list[Delivery] = []
    batches_done = 0
    stop = threading.Event()  # the end of the test
    no_more = threading.Event()  # the end of the new batches
    errors: list[BaseException] = []
    longest_queue = 0

    def publish() -> None:  # the pipeline's batches
        nonlocal batches_done
        n = 0
        try:
            while not no_more.is_set():
                batch = [
                    route_delivery(f"restart-{n + i:06d}", event_record(f"k/{n + i}", n=n + i), 1)
                    for i in range(100)
                ]
                n += len(batch)
                deliverer.deliver({topic: batch})
                sent.extend(batch)
                batches_done += 1
                time.sleep(0.02)
        except BaseException as e:
            errors.append(e)

    def drain() -> None:  # the driver's loop
        nonlocal longest_queue
        try:
            while not stop.is_set():
                deliverer.drain()
                longest_queue = max(longest_queue, queue.length(topic))
                time.sleep(0.1)
        except BaseException as e:
            errors.append(e)

    deliverer.open()
    threads = [threading.Thread(target=f, name=f.__name__) for f in (publish, drain)]
    try:
        for thread in threads:
            thread.start()
        wait_for(lambda: batches_done >= 5, "five batches were delivered")
        broker.stop()
        wait_for(
            lambda: metric("ripple_push_fail_total", topic) > fails_before,
            "deliveries failed while RabbitMQ is down",
        )
        down_at = batches_done
        wait_for(lambda: batches_done >= down_at + 5, "five batches went by during the outage")
        broker.start()
        up_at = batches_done
        wait_for(lambda: batches_done >= up_at + 10, "ten more batches after the restart")
        no_more.set()
        wait_for(lambda: queue.length(topic) == 0, "the retry queue drained", timeout=120)
    finally:
        no_more.set()
        stop.set()
        for thread in threads:
            thread.join(60)
        deliverer.close()
    assert errors == []

    # drained and healthy: what is left in the queue is nothing, and the gauge says so
    assert queue.length(topic) == 0
    assert queue.dead_count(topic) == 0
    assert longest_queue > 0
    assert metric("ripple_retry_queue_length", topic) == 0
    assert metric("ripple_push_fail_total", topic) > fails_before

    received = route.consume(idle_s=3.0)
    arrived = [p.message_id for _, p, _ in received]
    assert set(arrived) == {d.event_id for d in sent}  # every one, at least once
    assert len(sent) >= 2000
    by_id = {d.event_id: d for d in sent}
    for _, properties, body in received[:: max(1, len(received) // 50)]:
        d = by_id[properties.message_id]
        assert orjson.loads(body) == orjson.loads(d.body)
        assert properties.delivery_mode == 2
        assert properties.headers == dict(d.attributes)


# from_arguments --------------------------------------------------------------------------------


def test_from_arguments() -> None:
    target = from_arguments(
        "photos-events",
        "amqps://user:secret@broker.example:5671/prod",
        {
            "amqp-exchange": "s3-events",
            "amqp-ack-level": "routable",
            "verify-ssl": "false",
            "timeout": "2.5",
            "max-in-flight": "100",
            "amqp-connections": "3",
        },
    )
    assert target.connections == 3
    assert (target.name, target.routing_key, target.exchange) == (
        "photos-events",
        "photos-events",
        "s3-events",
    )
    assert (target.ack_level, target.verify_ssl, target.timeout_s, target.max_in_flight) == (
        "routable",
        False,
        2.5,
        100,
    )
    params = target.connection_parameters()
    assert (params.host, params.port, params.virtual_host) == ("broker.example", 5671, "prod")
    assert params.ssl_options is not None
    assert params.blocked_connection_timeout == 2.5
    assert params.socket_timeout == 2.5

    defaults = from_arguments("t", parse_endpoint("amqp://h"), {"amqp-exchange": "x"})
    assert (defaults.ack_level, defaults.verify_ssl, defaults.timeout_s) == ("broker", True, 10.0)
    assert defaults.connections == 1
    plain = defaults.connection_parameters()
    assert (plain.port, plain.virtual_host, plain.ssl_options) == (5672, "/", None)
    assert plain.credentials == pika.PlainCredentials("guest", "guest")
    assert "secret" not in repr(target.endpoint)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "argument 'amqp-exchange' is mandatory"),
        ({"amqp-exchange": " "}, "argument 'amqp-exchange' is mandatory"),
        (
            {"amqp-exchange": "x", "amqp-ack-level": "end2end"},
            "argument 'amqp-ack-level' must be one of none, broker, routable, not 'end2end'",
        ),
        ({"amqp-exchange": "x", "verify-ssl": "maybe"}, "argument 'verify-ssl'"),
        ({"amqp-exchange": "x", "timeout": "0"}, "argument 'timeout'"),
        ({"amqp-exchange": "x", "max-in-flight": "1.5"}, "argument 'max-in-flight'"),
        ({"amqp-exchange": "x", "amqp-vhost": "/"}, "unknown argument 'amqp-vhost'"),
        (
            {"amqp-exchange": "x", "amqp-connections": "17"},
            "argument 'amqp-connections' must be 1 to 16, not '17'",
        ),
        ({"amqp-exchange": "x", "amqp-connections": "0"}, "argument 'amqp-connections'"),
    ],
)
def test_from_arguments_names_a_wrong_argument(arguments: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=r"^AMQP topic 'events': ") as raised:
        from_arguments("events", "amqp://127.0.0.1", arguments)
    assert message in str(raised.value)


def test_not_an_amqp_endpoint() -> None:
    with pytest.raises(ValueError, match="is not amqp:// or amqps://"):
        from_arguments("events", "https://example.com/hook", {"amqp-exchange": "x"})


def test_publish_needs_open_and_close_is_idempotent(rabbitmq: None) -> None:
    target = from_arguments("events", URL, {"amqp-exchange": "x"})
    with pytest.raises(RuntimeError, match="not open"):
        target.publish(deliveries(1))
    target.open()
    target.open()
    assert target.publish([]) == []
    target.close()
    target.close()
    with pytest.raises(RuntimeError, match="not open"):
        target.publish(deliveries(1))
