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

__all__ = ["MAX_EXPIRATION_DAYS", "MIN_EXPIRATION_DAYS", "Journal", "JournalStore", "journals"]

# Amazon S3 Metadata's journal table: record expiration of 7 days or more
MIN_EXPIRATION_DAYS = 7
MAX_EXPIRATION_DAYS = 2_147_483_647


@dataclass(frozen=True)
class Journal:
    """A journaled bucket's configuration: its events committed from `enabled_ns` on are
    journaled; rows older than `expiration_days` are pruned (None: kept)."""

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
    """Every journaled bucket's configuration."""
    c = bucket_journals.c
    return {
        (row.project_id, row.bucket_name): Journal(row.enabled_ns, row.expiration_days)
        for row in conn.execute(
            sa.select(c.project_id, c.bucket_name, c.enabled_ns, c.expiration_days)
        )
    }


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
                    _of(project_id, bucket)
                )
            ).first()
        return None if row is None else Journal(row.enabled_ns, row.expiration_days)

    def put(
        self, project_id: uuid.UUID, bucket: str, expiration_days: int | None, principal: str
    ) -> Journal:
        """Journal the bucket from now on, or change how long its rows are kept (an enabled
        journal keeps its start)."""
        check_expiration_days(expiration_days)

        def run(conn: Connection) -> tuple[Journal, str]:
            c = bucket_journals.c
            enabled = conn.execute(sa.select(c.enabled_ns).where(_of(project_id, bucket))).scalar()
            journal = Journal(enabled or time.time_ns(), expiration_days)
            if enabled is None:
                conn.execute(
                    sa.insert(bucket_journals).values(
                        project_id=project_id,
                        bucket_name=bucket,
                        enabled_ns=journal.enabled_ns,
                        expiration_days=expiration_days,
                    )
                )
            else:
                conn.execute(
                    sa.update(bucket_journals)
                    .where(_of(project_id, bucket))
                    .values(expiration_days=expiration_days)
                )
            days = "kept" if expiration_days is None else f"{expiration_days} days"
            return journal, record_change(conn, principal, "put-journal", f"{bucket}: {days}")

        journal, line = self.db.run_write(run)
        audit(line)
        return journal

    def delete(self, project_id: uuid.UUID, bucket: str, principal: str) -> bool:
        """Stop journaling the bucket (the rows written stay); whether it was journaled."""

        def run(conn: Connection) -> str | None:
            if conn.execute(sa.delete(bucket_journals).where(_of(project_id, bucket))).rowcount:
                return record_change(conn, principal, "delete-journal", bucket)
            return None

        line = self.db.run_write(run)
        audit(line)
        return line is not None


def _of(project_id: uuid.UUID, bucket: str) -> sa.ColumnElement[bool]:
    return (bucket_journals.c.project_id == project_id) & (bucket_journals.c.bucket_name == bucket)
