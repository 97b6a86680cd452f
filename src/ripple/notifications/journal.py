"""A bucket's journal configuration: whether the pipeline writes every event of the bucket's
objects into the journal table, since when, and how long the rows are kept
(`bucket_journals`). The S3 document is the gateway's (`ripple.gateway.journal_xml`); the
journal itself is the pipeline's (docs/journal.md)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ripple.metabase import Metabase
from ripple.notifications.changes import audit, record_change
from ripple.notifications.errors import invalid
from ripple.notifications.phase1 import BucketKey
from ripple.notifications.schema import bucket_journals

__all__ = [
    "MAX_EXPIRATION_DAYS",
    "MIN_EXPIRATION_DAYS",
    "Journal",
    "JournalStore",
    "disable_journal",
    "journal_expirations",
    "journal_periods",
    "journals",
]

# Amazon S3 Metadata's journal table: record expiration of 7 days or more
MIN_EXPIRATION_DAYS = 7
MAX_EXPIRATION_DAYS = 2_147_483_647


@dataclass(frozen=True)
class Journal:
    """A journaled bucket's configuration: its events committed from `enabled_ns` on are
    journaled; `expiration_days`, how long its rows are kept (None: for ever;
    `ripple.notifications.journal_expiry` drops the older ones)."""

    enabled_ns: int
    expiration_days: int | None = None

    @property
    def enabled_at(self) -> datetime:
        """`enabled_ns` in UTC, to the microsecond (no rounding through a float)."""
        seconds, nanoseconds = divmod(self.enabled_ns, 1_000_000_000)
        return datetime.fromtimestamp(seconds, UTC).replace(microsecond=nanoseconds // 1000)


def check_expiration_days(days: int | None) -> None:
    """`NotificationError` (InvalidArgument) unless `days` is None or within S3's bounds."""
    if days is not None and not MIN_EXPIRATION_DAYS <= days <= MAX_EXPIRATION_DAYS:
        raise invalid(
            f"record expiration is {MIN_EXPIRATION_DAYS} to {MAX_EXPIRATION_DAYS} days",
            "Days",
            str(days),
        )


def journals(conn: Connection) -> dict[BucketKey, Journal]:
    """Every journaled bucket's configuration (its journal enabled now)."""
    c = bucket_journals.c
    return {
        (row.project_id, row.bucket_name): Journal(row.enabled_ns, row.expiration_days)
        for row in conn.execute(
            sa.select(c.project_id, c.bucket_name, c.enabled_ns, c.expiration_days).where(
                c.disabled_ns.is_(None)
            )
        )
    }


def journal_periods(conn: Connection) -> dict[BucketKey, tuple[int, int | None]]:
    """(enabled ns, disabled ns or None) of every bucket's latest journal, a disabled one
    too: the events committed within it are the journal's."""
    c = bucket_journals.c
    rows = conn.execute(sa.select(c.project_id, c.bucket_name, c.enabled_ns, c.disabled_ns))
    return {(r.project_id, r.bucket_name): (r.enabled_ns, r.disabled_ns) for r in rows}


def journal_expirations(conn: Connection) -> dict[str, int]:
    """Bucket name → the record expiration in days of its latest journal, enabled or not,
    for the buckets whose rows expire (the journal table's partitions are by bucket name)."""
    c = bucket_journals.c
    rows = conn.execute(sa.select(c.bucket_name, c.enabled_ns, c.expiration_days))
    latest: dict[str, tuple[int, int | None]] = {}
    for row in rows:
        if row.bucket_name not in latest or row.enabled_ns > latest[row.bucket_name][0]:
            latest[row.bucket_name] = (row.enabled_ns, row.expiration_days)
    return {name: days for name, (_, days) in latest.items() if days is not None}


def disable_journal(conn: Connection, project_id: uuid.UUID, bucket: str) -> bool:
    """End the bucket's journal now, in the caller's transaction; whether it had one."""
    ended = conn.execute(
        sa.update(bucket_journals)
        .where(_of(project_id, bucket), bucket_journals.c.disabled_ns.is_(None))
        .values(disabled_ns=time.time_ns())
    )
    return bool(ended.rowcount)


class JournalStore:
    """The journal configurations of a metabase's buckets; every change is logged in
    `eventing_changes`, so the processes' registries pick it up (a journaled bucket's
    transactions are written to the change stream)."""

    def __init__(self, db: Metabase) -> None:
        self.db = db

    def get(self, project_id: uuid.UUID, bucket: str) -> Journal | None:
        with self.db.read() as conn:
            row = conn.execute(
                sa.select(bucket_journals.c.enabled_ns, bucket_journals.c.expiration_days).where(
                    _of(project_id, bucket), bucket_journals.c.disabled_ns.is_(None)
                )
            ).first()
        return None if row is None else Journal(row.enabled_ns, row.expiration_days)

    def put(
        self, project_id: uuid.UUID, bucket: str, expiration_days: int | None, principal: str
    ) -> Journal:
        """Journal the bucket from now on, or change how long its rows are kept (an enabled
        journal keeps its start). A journal enabled again after it was disabled starts anew:
        the events of its earlier period that the pipeline has not read by then are not
        journaled."""
        check_expiration_days(expiration_days)

        def run(conn: Connection) -> tuple[Journal, str]:
            c = bucket_journals.c
            row = conn.execute(
                sa.select(c.enabled_ns, c.disabled_ns).where(_of(project_id, bucket))
            ).first()
            running = row.enabled_ns if row is not None and row.disabled_ns is None else None
            journal = Journal(running or time.time_ns(), expiration_days)
            values = {
                "enabled_ns": journal.enabled_ns,
                "disabled_ns": None,
                "expiration_days": expiration_days,
            }
            if row is None:
                conn.execute(
                    sa.insert(bucket_journals).values(
                        project_id=project_id, bucket_name=bucket, **values
                    )
                )
            else:
                conn.execute(
                    sa.update(bucket_journals).where(_of(project_id, bucket)).values(values)
                )
            days = "kept" if expiration_days is None else f"{expiration_days} days"
            return journal, record_change(conn, principal, "put-journal", f"{bucket}: {days}")

        journal, line = self.db.run_write(run)
        audit(line)
        return journal

    def delete(self, project_id: uuid.UUID, bucket: str, principal: str) -> bool:
        """Stop journaling the bucket from now on (the rows written stay, and the events
        committed before now are still journaled); whether it was journaled."""

        def run(conn: Connection) -> str | None:
            if disable_journal(conn, project_id, bucket):
                return record_change(conn, principal, "delete-journal", bucket)
            return None

        line = self.db.run_write(run)
        audit(line)
        return line is not None


def _of(project_id: uuid.UUID, bucket: str) -> sa.ColumnElement[bool]:
    return (bucket_journals.c.project_id == project_id) & (bucket_journals.c.bucket_name == bucket)
