"""Per-key ordered delivery (`ordering = per-key`) without Spark, on both databases: a key
with queued or dead events is held while other keys flow, a batch sends a key's events in
waves, the drain sends each key's head only, dead letters hold their key until replayed or
purged, and all of it holds for a new Deliverer over the same database."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import sqlalchemy as sa

from ripple.metabase import Metabase
from ripple.notifications.topics import Topic
from ripple.pipeline.deliver import Deliverer
from ripple.pipeline.queue import RetryQueue, object_of
from ripple.targets.base import OK, Delivery, Outcome, Result
from ripple.targets.destinations import policy_of, push_target
from ripple.targets.retry import RetryPolicy
from tests.pipeline.fakes import RecordingTarget
from tests.pipeline.helpers import event

RETRY = Result(Outcome.RETRY, "HTTP 503 from the test")
REFUSED = Result(Outcome.PERMANENT, "HTTP 404 from the test")
IN_ORDER = RetryPolicy(
    attempts_in_batch=2, base_delay_s=0.001, max_delay_s=0.002, per_key_order=True
)


def soon(seconds: float = 10.0) -> int:
    """A time a little ahead: every queued event is due, none has outlived its TTL."""
    return time.time_ns() + int(seconds * 1e9)


def names(deliveries: list[Delivery]) -> list[str]:
    return [d.event_id for d in deliveries]


def failing(*event_ids: str, answer: Result = RETRY) -> Callable[[Delivery, int], Result]:
    return lambda d, _n: answer if d.event_id in event_ids else OK


def keys_failing(*keys: str) -> Callable[[Delivery, int], Result]:
    return lambda d, _n: RETRY if d.attributes["key"] in keys else OK


@pytest.fixture
def queue(db: Metabase) -> RetryQueue:
    return RetryQueue(db.writer)


def ordered(
    queue: RetryQueue, target: RecordingTarget, policy: RetryPolicy = IN_ORDER
) -> Deliverer:
    return Deliverer({"topic": [target]}, queue, {target.name: policy}, sleep=lambda _s: None)


def test_a_failing_keys_later_events_queue_behind_it_while_other_keys_are_delivered(
    queue: RetryQueue,
) -> None:
    target = RecordingTarget("hook", keys_failing("a"))
    d = ordered(queue, target)
    d.deliver({"topic": [event("a", 1), event("b", 2), event("a", 3), event("c", 4)]})
    assert target.acked_ids() == ["b-2", "c-4"]
    assert [q.event_id for q in queue.due("hook", soon())] == ["a-1", "a-3"]
    # a-3 was never tried: a key has one event in flight, and a-1 did not go
    assert all("a-3" not in names(call) for call in target.calls)

    # the next batch: a is held, so its new event is queued untried; b flows
    target.answer = lambda _d, _n: OK
    calls = len(target.calls)
    d.deliver({"topic": [event("a", 5), event("b", 6)]})
    assert names(target.calls[calls]) == ["b-6"]
    assert [q.event_id for q in queue.due("hook", soon())] == ["a-1", "a-3", "a-5"]


def test_a_batch_sends_a_keys_events_in_waves(queue: RetryQueue) -> None:
    target = RecordingTarget("hook")
    ordered(queue, target).deliver(
        {"topic": [event("a", 1), event("b", 2), event("a", 3), event("a", 4), event("b", 5)]}
    )
    assert [names(c) for c in target.calls] == [["a-1", "b-2"], ["a-3", "b-5"], ["a-4"]]


def test_ordering_off_sends_the_batch_at_once(queue: RetryQueue) -> None:
    target = RecordingTarget("hook", keys_failing("a"))
    d = ordered(queue, target, RetryPolicy(attempts_in_batch=1))
    d.deliver({"topic": [event("a", 1), event("a", 2), event("b", 3)]})
    assert [names(c) for c in target.calls] == [["a-1", "a-2", "b-3"]]
    # the destination is failing as a whole: b's next event goes behind the queue untried
    d.deliver({"topic": [event("b", 4)]})
    assert len(target.calls) == 1


def test_the_drain_sends_each_keys_events_one_at_a_time_in_sequencer_order(
    queue: RetryQueue,
) -> None:
    target = RecordingTarget("hook", lambda _d, _n: RETRY)
    d = ordered(queue, target)
    d.deliver({"topic": [event("a", 1), event("b", 2), event("a", 3), event("a", 4)]})
    # replayed or re-run events can be queued after later ones: the sequencer decides
    d.deliver({"topic": [event("b", 0)]})
    assert queue.length("hook") == 5
    target.answer = lambda _d, _n: OK
    calls = len(target.calls)
    assert d.drain(now_ns=soon()) == 5  # one drain: each delivered head makes the next due
    drained = target.calls[calls:]
    assert [sorted(names(c)) for c in drained] == [["a-1", "b-0"], ["a-3", "b-2"], ["a-4"]]
    assert queue.length() == 0


def test_a_head_that_fails_again_keeps_its_key_waiting(queue: RetryQueue) -> None:
    target = RecordingTarget("hook", lambda _d, _n: RETRY)
    d = ordered(queue, target)
    d.deliver({"topic": [event("a", 1), event("a", 2), event("b", 3)]})
    target.answer = failing("a-1")
    assert d.drain(now_ns=soon()) == 1  # b-3; a-1 failed again, a-2 waits behind it
    assert target.acked_ids() == ["b-3"]
    assert [q.event_id for q in queue.due("hook", soon(120))] == ["a-1", "a-2"]
    # a-2 is put off until its head's next attempt: no drain is due for it before that
    now = time.time_ns()
    assert not queue.any_due(now)
    target.answer = lambda _d, _n: OK
    assert d.drain(now_ns=soon(120)) == 2
    assert target.acked_ids() == ["b-3", "a-1", "a-2"]


def test_a_dead_letter_holds_its_key_until_it_is_replayed(queue: RetryQueue) -> None:
    target = RecordingTarget("hook", failing("a-2", answer=REFUSED))
    d = ordered(queue, target)
    d.deliver({"topic": [event("a", 1), event("a", 2), event("a", 3), event("b", 4)]})
    assert target.acked_ids() == ["a-1", "b-4"]
    assert [q.event_id for q in queue.dead("hook")] == ["a-2"]
    assert [q.event_id for q in queue.due("hook", soon())] == ["a-3"]

    # the queue drains nothing of a while its dead letter is there, and the next batch's
    # event of a joins the queue
    target.answer = lambda _d, _n: OK
    assert d.drain(now_ns=soon()) == 0
    d.deliver({"topic": [event("a", 5), event("b", 6)]})
    assert target.acked_ids() == ["a-1", "b-4", "b-6"]
    # a drain puts off what its dead letter holds, so the driver starts no drains for it
    assert d.drain(now_ns=soon()) == 0
    assert not queue.any_due(soon())

    # a replay puts a-2 back; the drain then sends a's events in sequencer order
    assert queue.replay("hook") == 1
    assert d.drain(now_ns=soon()) == 3
    assert target.acked_ids()[3:] == ["a-2", "a-3", "a-5"]
    assert queue.length() == 0


def test_purging_a_keys_dead_letters_releases_it(queue: RetryQueue) -> None:
    target = RecordingTarget("hook", failing("a-1", answer=REFUSED))
    d = ordered(queue, target)
    d.deliver({"topic": [event("a", 1), event("a", 2)]})
    target.answer = lambda _d, _n: OK
    assert d.drain(now_ns=soon()) == 0
    assert queue.purge("hook", "photos/a") == 1
    assert d.drain(now_ns=soon()) == 1
    assert target.acked_ids() == ["a-2"]
    assert queue.dead_count() == 0


def test_a_held_keys_queued_events_age_into_the_dead_letters_in_order(
    queue: RetryQueue,
) -> None:
    policy = RetryPolicy(attempts_in_batch=1, time_to_live_s=1.0, per_key_order=True)
    target = RecordingTarget("hook", failing("a-1", answer=REFUSED))
    d = ordered(queue, target, policy)
    d.deliver({"topic": [event("a", 1), event("a", 2), event("a", 3)]})
    d.deliver({"topic": [event("a", 0)]})  # queued later, but first in sequencer order
    assert d.drain(now_ns=soon(0.5)) == 0
    assert queue.length("hook") == 3
    assert d.drain(now_ns=soon(5)) == 0  # past the time-to-live: to the dead letters
    assert queue.length() == 0
    assert [q.event_id for q in queue.dead("hook")] == ["a-1", "a-0", "a-2", "a-3"]
    target.answer = lambda _d, _n: OK
    assert queue.replay("hook") == 4  # with a fresh time-to-live
    assert d.drain(now_ns=soon(0.5)) == 4
    assert target.acked_ids() == ["a-0", "a-1", "a-2", "a-3"]


def test_a_new_deliverer_over_the_same_database_keeps_the_hold(queue: RetryQueue) -> None:
    ordered(queue, RecordingTarget("hook", keys_failing("a"))).deliver(
        {"topic": [event("a", 1), event("b", 2)]}
    )
    restarted = RecordingTarget("hook")
    d = ordered(RetryQueue(queue.engine), restarted)
    d.deliver({"topic": [event("a", 3), event("b", 4)]})
    assert restarted.acked_ids() == ["b-4"]
    assert d.drain(now_ns=soon()) == 2
    assert restarted.acked_ids() == ["b-4", "a-1", "a-3"]


def test_not_persistent_buries_a_failing_keys_later_events_too(queue: RetryQueue) -> None:
    policy = RetryPolicy(attempts_in_batch=1, persistent=False, per_key_order=True)
    target = RecordingTarget("hook", failing("a-1"))
    ordered(queue, target, policy).deliver({"topic": [event("a", 1), event("a", 2)]})
    assert [q.event_id for q in queue.dead("hook")] == ["a-1", "a-2"]
    assert queue.length() == 0


def test_the_ordering_argument() -> None:
    hook = "http://127.0.0.1:9/x"
    assert policy_of(Topic("t", hook, {"ordering": "per-key"})).per_key_order
    assert not policy_of(Topic("t", hook, {"ordering": "off"})).per_key_order
    assert not policy_of(Topic("t", hook, {})).per_key_order
    with pytest.raises(ValueError, match="topic 't': argument 'ordering' must be one of per-key"):
        policy_of(Topic("t", hook, {"ordering": "true"}))
    with pytest.raises(ValueError, match="argument 'ordering' must be one of per-key, off"):
        push_target(Topic("t", hook, {"ordering": "by-key"}))
    assert push_target(Topic("t", hook, {"ordering": "per-key"})) is not None


@pytest.mark.parametrize(
    ("value", "keys", "held"),
    [
        ("per-key", True, True),
        ("true", True, False),
        ("false", False, False),
        ("off", False, False),
    ],
)
def test_pubsub_ordering_sets_its_ordering_keys_and_per_key_also_the_hold(
    value: str, keys: bool, held: bool
) -> None:
    topic = Topic("t", "pubsub://projects/p/topics/t", {"ordering": value})
    target = push_target(topic)
    assert getattr(target, "ordering", None) is keys
    assert policy_of(topic).per_key_order is held


@pytest.mark.postgresql
def test_a_replay_between_the_hold_checks_statements_still_holds_the_key(
    postgres_db: Metabase,
) -> None:
    """A replay commits while the batch asks whether its keys are held: the key's dead
    letter is then in the queue, and the key is held either way."""
    queue = RetryQueue(postgres_db.writer)
    target = RecordingTarget("hook", failing("a-1", answer=REFUSED))
    d = ordered(queue, target)
    d.deliver({"topic": [event("a", 1)]})
    assert queue.dead_count("hook") == 1
    assert queue.length("hook") == 0
    target.answer = lambda _d, _n: OK
    replayed: list[int] = []

    def replay_once(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        if replayed or not statement.lstrip().startswith("SELECT"):
            return
        if "dead_letters" in statement:  # the replay commits before this one reads
            replayed.append(-1)
            replayed[0] = queue.replay("hook")

    sa.event.listen(queue.engine, "before_cursor_execute", replay_once)
    try:
        d.deliver({"topic": [event("a", 2)]})
    finally:
        sa.event.remove(queue.engine, "before_cursor_execute", replay_once)
    assert replayed == [1]
    assert target.acked_ids() == []  # a-2 waits behind the replayed a-1
    assert d.drain(now_ns=soon()) == 2
    assert target.acked_ids() == ["a-1", "a-2"]


def _waiting(engine: sa.Engine, statement: str) -> bool:
    """Does a session of this database wait for a lock in a statement starting so?"""
    with engine.connect() as conn:
        return bool(
            conn.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock' AND query LIKE :start"
                ),
                {"start": statement + "%"},
            ).scalar_one()
        )


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.postgresql
def test_a_replay_during_a_drains_put_off_leaves_the_keys_events_due(
    postgres_db: Metabase,
) -> None:
    """A drain puts off a held key's due events while a replay frees the key: the events
    must not end up put off to the time-to-live (and then die untried). The test holds the
    key's queued row locked so the drain's UPDATE has read (its snapshot: the dead letter
    still there) before the replay commits."""
    queue = RetryQueue(postgres_db.writer)
    target = RecordingTarget("hook", failing("a-2", answer=REFUSED))
    d = ordered(queue, target)
    d.deliver({"topic": [event("a", 1), event("a", 2), event("a", 3)]})
    assert [q.event_id for q in queue.dead("hook")] == ["a-2"]
    target.answer = lambda _d, _n: OK
    time.sleep(0.01)  # a-3's first backoff has passed: it is due for the replay too

    with queue.engine.connect() as locker:
        locker.execute(sa.text("SELECT id FROM delivery_retries WHERE event_id = 'a-3' FOR UPDATE"))
        drain = threading.Thread(target=d.drain, kwargs={"now_ns": soon()})
        drain.start()
        _until(lambda: _waiting(queue.engine, "UPDATE delivery_retries"), "the put-off")
        replay = threading.Thread(target=queue.replay, args=("hook",))
        replay.start()
        _until(
            lambda: not replay.is_alive() or _waiting(queue.engine, "DELETE FROM dead_letters"),
            "the replay",
        )
        locker.rollback()
    drain.join(30)
    replay.join(30)
    assert queue.dead_count() == 0
    assert d.drain(now_ns=soon()) == 2
    assert target.acked_ids() == ["a-1", "a-2", "a-3"]


def _drain_cost(db: Metabase, n: int) -> tuple[int, int]:
    """Statements, and SQLite VM instructions (in hundreds; 0 on PostgreSQL), of draining
    `n` queued events of one key."""
    queue = RetryQueue(db.writer)
    queue.engine.dispose()  # fresh connections: the progress handlers go with them
    target = RecordingTarget("hook", failing("a-0"))
    d = ordered(queue, target)
    d.deliver({"topic": [event("a", i) for i in range(n)]})
    assert queue.length("hook") == n
    target.answer = lambda _d, _n: OK
    statements, steps = [0], [0]
    raws: dict[int, object] = {}

    def step() -> int:
        steps[0] += 1
        return 0

    def count(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        statements[0] += 1
        raw = conn.connection.driver_connection
        if conn.dialect.name == "sqlite" and id(raw) not in raws:
            raws[id(raw)] = raw
            raw.set_progress_handler(step, 100)

    sa.event.listen(queue.engine, "before_cursor_execute", count)
    try:
        assert d.drain(now_ns=soon(), limit=10 * n) == n
    finally:
        sa.event.remove(queue.engine, "before_cursor_execute", count)
        for raw in raws.values():
            raw.set_progress_handler(None, 0)  # type: ignore[attr-defined]
        queue.engine.dispose()
    assert target.acked_ids() == [f"a-{i}" for i in range(n)]
    return statements[0], steps[0]


def test_draining_a_hot_key_costs_linear_work(db: Metabase) -> None:
    """A key's followers are not walked again for every head: the statements grow as the
    events, and so does SQLite's work (twice the events, about twice the instructions)."""
    statements, steps = _drain_cost(db, 150)
    assert statements <= 2 * 150 + 20
    statements_2, steps_2 = _drain_cost(db, 300)
    assert statements_2 <= 2 * 300 + 20
    if db.writer.dialect.name == "sqlite":
        assert steps_2 < 2.6 * steps, (steps, steps_2)


