"""Delivery without Spark: in-batch retries, the durable retry queue, dead letters, and one
destination that is down costing the others nothing (on both databases)."""

from __future__ import annotations

import threading
import time

import pytest

from ripple.metabase import Metabase
from ripple.pipeline.deliver import Deliverer
from ripple.pipeline.queue import RetryQueue
from ripple.targets.base import OK, Delivery, Outcome, Result
from ripple.targets.retry import RetryPolicy
from tests.pipeline.fakes import RecordingTarget, delivery

RETRY = Result(Outcome.RETRY, "HTTP 503 from the test")
REFUSED = Result(Outcome.PERMANENT, "HTTP 404 from the test")
FAST = RetryPolicy(attempts_in_batch=3, base_delay_s=0.001, max_delay_s=0.002)


def soon(seconds: float = 10.0) -> int:
    """A time a little ahead: every queued event is due, none has outlived its TTL."""
    return time.time_ns() + int(seconds * 1e9)


@pytest.fixture
def queue(db: Metabase) -> RetryQueue:
    return RetryQueue(db.writer)


def deliverer(queue: RetryQueue, *targets: RecordingTarget, **kw: object) -> Deliverer:
    sleeps: list[float] = []
    d = Deliverer(
        {"topic": list(targets)}, queue, default_policy=FAST, sleep=sleeps.append, seed=1, **kw
    )  # type: ignore[arg-type]
    d.sleeps = sleeps  # type: ignore[attr-defined]
    return d


def ids(deliveries: list[Delivery]) -> list[str]:
    return [d.event_id for d in deliveries]


def test_every_event_is_acknowledged_once_when_all_is_well(queue: RetryQueue) -> None:
    target = RecordingTarget("hook")
    events = [delivery(i) for i in range(10)]
    deliverer(queue, target).deliver({"topic": events})
    assert target.acked_ids() == ids(events)
    assert len(target.calls) == 1
    assert queue.length() == 0


def test_a_failure_is_retried_within_the_batch_with_growing_backoff(queue: RetryQueue) -> None:
    # every odd event fails on the first two calls, then succeeds
    def answer(d: Delivery, call: int) -> Result:
        return RETRY if int(d.event["s3"]["object"]["key"][1:]) % 2 and call < 3 else OK

    target = RecordingTarget("hook", answer)
    d = deliverer(queue, target)
    events = [delivery(i) for i in range(6)]
    d.deliver({"topic": events})
    assert sorted(target.acked_ids()) == sorted(ids(events))
    assert [len(c) for c in target.calls] == [6, 3, 3]  # only the failed ones again
    first, second = d.sleeps  # type: ignore[attr-defined]
    assert 0 < first <= 0.001 < second <= 0.002
    assert queue.length() == 0


def test_what_still_fails_is_queued_and_the_batch_completes(queue: RetryQueue) -> None:
    down = RecordingTarget("down", lambda _d, _n: RETRY)
    healthy = RecordingTarget("healthy")
    d = deliverer(queue, down, healthy)
    events = [delivery(i) for i in range(5)]
    d.deliver({"topic": events})
    assert healthy.acked_ids() == ids(events)  # the other destination got everything
    assert len(down.calls) == FAST.attempts_in_batch
    assert queue.length("down") == 5
    assert queue.length("healthy") == 0
    queued = queue.due("down", now_ns=soon())
    assert [q.event_id for q in queued] == ids(events)
    assert queued[0].error == "HTTP 503 from the test"
    assert queued[0].event == events[0].event

    # while its queue is not empty, new events go behind it without an attempt
    more = [delivery(i) for i in range(5, 8)]
    d.deliver({"topic": more})
    assert len(down.calls) == FAST.attempts_in_batch
    assert healthy.acked_ids() == ids(events + more)
    assert queue.length("down") == 8


def test_the_queue_drains_when_the_destination_recovers(queue: RetryQueue) -> None:
    state = {"up": False}
    target = RecordingTarget("flaky", lambda _d, _n: OK if state["up"] else RETRY)
    d = deliverer(queue, target)
    events = [delivery(i) for i in range(4)]
    d.deliver({"topic": events})
    assert d.drain(now_ns=soon()) == 0  # still down: attempts counted
    assert {q.attempts for q in queue.due("flaky", soon(60))} == {2}
    state["up"] = True
    assert d.drain(now_ns=soon()) == 4
    assert queue.length() == 0
    assert target.acked_ids() == ids(events)
    # healthy again: the next batch is attempted directly
    calls = len(target.calls)
    d.deliver({"topic": [delivery(9)]})
    assert len(target.calls) == calls + 1
    assert queue.length() == 0


