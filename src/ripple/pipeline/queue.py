"""Each destination's durable retry queue and the dead letters, in the metabase database.

An event goes into its destination's retry queue when delivery within its batch failed, so
the batch can complete; `due` hands back what is ready for another attempt; an event whose
destination refused it for good, or that outlived the destination's time-to-live or retry
limit, is moved to the dead letters, from where `replay` puts it back in the queue.
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
        rows = [
            {
                "destination": destination,
                "event_id": d.event_id,
                "event": d.message.decode(),
                "attempts": 1,
                "first_failed_ns": now,
                "next_attempt_ns": next_attempt_ns,
                "last_error": error,
            }
            for d, error in failed
        ]
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
        return [_queued(row, row.last_error) for row in rows]

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
            rows.append(
                {
                    "destination": destination,
                    "event_id": item.event_id,
                    "event": event.decode(),
                    "attempts": tries,
                    "first_failed_ns": first,
                    "dead_at_ns": now,
                    "reason": reason,
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
            return [_queued(row, row.reason) for row in conn.execute(query)]

    def dead_count(self, destination: str | None = None) -> int:
        query = sa.select(sa.func.count()).select_from(dead_letters)
        if destination is not None:
            query = query.where(dead_letters.c.destination == destination)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def replay(self, destination: str | None = None) -> int:
        """Put dead letters back into their destinations' retry queues, due now."""
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
                    }
                    for row in rows
                ],
            )
            conn.execute(sa.delete(dead_letters).where(d.id.in_([row.id for row in rows])))
        return len(rows)


def _queued(row: Any, error: str) -> Queued:
    return Queued(
        id=row.id,
        destination=row.destination,
        event_id=row.event_id,
        event=orjson.loads(row.event),
        attempts=row.attempts,
        first_failed_ns=row.first_failed_ns,
        error=error,
    )
