"""The per-key ordering guarantee as a property, on SQLite and PostgreSQL: over random
failure schedules (each attempt answered ok, retry, refused for good, or received but
answered as failed), interleaving batches, re-runs of a batch (a crash), drains, dead-letter
replays and restarts (a new Deliverer and RetryQueue over the same database), each key's
events as the destination received them, with repeats of an already received event removed,
are in sequencer order, and once the destination is well and the dead letters are
replayed, every event has arrived."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ripple.metabase import Metabase
from ripple.pipeline.deliver import Deliverer
from ripple.pipeline.ordering import sequence_key
from ripple.pipeline.queue import RetryQueue
from ripple.pipeline.schema import dead_letters, delivery_retries
from ripple.targets.base import OK, Delivery, Outcome, Result
from ripple.targets.retry import RetryPolicy
from tests.pipeline.fakes import each_key_once
from tests.pipeline.helpers import event

KEYS = ("a", "b", "c", "d")
POLICY = RetryPolicy(
    attempts_in_batch=2,
    base_delay_s=0.001,
    max_delay_s=0.002,
    max_retries=3,  # so the drain buries events too
    per_key_order=True,
)
# each attempt's answer, in turn; once the schedule is used up, every attempt is ok
ANSWERS = ("ok", "retry", "refused", "received-but-failed")
STEP_NS = 10**9  # a drain's step of the clock: past every backoff (POLICY's are 2 ms at most)


class Clock:
    """The drains' clock, one for all the runs over a database, as real time is for two
    workers: a drain schedules a failed event's next attempt by its clock, so a run whose
    clock lagged behind another's would find that event not due, however often it drained.
    It starts an hour ahead, so every queued event is due, and stays within the
    time-to-live (only `age` goes past it): past it, a drain would bury events, and a
    clock held still at a cap would find the next attempts it schedules never due."""

    def __init__(self) -> None:
        self.now_ns = time.time_ns() + 3600 * 10**9
        self.cap_ns = self.now_ns + int(POLICY.time_to_live_s * 1e9) // 2
        self.lock = threading.Lock()

    def advance(self) -> int:
        """The time of the next drain."""
        with self.lock:
            if self.now_ns + STEP_NS > self.cap_ns:
                raise AssertionError("the drains' clock would pass the time-to-live")
            self.now_ns += STEP_NS
            return self.now_ns


class ScheduledTarget:
    """Answers the attempts as `schedule` says; records what the destination received."""

    name = "hook"

    def __init__(self, schedule: Sequence[str]) -> None:
        self.schedule = list(schedule)
        self.received: list[Delivery] = []
        self.lock = threading.Lock()

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]:
        results = []
        with self.lock:
            for d in deliveries:
                answer = self.schedule.pop(0) if self.schedule else "ok"
                if answer in ("ok", "received-but-failed"):
                    self.received.append(d)
                results.append(
                    {
                        "ok": OK,
                        "retry": Result(Outcome.RETRY, "HTTP 503"),
                        "refused": Result(Outcome.PERMANENT, "HTTP 404"),
                        "received-but-failed": Result(Outcome.RETRY, "timed out"),
                    }[answer]
                )
        return results


batches = st.lists(st.sampled_from(KEYS), min_size=1, max_size=6).map(lambda ks: ("batch", ks))
steps = st.lists(
    st.one_of(
        batches,
        st.sampled_from([("rerun",), ("drain",), ("replay",), ("restart",), ("purge",), ("age",)]),
    ),
    min_size=1,
    max_size=25,
)


class Run:
    """A pipeline's delivery to one destination, step by step, over one database."""

    def __init__(
        self, engine: sa.Engine, target: ScheduledTarget, first: int = 0, clock: Clock | None = None
    ) -> None:
        self.engine = engine
        self.target = target
        self.first = first  # the first event's number: its sequencer's length grows past 0xF
        self.made: list[Delivery] = []
        self.last: list[Delivery] = []
        self.purged: set[str] = set()
        self.clock = clock or Clock()
        self.restart()

    def restart(self) -> None:
        self.queue = RetryQueue(self.engine)
        self.deliverer = Deliverer(
            {"topic": [self.target]}, self.queue, {"hook": POLICY}, sleep=lambda _s: None, seed=7
        )

    def step(self, step: tuple[Any, ...]) -> None:
        match step:
            case ("batch", keys):
                n = self.first + len(self.made)
                self.last = [event(k, n + i, width=0) for i, k in enumerate(keys)]
                self.made.extend(self.last)
                self.deliverer.deliver({"topic": self.last})
            case ("rerun",):  # a crash before the offsets were stored: the batch again
                self.deliverer.deliver({"topic": self.last})
            case ("drain",):
                self.deliverer.drain(now_ns=self.clock.advance())
            case ("age",):  # one drain past every queued event's time-to-live
                past = self.clock.now_ns + int(POLICY.time_to_live_s * 1e9) + 3600 * 10**9
                self.deliverer.drain(now_ns=past)
            case ("replay",):
                self.queue.replay("hook")
            case ("purge",):  # an operator gives up on the dead letters (after the batch)
                self.purged.update(q.event_id for q in self.queue.dead("hook", limit=10**6))
                self.queue.purge("hook")
                self.last = []
            case ("restart",):
                self.restart()

    def finish(self) -> None:
        """The destination well again: replay and drain until nothing waits."""
        self.target.schedule.clear()
        for _ in range(20):
            self.queue.replay("hook")
            self.step(("drain",))
            if self.queue.length() == 0 and self.queue.dead_count() == 0:
                return
        raise AssertionError(f"{self.queue.length()} queued, {self.queue.dead_count()} dead")

    def expected(self) -> dict[str, list[str]]:
        """Each key's sequencers as made: what the destination must have received in the
        end, but for purged events it never received."""
        received = {d.event_id for d in self.target.received}
        return each_key_once(
            (d.attributes["key"], d.attributes["sequencer"])
            for d in self.made
            if d.event_id not in self.purged or d.event_id in received
        )


