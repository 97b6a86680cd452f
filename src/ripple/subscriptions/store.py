"""Pull subscriptions in the metabase: create them, store a topic's events in each, pull
with a marker, acknowledge, expire.

A subscription names a topic; every event the pipeline delivers to the topic is stored once
in each of its subscriptions, and waits there until a consumer acknowledges it or it is
older than the subscription's `events_retention_days`. Storing is idempotent on
`(subscription, event id)`: a redelivered event (a retry, a Spark batch replayed after a
crash) is not stored again, even after it was acknowledged, so each event reaches a
subscription exactly once.

A pull answers up to `max_entries` unacknowledged events after `marker`, oldest first, and
`next_marker`, the marker of the last one (pass it to the next pull). The entries are S3
event records with an `eventId` (format `s3`) or the compact form with an `id` (format
`compact`, see `ripple.subscriptions.compact`); either id acknowledges the event.
"""

from __future__ import annotations

import builtins
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

import orjson
import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ripple.changestream.values import datetime_ns
from ripple.metabase import Metabase
from ripple.subscriptions.compact import compact_event
from ripple.subscriptions.schema import subscription_events, subscriptions

__all__ = [
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_RETENTION_DAYS",
    "FORMATS",
    "MAX_ENTRIES",
    "MAX_RETENTION_DAYS",
    "NoSuchSubscription",
    "PullResult",
    "StoredEvent",
    "Subscription",
    "SubscriptionStore",
    "subscription_name_problem",
]

FORMATS: Final = ("s3", "compact")
DEFAULT_RETENTION_DAYS: Final = 7
MAX_RETENTION_DAYS: Final = 3650
DEFAULT_MAX_ENTRIES: Final = 100
MAX_ENTRIES: Final = 1000
MAX_TOPIC_LENGTH: Final = 255

_NAME = re.compile(r"[A-Za-z0-9._-]{1,255}", re.ASCII)
_MARKER = re.compile(r"[0-9]{1,18}", re.ASCII)
_NS_PER_DAY: Final = 86_400 * 1_000_000_000


class StoredEvent(Protocol):
    """An event to store: what a pipeline delivery (`ripple.targets.base.Delivery`) is."""

    @property
    def event_id(self) -> str: ...  # stable across redeliveries: storing is idempotent on it
    @property
    def message(self) -> bytes: ...  # the S3 event record, JSON
    @property
    def batch_id(self) -> int: ...  # the Spark batch that delivers it (-1: a retry)


class NoSuchSubscription(LookupError):
    """The subscription does not exist."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"no subscription {name!r}: create it with "
            f"`ripple subscription create {name} --topic TOPIC`"
        )
        self.name = name


@dataclass(frozen=True)
class Subscription:
    name: str
    topic: str
    format: str  # "s3" or "compact"
    events_retention_days: int
    created_at_ns: int
    owner: uuid.UUID | None = None  # the project that made it through the API; None: the CLI


@dataclass(frozen=True)
class PullResult:
    """One page of a subscription's unacknowledged events, oldest first."""

    events: list[dict[str, Any]]  # S3 records with "eventId", or compact forms with "id"
    next_marker: str  # the marker of the last event; the given marker if none ("" at first)
    is_truncated: bool  # more events follow next_marker
    format: str = "s3"

    def to_dict(self) -> dict[str, Any]:
        """The pubsub module's pull response: the events under `Records` (format `s3`) or
        `events` (format `compact`)."""
        key = "Records" if self.format == "s3" else "events"
        return {
            "next_marker": self.next_marker,
            "is_truncated": self.is_truncated,
            key: self.events,
        }


def subscription_name_problem(name: str) -> str | None:
    """What is wrong with a subscription name, or None if it is a valid one."""
    if _NAME.fullmatch(name):
        return None
    return (
        f"subscription name {name!r} must be 1 to 255 letters, digits, hyphens, "
        "underscores and dots"
    )


