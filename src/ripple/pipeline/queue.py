"""Each destination's durable retry queue and the dead letters, in the metabase database.

An event goes into its destination's retry queue when delivery within its batch failed, so
the batch can complete; `due` hands back what is ready for another attempt; an event whose
destination refused it for good, or that outlived the destination's time-to-live or retry
limit, is moved to the dead letters, from where `replay` puts it back in the queue (and
`purge` deletes it). Each row keeps its event's object and sequencer (`object_of`), which
per-key ordering (`ripple.pipeline.ordering`) holds keys by.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ripple.pipeline.route import delivery
from ripple.pipeline.schema import dead_letters, delivery_retries
from ripple.targets.base import Delivery


@dataclass(frozen=True)
class Queued:
    """A queued (or dead) event with its delivery history."""

    id: int
    destination: str
    event_id: str
    event: dict[str, Any]
    attempts: int
    first_failed_ns: int
    error: str
    object_path: str | None = None  # <bucket>/<key>; None: an event of no object
    sequencer: str | None = None


def object_of(item: Delivery | Queued) -> tuple[str | None, str | None]:
    """The object (`<bucket>/<key>`) and sequencer of the event: what orders it among its
    key's events. (None, None) for an event of no object (an `s3:TestEvent`)."""
    if isinstance(item, Queued):
        return item.object_path, item.sequencer
    if item.attributes.get("key") == "":
        return None, None  # no object (a test event): as migration 0017 fills such rows in
    sequencer = item.attributes.get("sequencer")
    if sequencer is None:
        try:
            sequencer = str(item.event["s3"]["object"]["sequencer"])
        except (KeyError, TypeError, ValueError):
            return None, None
    return item.object_path, sequencer


def delivery_of(entry: Queued) -> Delivery:
    """The delivery of a queued event, as the route made it (batch id -1: a retry)."""
    return delivery(entry.event_id, entry.event, batch_id=-1)


