"""Per-key ordered delivery (a topic's `ordering = per-key`): what keeps one object's events
in sequencer order on their way to a destination, across failures, retries, the retry
queue, the dead letters and restarts.

A key (`<bucket>/<key>`) is **held** at a destination while any of its events waits in that
destination's retry queue or dead letters, state kept in the metabase's tables, so it
outlives a restart and is the same for every process. A batch sends a key's events in waves
(`lanes`), so no key has two in flight; the drain sends only each held key's head, its
queued event of least sequencer (`due_lanes`), and only while the key has no dead letters;
what cannot go yet is put off (`put_off`) so the driver does not start drains for it.

The guarantee, the rules and what they cost: docs/delivery.md, "Per-key ordering".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa

from ripple.pipeline.queue import CHUNK, Queued, object_of, queued_of
from ripple.pipeline.schema import dead_letters, delivery_retries
from ripple.targets.base import Delivery

__all__ = ["due_lanes", "held", "lanes", "put_off", "sequence_key"]


def sequence_key(sequencer: str | None) -> tuple[int, str]:
    """What orders one key's sequencers: length, then value (S3's rule; ripple's are all 24
    upper-case hex digits)."""
    text = sequencer or ""
    return len(text), text


def lanes(deliveries: Sequence[Delivery]) -> list[list[Delivery]]:
    """The deliveries by key, each key's in sequencer order (a batch's are in commit order
    already; the sort is stable). An event of no object is a lane of its own."""
    by_key: dict[str, list[Delivery]] = {}
    alone: list[list[Delivery]] = []
    for d in deliveries:
        path, _ = object_of(d)
        if path is None:
            alone.append([d])
        else:
            by_key.setdefault(path, []).append(d)
    ordered = [sorted(ds, key=lambda d: sequence_key(object_of(d)[1])) for ds in by_key.values()]
    return ordered + alone


def held(engine: sa.Engine, destination: str, paths: Iterable[str]) -> set[str]:
    """Which of `paths` the destination holds: those with an event in its retry queue or
    its dead letters. One indexed lookup when it has neither (the usual case).

    The quick check is one statement: on PostgreSQL each statement reads its own snapshot,
    so two (queued? dead?) could miss a key a replay moved from the dead letters to the
    queue in between, and the batch would send its later event first."""
    r, d = delivery_retries.c, dead_letters.c
    anything = sa.select(
        sa.or_(
            sa.exists().where(r.destination == destination),
            sa.exists().where(d.destination == destination),
        )
    )
    with engine.connect() as conn:
        if not conn.execute(anything).scalar_one():
            return set()
        listed = sorted(set(paths))
        found: set[str] = set()
        for start in range(0, len(listed), CHUNK):
            chunk = listed[start : start + CHUNK]
            query = sa.union(
                sa.select(r.object_path).where(
                    r.destination == destination, r.object_path.in_(chunk)
                ),
                sa.select(d.object_path).where(
                    d.destination == destination, d.object_path.in_(chunk)
                ),
            )
            found.update(conn.execute(query).scalars())
        return found


def _ordered(column: Any, dialect: str) -> Any:
    """`column` compared byte by byte (PostgreSQL's collations need not order hex so)."""
    return column.collate("C") if dialect == "postgresql" else column


def _earlier(a: Any, b: Any, dialect: str) -> sa.ColumnElement[bool]:
    """Row `a` is an earlier event of the same key as row `b`."""
    a_seq, b_seq = _ordered(a.sequencer, dialect), _ordered(b.sequencer, dialect)
    shorter = sa.func.length(a.sequencer) < sa.func.length(b.sequencer)
    same_length = sa.func.length(a.sequencer) == sa.func.length(b.sequencer)
    return sa.and_(
        a.destination == b.destination,
        a.object_path == b.object_path,
        sa.or_(shorter, sa.and_(same_length, a_seq < b_seq)),
    )


def due_lanes(
    engine: sa.Engine, destination: str, now_ns: int, expired_before_ns: int, limit: int
) -> list[list[Queued]]:
    """The destination's due queued events as lanes: each key's head (its queued event of
    least sequencer) and the due events that follow it, in sequencer order, at most `limit`
    events in all, heads first (oldest in the queue first), then the second of each lane,
    and so on. Of a key with dead letters, only events that first failed before
    `expired_before_ns` (so that they go to the dead letters in order). An event of no
    object is a lane of its own.

    One statement: a window numbers each key's events (length, then value of the
    sequencer), so a hot key's followers are read once per page, not once per head. The
    caller sends a lane's next event only after its previous one went."""
    r = delivery_retries
    dialect = engine.dialect.name
    place = sa.func.row_number().over(
        partition_by=r.c.object_path,
        order_by=(sa.func.length(r.c.sequencer), _ordered(r.c.sequencer, dialect)),
    )
    numbered = (
        sa.select(r, sa.case((r.c.object_path.is_(None), 1), else_=place).label("place"))
        .where(r.c.destination == destination)
        .subquery()
    )
    q = numbered.c
    dead = sa.exists().where(
        dead_letters.c.destination == q.destination,
        dead_letters.c.object_path == q.object_path,
    )
    query = (
        sa.select(numbered)
        .where(
            q.place <= limit,
            q.next_attempt_ns <= now_ns,
            sa.or_(~dead, q.first_failed_ns < expired_before_ns),
        )
        .order_by(q.place, q.id)
        .limit(limit)
    )
    lanes: dict[object, list[Queued]] = {}
    with engine.connect() as conn:
        for row in conn.execute(query):
            lane_key = row.object_path if row.object_path is not None else ("alone", row.id)
            lane = lanes.get(lane_key)
            if row.place == 1:
                lanes[lane_key] = [queued_of(row, row.last_error)]
            elif lane is not None and len(lane) == row.place - 1:  # no gap: the one before
                lane.append(queued_of(row, row.last_error))
    return list(lanes.values())


def put_off(engine: sa.Engine, destination: str, now_ns: int, ttl_ns: int, wait_ns: int) -> None:
    """After a drain that sent every head it could: put off the destination's due events
    that cannot go yet, so the driver starts no drain for them. Those of a key held by dead
    letters wait until they outlive the time-to-live (or `wait_ns`, if they have already:
    their head has not); those behind a head that waits for its next attempt, until then."""
    r = delivery_retries.c
    e = delivery_retries.alias("e")
    dialect = engine.dialect.name
    expiry = r.first_failed_ns + ttl_ns
    mine = sa.and_(r.destination == destination, r.next_attempt_ns <= now_ns)
    latest_earlier = (
        sa.select(sa.func.max(e.c.next_attempt_ns))
        .where(_earlier(e.c, r, dialect))
        .scalar_subquery()
    )
    # First lock (PostgreSQL; SQLite has one writer at a time anyway) the dead letters that
    # hold due events, and put off only the events of their keys. A replay or purge deletes
    # dead letters: it either committed before the lock (the key is not put off), or it
    # waits for this transaction and then makes the key's put-off events due again
    # (`queue._due_again`, a statement that reads after this commit). An EXISTS over the
    # dead letters in the UPDATE would not do: re-evaluated on a concurrently changed row,
    # it still reads the UPDATE's own, older snapshot, and a row nobody changed is not
    # re-evaluated at all.
    d = dead_letters.c
    holding = (
        sa.select(d.object_path)
        .where(
            d.destination == destination,
            sa.exists().where(
                r.destination == d.destination,
                r.object_path == d.object_path,
                r.next_attempt_ns <= now_ns,
            ),
        )
        .with_for_update(read=True, of=dead_letters)
    )
    with engine.begin() as conn:
        held_paths: list[str] = sorted(set(conn.execute(holding).scalars()))
        for start in range(0, len(held_paths), CHUNK):
            conn.execute(
                sa.update(delivery_retries)
                .where(mine, r.object_path.in_(held_paths[start : start + CHUNK]))
                .values(next_attempt_ns=sa.case((expiry > now_ns, expiry), else_=now_ns + wait_ns))
            )
        conn.execute(
            sa.update(delivery_retries)
            .where(mine, sa.exists().where(_earlier(e.c, r, dialect)))
            .values(next_attempt_ns=latest_earlier)
        )
