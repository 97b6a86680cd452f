"""RedisTarget against the real Redis on 127.0.0.1:6379: the stream and namespace formats
byte for byte, sequencer-guarded namespace writes, outcomes, a server restart through a
`Deliverer` with a real retry queue, and `from_arguments`.

Every test writes to its own fresh keys (random suffix) and deletes them, and reads what
arrived with an independent client. Without Redis the tests skip (fail when `CI` is set).
Restart tests stop Redis with `redis-cli shutdown nosave` and start it again with the
service's own command; a fixture makes sure it runs again when they end, even on failure.
Redis keeps nothing on disk here, so a restart empties it: those tests assert on what
arrives after it. Waits are for conditions, with deadlines, never for fixed times.
"""

from __future__ import annotations

import re
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import orjson
import pytest
import redis
from prometheus_client import REGISTRY
from redis.backoff import NoBackoff
from redis.retry import Retry

from ripple.metabase import Metabase
from ripple.notifications.endpoints import parse_endpoint
from ripple.pipeline.deliver import Deliverer
from ripple.pipeline.queue import RetryQueue
from ripple.targets.base import OK, Delivery, Outcome, Result
from ripple.targets.redis import RedisConfig, RedisTarget, from_arguments, sequencer_key
from ripple.targets.retry import RetryPolicy
from tests.conftest import service_missing
from tests.targets.conftest import delivery, event_record
from tests.waiting import wait_for

PORT = 6379
DB = 0
START = [
    "redis-server",
    "--daemonize",
    "yes",
    "--bind",
    "127.0.0.1",
    "-::1",
    "--port",
    str(PORT),
    "--save",
    "",
    "--appendonly",
    "no",
    "--dir",
    "/var/lib/redis",
    "--logfile",
    "/var/log/redis/ci.log",
]
STOP = ["redis-cli", "-p", str(PORT), "shutdown", "nosave"]
Server = Any  # a redis.Redis: redis-py types its replies for sync and async clients at once


def port_open() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=0.5):
            return True
    except OSError:
        return False


def client(db: int = DB) -> Server:
    """An independent client: no retries of its own (it reconnects on the next command)."""
    return redis.Redis(
        host="127.0.0.1",
        port=PORT,
        db=db,
        socket_timeout=5,
        socket_connect_timeout=5,
        retry=Retry(NoBackoff(), 0),
    )


def answers() -> bool:
    probe = client()
    try:
        return bool(probe.ping())
    except redis.RedisError:
        return False
    finally:
        probe.close()


@pytest.fixture
def server() -> Iterator[Server]:
    """An independent client of the test database (Redis must be there)."""
    server = client()
    try:
        server.ping()
    except redis.RedisError as e:
        service_missing("Redis on 127.0.0.1:6379", str(e))
    yield server
    server.close()


@pytest.fixture
def fresh_key(server: Server) -> Iterator[Callable[[str], str]]:
    """Makes keys with a random suffix; deletes them (and their sequencer hashes) after."""
    made: list[str] = []

    def make(prefix: str = "ripple-test") -> str:
        key = f"{prefix}-{uuid.uuid4().hex[:12]}"
        made.append(key)
        return key

    yield make
    if made and answers():
        server.delete(*made, *(sequencer_key(k) for k in made))


@pytest.fixture
def target_for(fresh_key: Callable[[str], str]) -> Iterator[Callable[..., RedisTarget]]:
    """Opened targets on a fresh key (or `key`), closed at the end."""
    opened: list[RedisTarget] = []

    def make(key: str | None = None, **options: Any) -> RedisTarget:
        options.setdefault("port", PORT)
        options.setdefault("db", DB)
        config = RedisConfig(key=key or fresh_key("ripple-test"), **options)
        target = RedisTarget(config, name=f"redis-{uuid.uuid4().hex[:8]}")
        target.open()
        opened.append(target)
        return target

    yield make
    for target in opened:
        target.close()


