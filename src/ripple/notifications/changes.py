"""The eventing configuration's change log, `eventing_changes`: every change to topics,
notifications and journals appends a row in its own transaction (its id is the
configuration's generation, `ConfigWatcher` polls it) and logs a line once committed."""

from __future__ import annotations

import logging
import time

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ripple.notifications.schema import eventing_changes

__all__ = ["audit", "record_change"]

log = logging.getLogger("ripple.notifications.store")  # where the audit lines always were


# PostgreSQL: changes take this transaction-level advisory lock before drawing their change
# id, so ids are drawn in commit order and a reader that saw generation N has seen every
# change up to N. (SQLite runs one write transaction at a time anyway.)
_CHANGE_LOCK = 0x7269_7070_6C65_0001


def record_change(conn: Connection, principal: str, action: str, subject: str) -> str:
    """Append to the change log (the generation moves); the line to `audit` once committed."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_CHANGE_LOCK)))
    conn.execute(
        sa.insert(eventing_changes).values(
            at_ns=time.time_ns(), principal=principal, action=action, subject=subject
        )
    )
    return f"eventing configuration: {action} {subject} by {principal}"


def audit(line: str | None) -> None:
    """Log a committed change's line (None: nothing changed)."""
    if line:
        log.info("%s", line)