def test_a_recovered_destination_catches_up_page_after_page(queue: RetryQueue) -> None:
    """drain_for keeps draining while pages are delivered, not one page per interval."""
    state = {"up": False}
    target = RecordingTarget("flaky", lambda _d, _n: OK if state["up"] else RETRY)
    d = deliverer(queue, target)
    events = [delivery(i) for i in range(25)]
    d.deliver({"topic": events})
    state["up"] = True
    deadline = time.monotonic() + 5
    while len(queue.due("flaky", time.time_ns())) < 25:  # their first backoff is 1-2 ms
        assert time.monotonic() < deadline, "the queued events never came due"
        time.sleep(0.001)
    assert d.drain_for(10.0, limit=10) == 25
    assert [len(c) for c in target.calls[-3:]] == [10, 10, 5]
    assert queue.length() == 0
    assert sorted(target.acked_ids()) == sorted(ids(events))


def test_the_queue_survives_a_new_deliverer(queue: RetryQueue) -> None:
    """The queue is durable: a restarted pipeline finds it and drains it."""
    deliverer(queue, RecordingTarget("hook", lambda _d, _n: RETRY)).deliver(
        {"topic": [delivery(1), delivery(2)]}
    )
    recovered = RecordingTarget("hook")
    assert deliverer(queue, recovered).drain(now_ns=soon()) == 2
    assert recovered.acked_ids() == ids([delivery(1), delivery(2)])


def test_a_refusal_goes_to_the_dead_letters_at_once(queue: RetryQueue) -> None:
    target = RecordingTarget("hook", lambda d, _n: REFUSED if d.event_id.endswith("1") else OK)
    deliverer(queue, target).deliver({"topic": [delivery(0), delivery(1)]})
    assert len(target.calls) == 1
    [dead] = queue.dead("hook")
    assert (dead.event_id, dead.error, dead.attempts) == (delivery(1).event_id, REFUSED.error, 1)
    assert queue.length() == 0


@pytest.mark.parametrize("limit", ["ttl", "retries"])
def test_past_its_limit_a_queued_event_goes_to_the_dead_letters(
    queue: RetryQueue, limit: str
) -> None:
    policy = (
        RetryPolicy(attempts_in_batch=1, time_to_live_s=1.0)
        if limit == "ttl"
        else RetryPolicy(attempts_in_batch=1, max_retries=2)
    )
    target = RecordingTarget("hook", lambda _d, _n: RETRY)
    d = Deliverer({"topic": [target]}, queue, {"hook": policy}, sleep=lambda _s: None)
    d.deliver({"topic": [delivery(1)]})
    [queued] = queue.due("hook", soon())
    later = queued.first_failed_ns + 2_000_000_000
    if limit == "retries":
        d.drain(now_ns=later)  # attempt 2 fails: the limit is reached
        assert queue.length() == 1
        later += 10**10
    d.drain(now_ns=later)
    assert queue.length() == 0
    [dead] = queue.dead("hook")
    assert dead.error.startswith("expired after")

    # replay puts it back, due now, and a recovered destination gets it
    assert queue.replay("hook") == 1
    assert queue.dead() == []
    assert queue.length("hook") == 1
    target.answer = lambda _d, _n: OK
    d.drain()
    assert target.acked_ids()[-1] == delivery(1).event_id


def test_a_destination_that_is_not_persistent_buries_instead_of_queueing(
    queue: RetryQueue,
) -> None:
    """`persistent=false`: no retry queue; what the batch cannot deliver is a dead letter."""
    down = RecordingTarget("down", lambda _d, _n: RETRY)
    policy = RetryPolicy(attempts_in_batch=2, base_delay_s=0.001, persistent=False)
    d = deliverer(queue, down, policies={"down": policy})
    events = [delivery(i) for i in range(3)]
    d.deliver({"topic": events})
    assert len(down.calls) == 2
    assert queue.length("down") == 0
    letters = queue.dead("down")
    assert [letter.event_id for letter in letters] == ids(events)
    assert letters[0].error == "not persistent: HTTP 503 from the test"
    # nothing is queued, so the next batch is tried at once
    d.deliver({"topic": [delivery(9)]})
    assert len(down.calls) == 4


def test_destinations_a_reconfigure_adds_are_delivered_to_side_by_side(
    queue: RetryQueue,
) -> None:
    """Each destination gets a thread of its own, also those added after the deliverer was
    made: here no destination can finish until all three have started."""
    all_started = threading.Barrier(3, timeout=5)

    def meet(_d: Delivery, _call: int) -> Result:
        all_started.wait()
        return OK

    first = RecordingTarget("first", meet)
    d = deliverer(queue, first)
    added = [RecordingTarget(name, meet) for name in ("second", "third")]
    d.reconfigure({"topic": [first, *added]}, {})
    event = delivery(0)
    d.deliver({"topic": [event]})
    d.close()
    assert [t.acked_ids() for t in (first, *added)] == [[event.event_id]] * 3
