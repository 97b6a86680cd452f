"""Which versions a lifecycle action applies to, read with bounded memory.

All an action needs to know of a version is its *place* among its key's committed versions
(`Place`): how many newer versions there are, when the next newer one was created and
whether an older one exists. `places` reads a bucket in key order, each key's versions
oldest first, page by page, holding one page and at most `cap + 1` versions of a key;
`places_now` reads the places of given versions again inside a write, in one statement.
`current_due`, `noncurrent_due` and `marker_due` judge a place at `now`, against
`cutoff(now, days)`, which is None when it would reach back before year 1: nothing is that
old, so the action is not scanned for at all and no date overflows.

Why oldest first, and the bounds on ages: docs/lifecycle.md, "Transactions and events" and
"Dates that would overflow".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.sql.selectable import NamedFromClause

from ripple.metabase.db import Metabase
from ripple.metabase.lifecycle import LifecycleRule
from ripple.metabase.listing import past
from ripple.metabase.rows import (
    METADATA_COLUMNS,
    at_bucket,
    key_bytes,
    key_version_in,
    object_from_row,
)
from ripple.metabase.schema import objects
from ripple.metabase.types import COMMITTED_STATUSES, BucketLocation, Object

PAGE = 1000  # rows per read of the scan


class Cancelled(Exception):
    """The run's `cancelled` said stop."""


@dataclass(frozen=True)
class Place:
    """A committed version among its key's committed versions."""

    row: Object
    newer: int  # newer versions (the scan counts up to its cap, then stops counting)
    next_created: datetime | None  # created_at of the next newer version; None: the latest
    older: bool  # an older version exists

    @property
    def latest(self) -> bool:
        return self.newer == 0


Due = Callable[[Place], bool]


def midnight(when: datetime) -> datetime:
    """The start (UTC) of the day `when` falls in."""
    return when.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def cutoff(now: datetime, days: int) -> datetime | None:
    """Versions created (or made noncurrent) at or before this are `days` old at `now`,
    counting S3's way: the age runs out at the midnight after creation + `days`. None if
    that is before year 1: nothing is that old."""
    try:
        return midnight(now) - timedelta(days=days)
    except OverflowError:
        return None


def current_due(rule: LifecycleRule, now: datetime) -> Due | None:
    """Expiration (Days or Date) of a current version that is not a delete marker; None
    if nothing can be due at `now`."""
    limit: datetime | None = None  # None: every current version, whenever created
    if rule.expiration_days is not None:
        limit = cutoff(now, rule.expiration_days)
        if limit is None:
            return None
    else:
        if rule.expiration_date is None:
            raise ValueError("an Expiration rule with neither Days nor Date")
        if now < rule.expiration_date:
            return None

    def due(place: Place) -> bool:
        row = place.row
        if not place.latest or row.is_delete_marker or not rule.filter.matches(row):
            return False
        return limit is None or row.created_at <= limit

    return due


def noncurrent_due(rule: LifecycleRule, now: datetime) -> Due | None:
    """NoncurrentVersionExpiration: noncurrent `NoncurrentDays` (since the next newer
    version was written), and not one of the `NewerNoncurrentVersions` newest noncurrent;
    None if nothing can be due at `now`."""
    if rule.noncurrent_days is None:
        raise ValueError("a NoncurrentVersionExpiration rule without NoncurrentDays")
    limit = cutoff(now, rule.noncurrent_days)
    if limit is None:
        return None
    keep = rule.newer_noncurrent_versions or 0

    def due(place: Place) -> bool:
        if place.newer < keep + 1 or place.next_created is None:
            return False
        return place.next_created <= limit and rule.filter.matches(place.row)

    return due


def marker_due(rule: LifecycleRule) -> Due:
    """ExpiredObjectDeleteMarker: a delete marker that is its key's only version."""

    def due(place: Place) -> bool:
        row = place.row
        only = place.latest and not place.older
        return only and row.is_delete_marker and rule.filter.matches(row)

    return due