class SubscriptionStore:
    """The pull subscriptions of one metabase, and their events."""

    def __init__(self, db: Metabase) -> None:
        self.db = db

    # --- configuration --------------------------------------------------------------------

    def create(
        self,
        name: str,
        topic: str,
        *,
        format: str = "s3",
        events_retention_days: int = DEFAULT_RETENTION_DAYS,
        owner: uuid.UUID | None = None,
    ) -> Subscription:
        """Create a subscription to `topic`, or update the format and retention of the
        subscription of that name to the same topic. ValueError if anything is invalid or
        the name is taken by a subscription to another topic. `owner` is recorded when the
        subscription is made (an update keeps the one it has)."""
        problem = subscription_name_problem(name)
        if problem:
            raise ValueError(problem)
        if not topic or len(topic) > MAX_TOPIC_LENGTH:
            raise ValueError(f"topic {topic!r} must be 1 to {MAX_TOPIC_LENGTH} characters long")
        if format not in FORMATS:
            raise ValueError(f"format {format!r} must be one of: {', '.join(FORMATS)}")
        if (
            isinstance(events_retention_days, bool)
            or not isinstance(events_retention_days, int)
            or not 1 <= events_retention_days <= MAX_RETENTION_DAYS
        ):
            raise ValueError(
                f"events_retention_days must be a whole number of days from 1 to "
                f"{MAX_RETENTION_DAYS}, got {events_retention_days!r}"
            )
        now_ns = datetime_ns(self.db.now())

        def run(conn: Connection) -> Subscription:
            existing = self._find(conn, name, for_update=True)
            if existing is None:
                made = Subscription(name, topic, format, events_retention_days, now_ns, owner)
                conn.execute(
                    sa.insert(subscriptions).values(
                        name=name,
                        topic=topic,
                        format=format,
                        events_retention_days=events_retention_days,
                        created_at_ns=now_ns,
                        owner=owner,
                    )
                )
                return made
            if existing.topic != topic:
                raise ValueError(
                    f"subscription {name!r} exists for topic {existing.topic!r}; delete it "
                    f"first to subscribe to {topic!r}, or choose another name"
                )
            conn.execute(
                sa.update(subscriptions)
                .where(subscriptions.c.name == name)
                .values(format=format, events_retention_days=events_retention_days)
            )
            return Subscription(
                name, topic, format, events_retention_days, existing.created_at_ns, existing.owner
            )

        return self.db.run_write(run)

    def get(self, name: str) -> Subscription:
        """The subscription; NoSuchSubscription if there is none of that name."""
        with self.db.read() as conn:
            return self._get(conn, name)

    def delete(self, name: str) -> int:
        """Delete the subscription and its events; returns how many events it still held
        (acknowledged ones included). NoSuchSubscription if there is none of that name."""
        with self.db.write() as conn:
            self._get(conn, name, for_update=True)
            dropped = conn.execute(
                sa.delete(subscription_events).where(subscription_events.c.subscription == name)
            ).rowcount
            conn.execute(sa.delete(subscriptions).where(subscriptions.c.name == name))
        return dropped

    def list(self, topic: str | None = None) -> builtins.list[Subscription]:
        """Every subscription, or those of `topic`, by name."""
        query = sa.select(subscriptions).order_by(subscriptions.c.name)
        if topic is not None:
            query = query.where(subscriptions.c.topic == topic)
        with self.db.read() as conn:
            return [_subscription(row) for row in conn.execute(query).mappings()]

    # --- events ---------------------------------------------------------------------------

    def store(
        self, topic: str, deliveries: Sequence[StoredEvent], batch_id: int | None = None
    ) -> int:
        """Store every delivery in every subscription of `topic`, in one transaction;
        returns how many rows were new. An event a subscription already has (the same event
        id, acknowledged or not) is left as it is. `batch_id` is recorded with the rows
        (None: each delivery's own)."""
        if not deliveries:
            return 0
        events = [(d.event_id, d.message.decode(), d.batch_id) for d in deliveries]
        now_ns = datetime_ns(self.db.now())
        with self.db.write() as conn:
            # On PostgreSQL the lock orders concurrent stores into a subscription: ids are
            # taken in commit order, so a consumer's marker never passes an id that a
            # transaction still in flight could fill. (SQLite has one writer at a time.)
            query = (
                sa.select(subscriptions.c.name)
                .where(subscriptions.c.topic == topic)
                .order_by(subscriptions.c.name)
            )
            if conn.dialect.name == "postgresql":
                query = query.with_for_update()
            names: Sequence[str] = conn.execute(query).scalars().all()
            if not names:
                return 0
            rows = [
                (name, event_id, text, now_ns, own_batch if batch_id is None else batch_id)
                for name in names
                for event_id, text, own_batch in events
            ]
            return _insert_new(conn, rows)

    def pull(
        self, name: str, marker: str | None = None, max_entries: int = DEFAULT_MAX_ENTRIES
    ) -> PullResult:
        """Up to `max_entries` (1 to 1000) unacknowledged events after `marker` (none: from
        the oldest), oldest first. Events older than the retention are not answered even
        before `expire` removes them. ValueError for a bad marker or max-entries,
        NoSuchSubscription for an unknown subscription."""
        limit = _max_entries(max_entries)
        after = _marker(marker)
        now_ns = datetime_ns(self.db.now())
        with self.db.read() as conn:
            subscription = self._get(conn, name)
            oldest_ns = now_ns - subscription.events_retention_days * _NS_PER_DAY
            rows = conn.execute(
                sa.select(
                    subscription_events.c.id,
                    subscription_events.c.event_id,
                    subscription_events.c.event,
                )
                .where(
                    subscription_events.c.subscription == name,
                    subscription_events.c.acked_at_ns.is_(None),
                    subscription_events.c.id > after,
                    subscription_events.c.created_at_ns >= oldest_ns,
                )
                .order_by(subscription_events.c.id)
                .limit(limit + 1)
            ).all()
        truncated = len(rows) > limit
        rows = rows[:limit]
        entries: builtins.list[dict[str, Any]] = []
        for row in rows:
            event = orjson.loads(row.event)
            if subscription.format == "compact":
                entries.append(compact_event(event, row.event_id))
            else:
                event["eventId"] = row.event_id
                entries.append(event)
        last = rows[-1].id if rows else after
        return PullResult(entries, str(last) if last else "", truncated, subscription.format)

    def ack(self, name: str, event_id: str) -> bool:
        """Acknowledge an event: it is not pulled again. False if the subscription has no
        such unacknowledged event (an id it never had, one acknowledged before, or one that
        `expire` removed). NoSuchSubscription for an unknown subscription."""
        now_ns = datetime_ns(self.db.now())
        with self.db.write() as conn:
            self._get(conn, name)
            # The row stays (without its event) until it expires, so that a redelivery of
            # the event is still recognised and not stored again.
            acked = conn.execute(
                sa.update(subscription_events)
                .where(
                    subscription_events.c.subscription == name,
                    subscription_events.c.event_id == event_id,
                    subscription_events.c.acked_at_ns.is_(None),
                )
                .values(acked_at_ns=now_ns, event="")
            ).rowcount
        return acked > 0

    def expire(self, now_ns: int | None = None) -> int:
        """Remove the events, acknowledged or not, older than their subscription's
        retention; returns how many."""
        if now_ns is None:
            now_ns = datetime_ns(self.db.now())
        removed = 0
        with self.db.write() as conn:
            found = [
                _subscription(row) for row in conn.execute(sa.select(subscriptions)).mappings()
            ]
            for sub in found:  # one subscription at a time: an index covers each delete
                oldest_ns = now_ns - sub.events_retention_days * _NS_PER_DAY
                removed += conn.execute(
                    sa.delete(subscription_events).where(
                        subscription_events.c.subscription == sub.name,
                        subscription_events.c.created_at_ns < oldest_ns,
                    )
                ).rowcount
        return removed

    # --- helpers --------------------------------------------------------------------------

    def _find(
        self, conn: Connection, name: str, *, for_update: bool = False
    ) -> Subscription | None:
        query = sa.select(subscriptions).where(subscriptions.c.name == name)
        if for_update and conn.dialect.name == "postgresql":
            query = query.with_for_update()
        row = conn.execute(query).mappings().first()
        return None if row is None else _subscription(row)

    def _get(self, conn: Connection, name: str, *, for_update: bool = False) -> Subscription:
        found = self._find(conn, name, for_update=for_update)
        if found is None:
            raise NoSuchSubscription(name)
        return found