def test_a_purged_event_is_not_sent_from_a_queued_copy(queue: RetryQueue) -> None:
    """A crash between burying a refused event and queueing its key's later events, and
    the batch's re-run, can leave the refused event both dead and queued: purging it
    deletes the queued copy too."""
    target = RecordingTarget("hook", failing("a-1", answer=REFUSED))
    d = ordered(queue, target)
    d.deliver({"topic": [event("a", 1), event("a", 2)]})
    queue.enqueue("hook", [(event("a", 1), "the re-run queued it behind itself")], 0)
    assert sorted(q.event_id for q in queue.due("hook", soon())) == ["a-1", "a-2"]
    target.answer = lambda _d, _n: OK
    assert queue.purge("hook", "photos/a") == 1
    assert d.drain(now_ns=soon()) == 1
    assert target.acked_ids() == ["a-2"]
    assert queue.length() == 0


def test_an_event_of_no_object_has_no_key_whatever_its_attributes() -> None:
    """As migration 0017 fills in rows of no `s3.object`: no path (not `<bucket>/`)."""
    bare = Delivery.of(
        "t",
        {"s3": {"bucket": {"name": "photos"}}},
        {"bucket": "photos", "key": "", "sequencer": "0A"},
        1,
    )
    assert object_of(bare) == (None, None)
    assert object_of(event("a", 1)) == ("photos/a", f"{1:024X}")