class RetryQueue:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def _insert(self, conn: sa.Connection, rows: list[dict[str, Any]]) -> None:
        """Insert queue rows; an event already queued for the destination stays as it is."""
        module = postgresql if conn.dialect.name == "postgresql" else sqlite
        stmt = module.insert(delivery_retries).on_conflict_do_nothing(
            index_elements=["destination", "event_id"]
        )
        conn.execute(stmt, rows)

    def enqueue(
        self,
        destination: str,
        failed: Sequence[tuple[Delivery, str]],
        next_attempt_ns: int,
        now_ns: int | None = None,
    ) -> None:
        """Queue deliveries that failed (with their errors) for a later attempt."""
        if not failed:
            return
        now = now_ns or time.time_ns()
        rows = []
        for d, error in failed:
            path, sequencer = object_of(d)
            rows.append(
                {
                    "destination": destination,
                    "event_id": d.event_id,
                    "event": d.message.decode(),
                    "attempts": 1,
                    "first_failed_ns": now,
                    "next_attempt_ns": next_attempt_ns,
                    "last_error": error,
                    "object_path": path,
                    "sequencer": sequencer,
                }
            )
        with self.engine.begin() as conn:
            self._insert(conn, rows)

    def due(self, destination: str, now_ns: int, limit: int = 500) -> list[Queued]:
        r = delivery_retries.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(delivery_retries)
                .where(r.destination == destination, r.next_attempt_ns <= now_ns)
                .order_by(r.id)  # first failed, first retried
                .limit(limit)
            ).all()
        return [queued_of(row, row.last_error) for row in rows]

    def length(self, destination: str | None = None) -> int:
        r = delivery_retries.c
        query = sa.select(sa.func.count()).select_from(delivery_retries)
        if destination is not None:
            query = query.where(r.destination == destination)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def lengths(self) -> dict[str, int]:
        """How many events wait in each destination's queue (those with any)."""
        r = delivery_retries.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(r.destination, sa.func.count()).group_by(r.destination)
            ).all()
        return {str(row[0]): int(row[1]) for row in rows}

    def any_due(self, now_ns: int) -> bool:
        """Is any queued event due for another attempt?"""
        r = delivery_retries.c
        with self.engine.connect() as conn:
            found = conn.execute(
                sa.select(r.id).where(r.next_attempt_ns <= now_ns).limit(1)
            ).first()
        return found is not None

    def destinations(self) -> list[str]:
        with self.engine.connect() as conn:
            return list(
                conn.execute(sa.select(delivery_retries.c.destination).distinct()).scalars()
            )

    def delivered(self, ids: Iterable[int]) -> None:
        ids = list(ids)
        if ids:
            with self.engine.begin() as conn:
                conn.execute(sa.delete(delivery_retries).where(delivery_retries.c.id.in_(ids)))

    def failed_again(self, entries: Sequence[tuple[Queued, str, int]]) -> None:
        """Count another failed attempt: (entry, error, next attempt time)."""
        if not entries:
            return
        r = delivery_retries.c
        with self.engine.begin() as conn:
            for entry, error, next_ns in entries:
                conn.execute(
                    sa.update(delivery_retries)
                    .where(r.id == entry.id)
                    .values(attempts=r.attempts + 1, next_attempt_ns=next_ns, last_error=error)
                )

    def bury(
        self, destination: str, dead: Sequence[tuple[Delivery | Queued, str]], attempts: int = 1
    ) -> None:
        """Move events to the dead letters (taking queued ones out of the queue)."""
        if not dead:
            return
        now = time.time_ns()
        rows, queued_ids = [], []
        for item, reason in dead:
            if isinstance(item, Queued):
                queued_ids.append(item.id)
                event = orjson.dumps(item.event)
                tries, first = item.attempts + 1, item.first_failed_ns
            else:
                event, tries, first = item.message, attempts, now
            path, sequencer = object_of(item)
            rows.append(
                {
                    "destination": destination,
                    "event_id": item.event_id,
                    "event": event.decode(),
                    "attempts": tries,
                    "first_failed_ns": first,
                    "dead_at_ns": now,
                    "reason": reason,
                    "object_path": path,
                    "sequencer": sequencer,
                }
            )
        with self.engine.begin() as conn:
            conn.execute(sa.insert(dead_letters), rows)
            if queued_ids:
                conn.execute(
                    sa.delete(delivery_retries).where(delivery_retries.c.id.in_(queued_ids))
                )

    def dead(self, destination: str | None = None, limit: int = 100) -> list[Queued]:
        d = dead_letters.c
        query = sa.select(dead_letters).order_by(d.id).limit(limit)
        if destination is not None:
            query = query.where(d.destination == destination)
        with self.engine.connect() as conn:
            return [queued_of(row, row.reason) for row in conn.execute(query)]

    def dead_count(self, destination: str | None = None) -> int:
        query = sa.select(sa.func.count()).select_from(dead_letters)
        if destination is not None:
            query = query.where(dead_letters.c.destination == destination)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def replay(self, destination: str | None = None) -> int:
        """Put dead letters back into their destinations' retry queues, due now; so are the
        queued events of their keys, which per-key ordering held back behind them."""
        d = dead_letters.c
        now = time.time_ns()
        with self.engine.begin() as conn:
            query = sa.select(dead_letters).order_by(d.id)
            if destination is not None:
                query = query.where(d.destination == destination)
            rows = conn.execute(query).all()
            if not rows:
                return 0
            self._insert(
                conn,
                [
                    {
                        "destination": row.destination,
                        "event_id": row.event_id,
                        "event": row.event,
                        "attempts": 0,
                        "first_failed_ns": now,
                        "next_attempt_ns": now,
                        "last_error": f"replayed from the dead letters ({row.reason})",
                        "object_path": row.object_path,
                        "sequencer": row.sequencer,
                    }
                    for row in rows
                ],
            )
            conn.execute(sa.delete(dead_letters).where(d.id.in_([row.id for row in rows])))
            _due_again(conn, rows, now)
        return len(rows)

    def purge(self, destination: str | None = None, object_path: str | None = None) -> int:
        """Delete dead letters for good (of one destination, of one object), and any queued
        copy of the same events at their destination: a refused event is buried in one
        transaction and its batch's later events queued in another, so a crash between and
        the batch's re-run can leave it both dead and queued; a purged event is never sent.
        The queued events of their keys, which per-key ordering held back behind them, are
        due now."""
        d, r = dead_letters.c, delivery_retries.c
        query = sa.select(d.id, d.destination, d.object_path, d.event_id)
        if destination is not None:
            query = query.where(d.destination == destination)
        if object_path is not None:
            query = query.where(d.object_path == object_path)
        with self.engine.begin() as conn:
            rows = conn.execute(query).all()
            ids = [row.id for row in rows]
            for start in range(0, len(ids), CHUNK):
                conn.execute(sa.delete(dead_letters).where(d.id.in_(ids[start : start + CHUNK])))
            events: dict[str, list[str]] = {}
            for row in rows:
                events.setdefault(row.destination, []).append(row.event_id)
            for dest, event_ids in events.items():
                for start in range(0, len(event_ids), CHUNK):
                    conn.execute(
                        sa.delete(delivery_retries).where(
                            r.destination == dest,
                            r.event_id.in_(event_ids[start : start + CHUNK]),
                        )
                    )
            _due_again(conn, rows, time.time_ns())
        return len(rows)


CHUNK = 500  # values in one IN (...), here and in `ripple.pipeline.ordering`


def _due_again(conn: sa.Connection, rows: Sequence[Any], now_ns: int) -> None:
    """Make the queued events of the dead letters' keys (`rows`: destination, object_path)
    due now: a key held by its dead letters had them put off (`ripple.pipeline.ordering`).
    The queue does not know which destinations order per key, so a destination with
    ordering off gets these events' next attempt early too (harmless: they were due later
    anyway). Rows already due are left alone: a drain putting them off meanwhile holds the
    dead letters locked (`ordering.put_off`), so this statement, which runs after the
    dead letters' deletion was let through, sees what it put off."""
    r = delivery_retries.c
    keys: dict[str, set[str]] = {}
    for row in rows:
        if row.object_path is not None:
            keys.setdefault(row.destination, set()).add(row.object_path)
    for destination, paths in keys.items():
        listed = sorted(paths)
        for start in range(0, len(listed), CHUNK):
            conn.execute(
                sa.update(delivery_retries)
                .where(
                    r.destination == destination,
                    r.object_path.in_(listed[start : start + CHUNK]),
                    r.next_attempt_ns > now_ns,
                )
                .values(next_attempt_ns=now_ns)
            )


def queued_of(row: Any, error: str) -> Queued:
    """The entry of a queue or dead-letter row (`error`: its last error or reason)."""
    return Queued(
        id=row.id,
        destination=row.destination,
        event_id=row.event_id,
        event=orjson.loads(row.event),
        attempts=row.attempts,
        first_failed_ns=row.first_failed_ns,
        error=error,
        object_path=row.object_path,
        sequencer=row.sequencer,
    )
