"""Per-key ordering through a real webhook: a receiver on 127.0.0.1 that is down for one
key, then for all, then well again gets each key's events in sequencer order, while keys
that were not held kept flowing (on SQLite and PostgreSQL, whose queues hold the keys)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import orjson
import pytest

from ripple.metabase import Metabase
from ripple.notifications.topics import Topic
from ripple.pipeline.deliver import Deliverer
from ripple.pipeline.queue import RetryQueue
from ripple.targets.base import Delivery
from ripple.targets.destinations import policy_of, push_target
from tests.pipeline.fakes import each_key_once
from tests.targets.conftest import delivery
from tests.targets.webhook_server import HookServer, Request


class Receiver(HookServer):
    """A webhook receiver that answers 503 while it is down (for everything, or for the keys
    in `down_for`), and records the events it took (answered 200), in arrival order."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.down_for: set[str] = set()
        self.took: list[tuple[str, str]] = []  # (key, sequencer)
        self.took_lock = threading.Lock()
        self.respond = self._respond

    def _respond(self, request: Request) -> int:
        obj = orjson.loads(request.body)["Records"][0]["s3"]["object"]
        if self.down or obj["key"] in self.down_for:
            return 503
        with self.took_lock:
            self.took.append((obj["key"], obj["sequencer"]))
        return 200

    def keys_took(self) -> dict[str, list[str]]:
        """Each key's sequencers as taken, repeats of one already taken removed."""
        with self.took_lock:
            return each_key_once(self.took)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


def test_a_webhook_gets_each_keys_events_in_order_across_an_outage(
    db: Metabase, receiver: Receiver
) -> None:
    topic = Topic("hook", receiver.url, {"ordering": "per-key", "retry-sleep-duration": "0.001"})
    target = push_target(topic)
    assert target is not None
    deliverer = Deliverer(
        {"hook": [target]}, RetryQueue(db.writer), {target.name: policy_of(topic)}
    )
    deliverer.open()
    made: dict[str, list[str]] = {}
    n = 0

    def batch(*keys: str) -> None:
        nonlocal n
        deliveries: list[Delivery] = []
        for key in keys:
            n += 1
            d = delivery(key, n=n)
            made.setdefault(key, []).append(d.attributes["sequencer"])
            deliveries.append(d)
        deliverer.deliver({"hook": deliveries})

    try:
        receiver.down_for = {"a.jpg"}  # one key's events fail
        batch("a.jpg", "b.jpg", "a.jpg", "b.jpg", "a.jpg")
        assert receiver.keys_took() == {"b.jpg": made["b.jpg"]}  # b flowed past a
        receiver.down = True  # then everything
        batch("b.jpg", "c.jpg", "a.jpg")
        receiver.down = False  # the outage ends: a is still held by its queued events
        receiver.down_for = set()
        batch("a.jpg", "d.jpg", "c.jpg")
        took = receiver.keys_took()
        assert "a.jpg" not in took
        assert took["d.jpg"] == made["d.jpg"]
        for _ in range(10):  # each drain sends every key's queued events, heads first
            if deliverer.drain(now_ns=time.time_ns() + 120 * 10**9) == 0:
                break
        assert receiver.keys_took() == made  # every event, each key's in sequencer order
    finally:
        deliverer.close()