class Restarter:
    """Stops and starts the Redis service with its own commands, waiting until it is so."""

    def stop(self) -> None:
        subprocess.run(STOP, check=False, capture_output=True, timeout=30)
        wait_for(lambda: not port_open(), "Redis stopped (port 6379 closed)")

    def start(self) -> None:
        subprocess.run(START, check=True, capture_output=True, timeout=30)
        wait_for(answers, "Redis accepts connections again")


@pytest.fixture
def restarter(server: Server) -> Iterator[Restarter]:
    """Redis may be stopped by the test; it runs again afterwards, whatever happened."""
    try:
        subprocess.run(["redis-cli", "--version"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        service_missing("redis-cli", str(e))
    restarter = Restarter()
    try:
        yield restarter
    finally:
        if not answers():
            if port_open():  # stopping, or hung: wait for it to go before starting anew
                wait_for(lambda: not port_open() or answers(), "Redis stopped or answering")
            if not answers():
                restarter.start()


def entries(server: Server, key: str) -> list[tuple[str, bytes]]:
    """The stream as (event_id, event bytes), checking every entry has just those fields."""
    out = []
    for _id, fields in server.xrange(key):
        assert list(fields) == [b"event_id", b"event"]
        out.append((fields[b"event_id"].decode(), fields[b"event"]))
    return out


def expected(deliveries: Sequence[Delivery]) -> list[tuple[str, bytes]]:
    return [(d.event_id, d.body) for d in deliveries]


def with_sequencer(d: Delivery, sequencer: str) -> Delivery:
    event = orjson.loads(d.message)
    event["s3"]["object"]["sequencer"] = sequencer
    return replace(
        d, message=orjson.dumps(event), attributes={**d.attributes, "sequencer": sequencer}
    )


def drain_all(deliverer: Deliverer, queue: RetryQueue, name: str) -> None:
    """Drain (every queued event due) until the target's retry queue is empty."""

    def empty() -> bool:
        deliverer.drain(now_ns=time.time_ns() + 60 * 10**9)
        return queue.length(name) == 0

    wait_for(empty, "the retry queue drained")


def metric(name: str, destination: str) -> float:
    return REGISTRY.get_sample_value(name, {"destination": destination}) or 0.0


# stream ---------------------------------------------------------------------------------


def test_stream_has_every_delivery_in_order_byte_for_byte(
    server: Server, target_for: Callable[..., RedisTarget]
) -> None:
    deliveries = [delivery(f"2026/{n % 7}/ü %2B+.jpg", n=n) for n in range(50)]
    target = target_for()

    assert target.publish(deliveries) == [OK] * 50

    assert entries(server, target.config.key) == expected(deliveries)
    assert (
        orjson.loads(entries(server, target.config.key)[3][1])["Records"][0]["s3"]["object"][
            "sequencer"
        ]
        == deliveries[3].attributes["sequencer"]
    )


def test_batches_go_over_the_one_connection(
    server: Server, target_for: Callable[..., RedisTarget]
) -> None:
    target = target_for()
    before = int(server.info("stats")["total_connections_received"])

    for n in range(5):
        assert target.publish([delivery(n=2 * n), delivery(n=2 * n + 1)]) == [OK, OK]

    assert int(server.info("stats")["total_connections_received"]) - before == 1
    assert len(entries(server, target.config.key)) == 10


def test_a_batch_larger_than_one_pipeline_is_answered_in_order(
    server: Server, target_for: Callable[..., RedisTarget], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ripple.targets.redis._CHUNK", 7)
    deliveries = [delivery(f"k/{n}", n=n) for n in range(30)]

    target = target_for()

    assert target.publish(deliveries) == [OK] * 30
    assert entries(server, target.config.key) == expected(deliveries)


def test_stream_maxlen_trims_approximately(
    server: Server, target_for: Callable[..., RedisTarget]
) -> None:
    deliveries = [delivery(f"k/{n}", n=n) for n in range(1000)]
    target = target_for(maxlen=100)

    for start in range(0, 1000, 250):
        assert target.publish(deliveries[start : start + 250]) == [OK] * 250

    kept = entries(server, target.config.key)
    assert 100 <= len(kept) < 400  # trimmed by whole nodes (`~`): at least maxlen, not all
    assert kept == expected(deliveries[-len(kept) :])  # the newest ones, in order


def test_the_database_comes_from_the_endpoint(
    server: Server, fresh_key: Callable[[str], str]
) -> None:
    key = fresh_key("ripple-test")
    target = from_arguments("t", parse_endpoint(f"redis://127.0.0.1:{PORT}/3"), {"redis-key": key})
    target.open()
    other = client(db=3)
    try:
        assert target.publish([delivery()]) == [OK]
        assert [f[b"event"] for _, f in other.xrange(key)] == [delivery().body]
        assert not server.exists(key)
    finally:
        other.delete(key)
        other.close()
        target.close()


# namespace ------------------------------------------------------------------------------


def test_namespace_keeps_the_latest_event_and_a_delete_removes_the_field(
    server: Server, target_for: Callable[..., RedisTarget]
) -> None:
    target = target_for(format="namespace")
    key = target.config.key
    cat1, cat2 = delivery("2026/cat.jpg", n=1), delivery("2026/cat.jpg", n=2)
    odd = delivery("a%20b%2Bc.txt", n=3)  # as events carry keys: URL-encoded
    dog = delivery("dog.jpg", n=4)
    cat_gone = delivery("2026/cat.jpg", n=5, event_name="ObjectRemoved:Delete")
    dog_marker = delivery("dog.jpg", n=6, event_name="ObjectRemoved:DeleteMarkerCreated")

    assert target.publish([cat1, cat2, odd, dog]) == [OK] * 4
    assert server.hgetall(key) == {
        b"photos/2026/cat.jpg": cat2.body,
        b"photos/a b+c.txt": odd.body,
        b"photos/dog.jpg": dog.body,
    }

    assert target.publish([cat_gone, dog_marker]) == [OK, OK]
    assert server.hgetall(key) == {b"photos/a b+c.txt": odd.body}
    assert server.hgetall(sequencer_key(key)) == {
        b"photos/2026/cat.jpg": cat_gone.attributes["sequencer"].encode(),
        b"photos/a b+c.txt": odd.attributes["sequencer"].encode(),
        b"photos/dog.jpg": dog_marker.attributes["sequencer"].encode(),
    }


def test_namespace_ignores_tagging_events(
    server: Server, target_for: Callable[..., RedisTarget]
) -> None:
    """Tagging changes no object's state: not a deleted key's (it would come back), nor the
    current version's when an older version is tagged."""
    target = target_for(format="namespace")
    key = target.config.key
    put, gone = delivery("k", n=1), delivery("k", n=2, event_name="ObjectRemoved:Delete")
    current = delivery("j", n=3)
    tag_gone = delivery("k", n=4, event_name="ObjectTagging:Put")
    tag_old = delivery("j", n=5, event_name="ObjectTagging:Put")
    assert target.publish([put, gone, current]) == [OK] * 3
    assert target.publish([tag_gone, tag_old]) == [OK, OK]
    assert server.hgetall(key) == {b"photos/j": current.body}


def test_within_a_batch_the_last_event_of_an_object_wins(
    server: Server, target_for: Callable[..., RedisTarget]
) -> None:
    target = target_for(format="namespace")
    put, gone, again = (
        delivery("k", n=1),
        delivery("k", n=2, event_name="ObjectRemoved:Delete"),
        delivery("k", n=3),
    )

    assert target.publish([put, gone, again]) == [OK] * 3
    assert server.hgetall(target.config.key) == {b"photos/k": again.body}

    assert target.publish(
        [delivery("k", n=4), delivery("k", n=5, event_name="ObjectRemoved:Delete")]
    )
    assert server.hgetall(target.config.key) == {}


def test_an_older_event_redelivered_never_overwrites_a_newer_one(
    server: Server, target_for: Callable[..., RedisTarget]
) -> None:
    target = target_for(format="namespace")
    key = target.config.key
    old, new = delivery("k", n=3), delivery("k", n=5)

    assert target.publish([new]) == [OK]
    assert target.publish([old]) == [OK]  # acknowledged: there is nothing to do
    assert server.hget(key, "photos/k") == new.body

    assert target.publish([new]) == [OK]  # the same event again: the same state
    assert server.hget(key, "photos/k") == new.body

    gone = delivery("k", n=7, event_name="ObjectRemoved:Delete")
    assert target.publish([gone, new, old]) == [OK] * 3  # a delete is not undone either
    assert server.hgetall(key) == {}
    assert server.hget(sequencer_key(key), "photos/k") == gone.attributes["sequencer"].encode()

    newest = delivery("k", n=9)
    assert target.publish([newest]) == [OK]
    assert server.hgetall(key) == {b"photos/k": newest.body}


@pytest.mark.parametrize(
    ("stored", "incoming", "applied"),
    [
        ("18EA07F04CD9E11500000000", "18EA07F04CD9E11500000001", True),  # next in a transaction
        ("18EA07F04CD9E11500000001", "18EA07F04CD9E11500000000", False),
        ("18EA07F04CD9E115", "18EA07F04CD9E115", True),  # the same event: applied again
        ("FF", "100", True),  # compared as hexadecimal numbers, not as text
        ("100", "0FF", False),
        ("00ab", "AC", True),  # leading zeros and case do not matter
        ("AC", "00ab", False),
    ],
)
def test_sequencers_compare_as_hexadecimal_numbers(
    server: Server,
    target_for: Callable[..., RedisTarget],
    stored: str,
    incoming: str,
    applied: bool,
) -> None:
    target = target_for(format="namespace")
    first = with_sequencer(delivery("k", n=1), stored)
    second = with_sequencer(delivery("k", n=2), incoming)

    assert target.publish([first, second]) == [OK, OK]

    assert server.hget(target.config.key, "photos/k") == (second if applied else first).body
    held = server.hget(sequencer_key(target.config.key), "photos/k")
    assert held == (incoming if applied else stored).encode()


def test_namespace_refuses_an_event_it_cannot_place(
    server: Server, target_for: Callable[..., RedisTarget]
) -> None:
    target = target_for(format="namespace")
    good = delivery("good", n=1)
    event = event_record("bad", n=2)
    del event["s3"]["object"]["sequencer"]
    no_sequencer = Delivery.of("bad-2", event)
    not_hex = with_sequencer(delivery("worse", n=3), "12XY")

    results = target.publish([no_sequencer, good, not_hex])

    assert [r.outcome for r in results] == [Outcome.PERMANENT, Outcome.OK, Outcome.PERMANENT]
    assert results[0].error == "not an S3 event record (KeyError: 'sequencer')"
    assert results[2].error == "sequencer '12XY' is not hexadecimal"
    assert server.hgetall(target.config.key) == {b"photos/good": good.body}


def test_the_script_is_loaded_again_when_the_server_lost_it(
    server: Server, target_for: Callable[..., RedisTarget]
) -> None:
    target = target_for(format="namespace")
    assert target.publish([delivery("k", n=1)]) == [OK]
    server.script_flush()

    assert target.publish([delivery("k", n=2)]) == [OK]
    assert server.hget(target.config.key, "photos/k") == delivery("k", n=2).body


# outcomes -------------------------------------------------------------------------------


def test_a_key_of_another_type_is_permanent(
    server: Server, target_for: Callable[..., RedisTarget]
) -> None:
    target = target_for()
    server.set(target.config.key, "not a stream")

    results = target.publish([delivery(n=1), delivery(n=2)])

    error = (
        "WRONGTYPE Operation against a key holding the wrong kind of value "
        f"(redis://127.0.0.1:{PORT}/{DB})"
    )
    assert results == [Result(Outcome.PERMANENT, error)] * 2


def test_a_full_server_is_retry(server: Server, target_for: Callable[..., RedisTarget]) -> None:
    target = target_for()
    policy = server.config_get("maxmemory-policy")["maxmemory-policy"]
    server.config_set("maxmemory-policy", "noeviction")
    server.config_set("maxmemory", "1")
    try:
        results = target.publish([delivery(n=1), delivery(n=2)])
    finally:
        server.config_set("maxmemory", "0")
        server.config_set("maxmemory-policy", policy)

    assert [r.outcome for r in results] == [Outcome.RETRY] * 2
    assert results[0].error is not None
    assert results[0].error.startswith("OOM command not allowed")
    assert target.publish([delivery(n=1)]) == [OK]


def test_a_connection_the_server_dropped_is_replaced_without_a_failure(
    server: Server, target_for: Callable[..., RedisTarget]
) -> None:
    target = target_for()
    assert target.publish([delivery(n=1)]) == [OK]
    assert target._client is not None
    connection_id = target._client.client_id()  # the pool's one connection
    before = int(server.info("stats")["total_connections_received"])

    assert server.client_kill_filter(_id=connection_id) == 1

    assert target.publish([delivery(n=2)]) == [OK]
    assert int(server.info("stats")["total_connections_received"]) - before == 1
    assert entries(server, target.config.key) == expected([delivery(n=1), delivery(n=2)])


def test_connection_refused_is_retry(target_for: Callable[..., RedisTarget]) -> None:
    with socket.socket() as bound:  # bound but not listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]

        results = target_for(port=port).publish([delivery(n=1), delivery(n=2)])

    assert results == [Result(Outcome.RETRY, f"connection refused: redis://127.0.0.1:{port}/0")] * 2


def test_a_silent_server_is_retry_after_the_timeout(
    target_for: Callable[..., RedisTarget],
) -> None:
    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]

        results = target_for(port=port, timeout_s=0.2).publish([delivery(n=1), delivery(n=2)])

    assert (
        results == [Result(Outcome.RETRY, f"timed out after 0.2s: redis://127.0.0.1:{port}/0")] * 2
    )


def test_a_wrong_password_is_permanent(target_for: Callable[..., RedisTarget]) -> None:
    target = target_for(username="nobody", password="wrong")

    (result,) = target.publish([delivery()])

    assert result.outcome is Outcome.PERMANENT
    assert result.error is not None
    assert result.error.startswith(f"authentication refused by redis://127.0.0.1:{PORT}/{DB}: ")
    assert "WRONGPASS" in result.error
    assert "wrong" not in repr(target.config)


def test_publish_before_open_is_a_bug() -> None:
    with pytest.raises(RuntimeError, match="open"):
        RedisTarget(RedisConfig(key="k")).publish([delivery()])


def test_open_and_close_are_idempotent(target_for: Callable[..., RedisTarget]) -> None:
    target = target_for()
    client = target._client
    target.open()
    assert target._client is client
    target.close()
    target.close()
    assert target._client is None


# restarts -------------------------------------------------------------------------------


def test_a_restart_answers_retry_then_the_target_reconnects_by_itself(
    server: Server, restarter: Restarter, target_for: Callable[..., RedisTarget]
) -> None:
    target = target_for(timeout_s=2.0)
    assert target.publish([delivery(n=1)]) == [OK]  # connected

    restarter.stop()
    down = target.publish([delivery(n=2), delivery(n=3)])
    assert down == [Result(Outcome.RETRY, f"connection refused: redis://127.0.0.1:{PORT}/{DB}")] * 2

    restarter.start()
    after = [delivery(n=4), delivery(n=5)]
    assert target.publish(after) == [OK, OK]
    assert entries(server, target.config.key) == expected(after)  # a restart empties Redis


def test_events_failing_during_a_restart_are_queued_then_delivered(
    db: Metabase, server: Server, restarter: Restarter, target_for: Callable[..., RedisTarget]
) -> None:
    target = target_for(timeout_s=2.0)
    name, key = target.name, target.config.key
    queue = RetryQueue(db.writer)
    policy = RetryPolicy(attempts_in_batch=2, base_delay_s=0.01, max_delay_s=0.05)
    deliverer = Deliverer({"topic": [target]}, queue, default_policy=policy, seed=1)
    batches = [
        [delivery(f"k/{b}/{n}", n=10 * b + n) for n in range(size)]
        for b, size in enumerate([5, 10, 4, 6])
    ]
    try:
        deliverer.deliver({"topic": batches[0]})
        assert entries(server, key) == expected(batches[0])
        failed_before = metric("ripple_push_fail_total", name)

        restarter.stop()
        deliverer.deliver({"topic": batches[1]})  # tried twice, refused: queued
        assert queue.length(name) == 10
        assert metric("ripple_push_fail_total", name) - failed_before == 2 * 10
        assert metric("ripple_retry_queue_length", name) == 10
        deliverer.deliver({"topic": batches[2]})  # behind the queue, not tried
        assert queue.length(name) == 14
        assert metric("ripple_push_fail_total", name) - failed_before == 2 * 10

        restarter.start()
        drain_all(deliverer, queue, name)
        assert metric("ripple_retry_queue_length", name) == 0
        assert queue.dead_count(name) == 0
        assert entries(server, key) == expected(batches[1] + batches[2])

        deliverer.deliver({"topic": batches[3]})  # healthy again: straight to Redis
        assert entries(server, key) == expected(batches[1] + batches[2] + batches[3])
        assert queue.length(name) == 0
    finally:
        deliverer.close()


class Recording:
    """A target's stand-in that remembers when each publish began and what it answered."""

    def __init__(self, target: RedisTarget) -> None:
        self.target = target
        self.name = target.name
        self.calls: list[tuple[float, list[Delivery], list[Result]]] = []

    def open(self) -> None:
        self.target.open()

    def close(self) -> None:
        self.target.close()

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]:
        began = time.monotonic()
        results = self.target.publish(deliveries)
        self.calls.append((began, list(deliveries), results))
        return results


def test_a_restart_during_continuous_delivery_loses_nothing_unacknowledged(
    db: Metabase, server: Server, restarter: Restarter, target_for: Callable[..., RedisTarget]
) -> None:
    recording = Recording(target_for(timeout_s=2.0))
    name, key = recording.name, recording.target.config.key
    queue = RetryQueue(db.writer)
    policy = RetryPolicy(attempts_in_batch=2, base_delay_s=0.005, max_delay_s=0.02)
    deliverer = Deliverer({"topic": [recording]}, queue, default_policy=policy, seed=2)
    sent: list[Delivery] = []
    batches_done = [0]
    stop = threading.Event()
    errors: list[BaseException] = []

    def feed() -> None:  # the pipeline's loop: a batch, then the retry queue's due events
        try:
            while not stop.is_set() and batches_done[0] < 2000:
                b = batches_done[0]
                batch = [delivery(f"k/{b}/{n}", n=10 * b + n) for n in range(10)]
                sent.extend(batch)
                deliverer.deliver({"topic": batch})
                deliverer.drain(now_ns=time.time_ns() + 60 * 10**9)
                batches_done[0] += 1
        except BaseException as e:
            errors.append(e)

    feeder = threading.Thread(target=feed, name="feeder")
    feeder.start()
    try:
        try:
            wait_for(lambda: batches_done[0] >= 10, "ten batches delivered")
            restarter.stop()
            closed_at = time.monotonic()
            wait_for(lambda: queue.length(name) >= 30, "three batches queued during the outage")
            restarter.start()
            resumed = batches_done[0]
            wait_for(lambda: batches_done[0] >= resumed + 10, "ten batches after the restart")
        finally:
            stop.set()
            feeder.join(60)
        assert not feeder.is_alive()
        assert errors == []
        drain_all(deliverer, queue, name)
    finally:
        deliverer.close()

    acked = {
        d.event_id for _, ds, rs in recording.calls for d, r in zip(ds, rs, strict=True) if r.ok
    }
    assert acked == {d.event_id for d in sent}  # everything acknowledged in the end
    # What the old server acknowledged went with it; everything else is in the new one, once.
    acked_before = {
        d.event_id
        for began, ds, rs in recording.calls
        if began < closed_at
        for d, r in zip(ds, rs, strict=True)
        if r.ok
    }
    # Not necessarily in the order sent: an event that failed again in a drain is due later
    # than events queued after it, so the queue does not drain strictly first-in first-out.
    unacknowledged = [d for d in sent if d.event_id not in acked_before]
    assert len(acked_before) >= 100  # ten batches before the outage
    assert len(unacknowledged) >= 30 + 100  # three batches queued, ten after the restart
    assert sorted(entries(server, key)) == sorted(expected(unacknowledged))
    assert metric("ripple_push_fail_total", name) >= 30
    assert metric("ripple_retry_queue_length", name) == 0
    assert queue.dead_count(name) == 0


# from_arguments -------------------------------------------------------------------------


def test_from_arguments() -> None:
    target = from_arguments(
        "events",
        parse_endpoint("redis://ripple:s3cr%40t@10.0.0.7:6380/4"),
        {"redis-key": "bucketevents", "redis-maxlen": "5000", "timeout": "2.5"},
    )

    assert target.name == "events"
    assert target.config == RedisConfig(
        key="bucketevents",
        format="stream",
        maxlen=5000,
        host="10.0.0.7",
        port=6380,
        db=4,
        username="ripple",
        password="s3cr@t",
        timeout_s=2.5,
    )
    assert "s3cr" not in repr(target.config)


def test_from_arguments_defaults() -> None:
    target = from_arguments(
        "ns",
        parse_endpoint("redis://:pw@127.0.0.1"),
        {"redis-key": "k", "redis-format": "namespace"},
    )

    assert target.config == RedisConfig(key="k", format="namespace", password="pw")
    assert (target.config.maxlen, target.config.timeout_s, target.config.db) == (100_000, 5.0, 0)
    assert target.config.username is None
    plain = from_arguments("s", parse_endpoint("redis://127.0.0.1"), {"redis-key": "k"}).config
    assert (plain.format, plain.password) == ("stream", None)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "argument 'redis-key' is required"),
        ({"redis-key": ""}, "argument 'redis-key' must not be empty"),
        (
            {"redis-key": "k", "redis-format": "access"},
            "argument 'redis-format' must be one of stream, namespace, not 'access'",
        ),
        (
            {"redis-key": "k", "redis-maxlen": "0"},
            "argument 'redis-maxlen' must be a whole number above zero",
        ),
        (
            {"redis-key": "k", "redis-maxlen": "1.5"},
            "argument 'redis-maxlen' must be a whole number",
        ),
        (
            {"redis-key": "k", "redis-maxlen": "lots"},
            "argument 'redis-maxlen' must be a whole number above zero",
        ),
        (
            {"redis-key": "k", "redis-format": "namespace", "redis-maxlen": "10"},
            "argument 'redis-maxlen' applies only to redis-format=stream",
        ),
        (
            {"redis-key": "k", "timeout": "0"},
            "argument 'timeout' must be a number of seconds above zero",
        ),
        (
            {"redis-key": "k", "timeout": "soon"},
            "argument 'timeout' must be a number of seconds above zero",
        ),
        (
            {"redis-key": "k", "redis-db": "2"},
            "unknown argument 'redis-db'; "
            "expected one of redis-key, redis-format, redis-maxlen, timeout",
        ),
    ],
)
def test_from_arguments_errors_name_the_argument(arguments: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as raised:
        from_arguments("t", parse_endpoint("redis://127.0.0.1"), arguments)

    assert str(raised.value).startswith("Redis topic 't': ")
    assert "\n" not in str(raised.value)


def test_from_arguments_wants_a_redis_endpoint() -> None:
    with pytest.raises(
        ValueError, match=r"Redis topic 't': endpoint 'nats://127.0.0.1' is not redis://"
    ):
        from_arguments("t", parse_endpoint("nats://127.0.0.1"), {"redis-key": "k"})