def received_per_key(received: Sequence[Delivery]) -> dict[str, list[str]]:
    """Each key's events as received, repeats of an already received one removed."""
    return each_key_once((d.attributes["key"], d.attributes["sequencer"]) for d in received)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=steps,
    schedule=st.lists(st.sampled_from(ANSWERS), max_size=60),
    first=st.sampled_from([0, 10, 250, 4090]),  # so sequencers grow a digit mid-run
)
def test_each_keys_events_arrive_in_sequencer_order_and_none_is_lost(
    db: Metabase, steps: list[tuple[Any, ...]], schedule: list[str], first: int
) -> None:
    with db.writer.begin() as conn:  # every example starts with empty queues
        conn.execute(sa.delete(delivery_retries))
        conn.execute(sa.delete(dead_letters))
    target = ScheduledTarget(schedule)
    run = Run(db.writer, target, first)
    for step in steps:
        run.step(step)
        for key, sequencers in received_per_key(target.received).items():
            in_order = sorted(sequencers, key=sequence_key)
            assert sequencers == in_order, f"{key}'s events out of order after {step}"
    run.finish()
    assert received_per_key(target.received) == run.expected()


def test_order_holds_while_a_drain_runs_beside_the_batches(db: Metabase) -> None:
    """Batches in one thread and drains in another, each with its own Deliverer and queue
    over the database (as a Spark task and the drain task in two Python workers), and one
    clock, against a destination that fails at random: each key's events still arrive in
    order."""
    import random

    rng = random.Random(27)
    schedule = [rng.choice(ANSWERS[:2] + ANSWERS[3:]) for _ in range(400)]
    target = ScheduledTarget(schedule)
    batches = Run(db.writer, target)
    drains = Run(db.writer, target, clock=batches.clock)
    done = threading.Event()
    errors: list[BaseException] = []

    def drain() -> None:
        try:
            while not done.is_set():
                drains.step(("drain",))
        except BaseException as e:
            errors.append(e)

    drainer = threading.Thread(target=drain)
    drainer.start()
    try:
        for n in range(60):
            keys = [rng.choice(KEYS) for _ in range(rng.randint(1, 6))]
            batches.step(("batch", keys))
            if n % 7 == 6:
                batches.step(("rerun",))
    finally:
        done.set()
        drainer.join()
    assert errors == []
    batches.finish()
    assert received_per_key(target.received) == batches.expected()