def _subscription(row: sa.RowMapping) -> Subscription:
    return Subscription(
        name=row["name"],
        topic=row["topic"],
        format=row["format"],
        events_retention_days=int(row["events_retention_days"]),
        created_at_ns=int(row["created_at_ns"]),
        owner=row["owner"],
    )


# Straight to the driver: the pipeline stores every event of a pull topic here, and
# building the rows through SQLAlchemy cost more than the database's work. Rows go in in
# the order given, so ids follow the order of the deliveries.
_INSERT_SQLITE = (
    "INSERT INTO subscription_events (subscription, event_id, event, created_at_ns, batch_id) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (subscription, event_id) DO NOTHING"
)
_EXISTING_POSTGRES = (
    "SELECT subscription, event_id FROM subscription_events "
    "WHERE subscription = ANY(%s) AND event_id = ANY(%s)"
)
_COPY_POSTGRES = (
    "COPY subscription_events (subscription, event_id, event, created_at_ns, batch_id) "
    "FROM STDIN (FORMAT BINARY)"
)
_COPY_TYPES = ("text", "text", "text", "int8", "int8")

_Row = tuple[str, str, str, int, int]  # subscription, event_id, event, created_at_ns, batch_id


def _insert_new(conn: Connection, rows: builtins.list[_Row]) -> int:
    """Insert the rows whose (subscription, event_id) is not stored yet, in order; returns
    how many were new.

    SQLite: one executemany of INSERT … ON CONFLICT DO NOTHING. PostgreSQL: a binary COPY,
    much faster than INSERT … ON CONFLICT there, which pays a speculative insertion per
    row. Events are new nearly always (they are stored again only when a Spark task or
    batch runs again, or a queued retry follows a delivery that did store), so the COPY
    first goes ahead inside a savepoint and the unique index is the check; only if it
    refuses a row are the stored events looked up (one query) and the others COPYed. That is
    safe because the caller holds the lock of every subscription it stores into (FOR
    UPDATE), so no other transaction can store into them meanwhile."""
    if conn.dialect.name != "postgresql":
        return int(conn.exec_driver_sql(_INSERT_SQLITE, rows).rowcount)
    driver = conn.connection.driver_connection
    if not isinstance(driver, psycopg.Connection):
        raise TypeError(f"PostgreSQL through psycopg 3 only, not {type(driver).__name__}")
    try:
        with driver.cursor() as cursor:
            cursor.execute("SAVEPOINT ripple_store")
            try:
                count = _copy(cursor, rows, set())
            except psycopg.errors.UniqueViolation:
                cursor.execute("ROLLBACK TO SAVEPOINT ripple_store")
            else:
                cursor.execute("RELEASE SAVEPOINT ripple_store")
                return count
            names = sorted({row[0] for row in rows})
            event_ids = builtins.list({row[1]: None for row in rows})
            cursor.execute(_EXISTING_POSTGRES, (names, event_ids))
            return _copy(cursor, rows, {(name, event_id) for name, event_id in cursor})
    except psycopg.Error as e:  # as SQLAlchemy would raise it
        raise sa.exc.DBAPIError.instance(_COPY_POSTGRES, None, e, psycopg.Error) from e


def _copy(
    cursor: psycopg.Cursor[Any], rows: builtins.list[_Row], seen: set[tuple[str, str]]
) -> int:
    """COPY the rows whose (subscription, event_id) is not in `seen`, each once; how many."""
    count = 0
    with cursor.copy(_COPY_POSTGRES) as copy:
        copy.set_types(_COPY_TYPES)
        for row in rows:
            where = (row[0], row[1])
            if where not in seen:
                seen.add(where)  # the same event twice in one call: stored once
                copy.write_row(row)
                count += 1
    return count


def _max_entries(max_entries: int) -> int:
    if (
        isinstance(max_entries, bool)
        or not isinstance(max_entries, int)
        or not 1 <= max_entries <= MAX_ENTRIES
    ):
        raise ValueError(
            f"max-entries must be a whole number from 1 to {MAX_ENTRIES}, got {max_entries!r}"
        )
    return max_entries


def _marker(marker: str | None) -> int:
    if marker is None or marker == "":
        return 0
    if not _MARKER.fullmatch(marker):
        raise ValueError(
            f"marker {marker!r} is not one a pull answered: pass a pull's next_marker, "
            "or no marker to start at the oldest event"
        )
    return int(marker)