def cap_of(rule: LifecycleRule) -> int:
    """How many newer versions the rule's actions need to count (at least one)."""
    return (rule.newer_noncurrent_versions or 0) + 1


def places(
    db: Metabase,
    loc: BucketLocation,
    prefix: str,
    cap: int,
    cancelled: Callable[[], bool],
) -> Iterator[Place]:
    """The place of every committed version under `prefix`, in key order, oldest version
    first; `newer` counted up to `cap`. `cancelled` is asked before each page is read (a
    True raises `Cancelled`)."""
    if cap < 1:
        raise ValueError(f"cap must be at least 1, not {cap}")
    window: deque[Object] = deque()  # the key's versions not given yet, oldest first
    given = False  # an older version of the key was given already
    for page in _pages(db, loc, prefix.encode("utf-8"), cancelled):
        for row in page:
            if window and row.object_key != window[0].object_key:
                yield from _key_end(window, given)
                window.clear()
                given = False
            window.append(row)
            if len(window) > cap:  # the oldest has `cap` newer versions after it
                oldest = window.popleft()
                yield Place(oldest, cap, window[0].created_at, given)
                given = True
    yield from _key_end(window, given)


def _key_end(window: deque[Object], given: bool) -> Iterator[Place]:
    rows = list(window)
    for index, row in enumerate(rows):
        after = rows[index + 1].created_at if index + 1 < len(rows) else None
        yield Place(row, len(rows) - 1 - index, after, given or index > 0)


def _pages(
    db: Metabase, loc: BucketLocation, prefix: bytes, cancelled: Callable[[], bool]
) -> Iterator[list[Object]]:
    position = sa.tuple_(objects.c.object_key, objects.c.version)
    where = [at_bucket(loc), objects.c.status.in_(COMMITTED_STATUSES)]
    if prefix:
        where += [objects.c.object_key >= prefix, objects.c.object_key < past(prefix)]
    after: tuple[bytes, int] | None = None
    while True:
        if cancelled():
            raise Cancelled
        query = sa.select(*METADATA_COLUMNS).where(*where)
        if after is not None:
            query = query.where(position > sa.tuple_(*(sa.literal(v) for v in after)))
        query = query.order_by(*position.clauses).limit(PAGE)
        with db.read() as conn:
            page = [object_from_row(r) for r in conn.execute(query)]
        yield page
        if len(page) < PAGE:
            return
        after = (key_bytes(page[-1].object_key), page[-1].version)


def places_now(conn: sa.Connection, loc: BucketLocation, rows: list[Object]) -> list[Place]:
    """The places the given versions have now (those still committed; row-locked on
    PostgreSQL), in key order, oldest first; `newer` counted in full."""
    newer, older = objects.alias("newer"), objects.alias("older")

    def same_key(other: NamedFromClause) -> sa.ColumnElement[bool]:
        return sa.and_(
            other.c.project_id == objects.c.project_id,
            other.c.bucket_name == objects.c.bucket_name,
            other.c.object_key == objects.c.object_key,
            other.c.status.in_(COMMITTED_STATUSES),
        )

    is_newer = sa.and_(same_key(newer), newer.c.version > objects.c.version)
    query = (
        sa.select(
            *METADATA_COLUMNS,
            sa.select(sa.func.count())
            .select_from(newer)
            .where(is_newer)
            .scalar_subquery()
            .label("lc_newer"),
            sa.select(newer.c.created_at)
            .where(is_newer)
            .order_by(newer.c.version)
            .limit(1)
            .scalar_subquery()
            .label("lc_next_created"),
            sa.exists()
            .where(same_key(older), older.c.version < objects.c.version)
            .label("lc_older"),
        )
        .where(
            at_bucket(loc),
            key_version_in(
                conn, [key_bytes(r.object_key) for r in rows], [r.version for r in rows]
            ),
            objects.c.status.in_(COMMITTED_STATUSES),
        )
        .order_by(objects.c.object_key, objects.c.version)
    )
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(of=objects)
    return [
        Place(object_from_row(r), int(r.lc_newer), r.lc_next_created, bool(r.lc_older))
        for r in conn.execute(query)
    ]
