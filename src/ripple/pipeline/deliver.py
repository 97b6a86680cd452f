"""Delivering a batch's events to their targets, at least once.

Every target of the batch is published to concurrently (each bounds its own in-flight
requests). Events a target could not take are tried again within the batch, with
exponential backoff and jitter, a few times; what still fails goes to the target's durable
retry queue, and the batch completes. Only then does Spark commit the batch's offsets, so a
crash before that redelivers the batch (at least once). A target whose queue is not empty is
failing: its new events go straight to the queue, behind the older ones, so one destination
that is down costs the others nothing. `drain` gives queued events another attempt when they
are due, and moves them to the dead letters past the target's time-to-live or retry limit
(its `ripple.targets.retry.RetryPolicy`). Refusals for good (`permanent`) go to the dead
letters at once.

A target with per-key ordering (`RetryPolicy.per_key_order`) is not failing as a whole: only
the keys with queued or dead events are held, a batch sends each key's events one wave at a
time, and the drain sends each key's head only (`ripple.pipeline.ordering`).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from ripple.pipeline import metrics, ordering
from ripple.pipeline.queue import Queued, RetryQueue, delivery_of, object_of
from ripple.pipeline.unopened import Unopened, opened
from ripple.targets.base import Delivery, Outcome, Result, Target
from ripple.targets.retry import RetryPolicy

log = logging.getLogger(__name__)

__all__ = ["Deliverer", "Unopened"]

Item = TypeVar("Item", Delivery, Queued)  # a delivery of a batch, or a queued one
HELD = "held behind an earlier event of its key"  # why an untried event was queued


class Deliverer:
    def __init__(
        self,
        targets: Mapping[str, Sequence[Target]],  # topic -> its targets
        queue: RetryQueue,
        policies: Mapping[str, RetryPolicy] | None = None,  # per target name
        *,
        default_policy: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        seed: int | None = None,
    ) -> None:
        self.targets = {topic: list(ts) for topic, ts in targets.items()}
        self.queue = queue
        self.policies = dict(policies or {})
        self.default_policy = default_policy or RetryPolicy()
        self.sleep = sleep
        self._rng = random.Random(seed)
        self._failing: set[str] = set(queue.destinations())
        self._lock = threading.Lock()
        # held while targets are in use (a batch, a drain) or swapped (`reconfigure`), so a
        # target is never closed under a publish
        self._using = threading.RLock()
        names = {t.name for ts in self.targets.values() for t in ts}
        self._workers = max(1, len(names))  # the pool's threads, one per destination
        self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="deliver")

    def exclusive(self) -> threading.RLock:
        """Held, targets are neither swapped nor used by anyone else: a batch holds it from
        routing to delivery, `reconfigure` while it swaps routes and targets together."""
        return self._using

    def refresh_failing(self) -> None:
        """Read again which destinations are failing (have queued events): another process
        (a drain task elsewhere) may have emptied a queue, or filled one."""
        failing = set(self.queue.destinations())
        with self._lock:
            self._failing = failing

    def policy(self, target: Target) -> RetryPolicy:
        return self.policies.get(target.name, self.default_policy)

    def open(self) -> None:
        """Open every target. One that cannot be opened (a broker away, credentials
        missing) does not stop the others: it answers `retry`, and tries again, until it
        opens (`Unopened`)."""
        with self._using:
            self.targets = {topic: [opened(t) for t in ts] for topic, ts in self.targets.items()}

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for target in self._all():
            target.close()

    def reconfigure(
        self, targets: Mapping[str, Sequence[Target]], policies: Mapping[str, RetryPolicy]
    ) -> None:
        """Deliver to `targets` from now on (between batches): targets that are new are
        opened, those no longer given are closed; a target given again (the same object)
        goes on as it was. Queued events of a closed target stay in its retry queue."""
        with self._using:
            before = {t.name: t for t in self._all()}
            given = {t.name: t for ts in targets.values() for t in ts}
            kept_or_new: dict[str, Target] = {}
            for name, target in given.items():
                old = before.get(name)
                if old is target or (isinstance(old, Unopened) and old.inner is target):
                    kept_or_new[name] = old
                else:
                    kept_or_new[name] = opened(target)
            with self._lock:
                self.targets = {
                    topic: [kept_or_new[t.name] for t in ts] for topic, ts in targets.items()
                }
                self.policies = dict(policies)
                if len(given) > self._workers:
                    self._workers = len(given)
                    old_pool, self._pool = (
                        self._pool,
                        ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="deliver"),
                    )
                    old_pool.shutdown(wait=False)
            for name, target in before.items():
                if kept_or_new.get(name) is not target:
                    target.close()

    def _all(self) -> list[Target]:
        seen: dict[str, Target] = {}
        for ts in self.targets.values():
            for t in ts:
                seen.setdefault(t.name, t)
        return list(seen.values())

    # the batch ------------------------------------------------------------------------

    def deliver(self, by_topic: Mapping[str, Sequence[Delivery]]) -> None:
        """Deliver or queue every event; returns when each is acknowledged or queued.
        Raises only if an event could be neither (the batch then fails and is redone)."""
        with self._using:
            self._deliver_all(by_topic)

    def _deliver_all(self, by_topic: Mapping[str, Sequence[Delivery]]) -> None:
        work: dict[str, tuple[Target, list[Delivery]]] = {}
        for topic, deliveries in by_topic.items():
            targets = self.targets.get(topic)
            if not targets:
                log.warning("topic %s has no target: %d events not sent", topic, len(deliveries))
                metrics.EVENTS_LOST.inc(len(deliveries))
                continue
            for target in targets:
                work.setdefault(target.name, (target, []))[1].extend(deliveries)
        futures = [self._pool.submit(self._deliver, t, ds) for t, ds in work.values()]
        errors = [f.exception() for f in futures]
        for error in errors:
            if error is not None:
                raise error

    def _deliver(self, target: Target, deliveries: list[Delivery]) -> None:
        name, policy = target.name, self.policy(target)
        metrics.PUSH_PENDING.labels(name).inc(len(deliveries))
        try:
            if policy.per_key_order:
                self._deliver_in_order(target, deliveries)
                return
            if name in self._failing:  # behind the queue: no attempt now
                self._queue(target, [(d, "queued behind earlier failures") for d in deliveries])
                return
            _, failed = self._attempts(target, deliveries)
            self._set_aside(target, failed)
        finally:
            metrics.PUSH_PENDING.labels(name).dec(len(deliveries))

    def _attempts(
        self, target: Target, deliveries: list[Delivery]
    ) -> tuple[list[Delivery], list[tuple[Delivery, str]]]:
        """Publish, and again what failed, up to the policy's attempts in a batch, with
        backoff; bury what the target refuses for good. The acknowledged deliveries, and
        those still failing with their errors."""
        policy = self.policy(target)
        pending, acked = deliveries, []
        for attempt in range(1, policy.attempts_in_batch + 1):
            ok, retry = self._answered(target, pending, target.publish(pending))
            acked.extend(ok)
            if not retry or attempt == policy.attempts_in_batch:
                return acked, retry
            self.sleep(policy.backoff_s(attempt, self._rng))
            pending = [d for d, _ in retry]
        return acked, []

    def _set_aside(self, target: Target, failed: list[tuple[Delivery, str]]) -> None:
        """What the batch could not deliver: to the retry queue, or, for a target that is
        not persistent, to the dead letters."""
        if not failed:
            return
        if self.policy(target).persistent:
            self._queue(target, failed)
        else:
            self._bury(target, [(d, f"not persistent: {e}") for d, e in failed])

    def _deliver_in_order(self, target: Target, deliveries: list[Delivery]) -> None:
        """Per-key ordering: the events of held keys go behind their queued ones; the other
        keys' go in waves, a key's n-th event in the n-th, so a key never has two in flight.
        A key whose event is still failing after the batch's attempts, or was refused,
        stops: it and the key's later events go to the queue (or, not persistent, to the
        dead letters), in sequencer order."""
        lanes = ordering.lanes(deliveries)
        paths = {path for lane in lanes if (path := _path(lane[0])) is not None}
        held = ordering.held(self.queue.engine, target.name, paths) if paths else set()
        aside = [(d, HELD) for lane in lanes if _path(lane[0]) in held for d in lane]
        flowing = [lane for lane in lanes if _path(lane[0]) not in held]
        wave = 0
        while flowing:
            acked, failed = self._attempts(target, [lane[wave] for lane in flowing])
            went = {id(d) for d in acked}  # the others failed, or were refused (buried)
            aside.extend(failed)
            still: list[list[Delivery]] = []
            for lane in flowing:
                if id(lane[wave]) not in went:
                    aside.extend((later, HELD) for later in lane[wave + 1 :])
                elif len(lane) > wave + 1:
                    still.append(lane)
            flowing, wave = still, wave + 1
        self._set_aside(target, aside)

    def _answered(
        self, target: Target, items: Sequence[Item], results: Sequence[Result]
    ) -> tuple[list[Item], list[tuple[Item, str]]]:
        """Count the results of publishing `items` and bury what the target refused for
        good; return the acknowledged items and those to try again, with their errors."""
        if len(results) != len(items):
            raise RuntimeError(f"target {target.name} answered {len(results)} of {len(items)}")
        ok: list[Item] = []
        retry: list[tuple[Item, str]] = []
        dead: list[tuple[Item, str]] = []
        for item, result in zip(items, results, strict=True):
            if result.outcome is Outcome.OK:
                ok.append(item)
            elif result.outcome is Outcome.PERMANENT:
                dead.append((item, result.error or "refused"))
            else:
                retry.append((item, result.error or "failed"))
        metrics.PUSH_OK.labels(target.name).inc(len(ok))
        metrics.PUSH_FAIL.labels(target.name).inc(len(retry) + len(dead))
        if dead:
            self._bury(target, dead)
            log.warning("%s refused %d events: %s", target.name, len(dead), dead[0][1])
        return ok, retry

    def _bury(self, target: Target, dead: Sequence[tuple[Delivery | Queued, str]]) -> None:
        self.queue.bury(target.name, dead)
        metrics.DEADLETTER.labels(target.name).inc(len(dead))

    def _queue(self, target: Target, failed: list[tuple[Delivery, str]]) -> None:
        policy = self.policy(target)
        now = time.time_ns()
        due = now + int(policy.backoff_s(1, self._rng) * 1e9)
        with self._lock:
            self.queue.enqueue(target.name, failed, due, now)
            self._failing.add(target.name)
        metrics.RETRY_QUEUE_LENGTH.labels(target.name).set(self.queue.length(target.name))
        log.warning("%s: %d events queued for retry: %s", target.name, len(failed), failed[0][1])

    # the retry queues ------------------------------------------------------------------

    def drain(self, now_ns: int | None = None, limit: int = 500) -> int:
        """Try every failing target's due queued events once; returns how many were
        delivered. A target whose queue empties is healthy again."""
        with self._using:
            queued = set(self.queue.destinations())  # the queue, not memory, says who fails
            now_ns = now_ns or time.time_ns()
            delivered = 0
            for target in self._all():
                if target.name in queued:
                    delivered += self._drain(target, now_ns, limit)
            return delivered

    def drain_for(self, budget_s: float, limit: int = 2000) -> int:
        """Drain page after page until nothing due is delivered or `budget_s` is spent, so
        a recovered destination catches up at its own speed, not one page per interval."""
        deadline = time.monotonic() + budget_s
        delivered = 0
        while True:
            done = self.drain(limit=limit)
            delivered += done
            if done == 0 or time.monotonic() >= deadline:
                return delivered

    def _drain(self, target: Target, now_ns: int, limit: int) -> int:
        if self.policy(target).per_key_order:
            delivered = self._drain_in_order(target, now_ns, limit)
        else:
            delivered = self._attempt_queued(
                target, self.queue.due(target.name, now_ns, limit), now_ns
            )
        with self._lock:  # a batch queueing meanwhile adds itself back under the same lock
            remaining = self.queue.length(target.name)
            if remaining == 0:
                self._failing.discard(target.name)
        metrics.RETRY_QUEUE_LENGTH.labels(target.name).set(remaining)
        return delivered

    def _attempt_queued(self, target: Target, due: list[Queued], now_ns: int) -> int:
        """One attempt of queued events; those past the time-to-live or retry limit go to
        the dead letters instead. How many were delivered."""
        return len(self._try_queued(target, due, now_ns)[0])

    def _try_queued(
        self, target: Target, due: list[Queued], now_ns: int
    ) -> tuple[set[int], set[int]]:
        """`_attempt_queued`; the ids delivered, and those buried as expired."""
        policy = self.policy(target)
        expired = [
            (e, f"expired after {e.attempts} attempts: {e.error}")
            for e in due
            if now_ns - e.first_failed_ns > policy.time_to_live_s * 1e9
            or e.attempts >= policy.max_retries
        ]
        dead_ids = {e.id for e, _ in expired}
        entries = [e for e in due if e.id not in dead_ids]
        if expired:
            self._bury(target, expired)
        if not entries:
            return set(), dead_ids
        results = target.publish([delivery_of(e) for e in entries])
        ok, retry = self._answered(target, entries, results)
        self.queue.delivered(e.id for e in ok)
        self.queue.failed_again(
            [
                (e, error, now_ns + int(policy.backoff_s(e.attempts + 1, self._rng) * 1e9))
                for e, error in retry
            ]
        )
        return {e.id for e in ok}, dead_ids

    def _drain_in_order(self, target: Target, now_ns: int, limit: int) -> int:
        """Per-key ordering: each key's head only, wave after wave, from a page of lanes
        (`ordering.due_lanes`): a key's next event goes in the next wave once its head was
        delivered (or, past the time-to-live too, once its head was buried as expired). A
        page costs one query, whatever a key's backlog. Until nothing more can go or `limit`
        events were tried; then what cannot go yet is put off."""
        policy = self.policy(target)
        ttl_ns = int(policy.time_to_live_s * 1e9)
        expired_before = now_ns - ttl_ns
        delivered, budget = 0, limit
        while budget > 0:
            flowing = ordering.due_lanes(
                self.queue.engine, target.name, now_ns, expired_before, budget
            )
            if not flowing:
                wait_ns = int(policy.max_delay_s * 1e9)
                ordering.put_off(self.queue.engine, target.name, now_ns, ttl_ns, wait_ns)
                break
            wave = 0
            while flowing and budget > 0:
                heads = [lane[wave] for lane in flowing]
                budget -= len(heads)
                ok, expired = self._try_queued(target, heads, now_ns)
                delivered += len(ok)
                flowing = [
                    lane
                    for lane in flowing
                    if len(lane) > wave + 1
                    and (
                        lane[wave].id in ok
                        or (
                            lane[wave].id in expired
                            and lane[wave + 1].first_failed_ns < expired_before
                        )
                    )
                ]
                wave += 1
        return delivered


def _path(d: Delivery) -> str | None:
    return object_of(d)[0]
