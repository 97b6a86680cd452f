"""Group commit: the write transactions of several requests run one after another in one
transaction of the metabase, each in a savepoint of its own, and committed together.

Each commit costs an fsync (SQLite; PostgreSQL's own WAL flush) and, in a gateway, a thread
hop and a pooled connection's checkout, begin, commit and return: for a small PutObject these
cost as much CPU as its statements. A gateway hands the writes waiting at one moment to
`Metabase.write_together` (`ripple.gateway.together`), which pays them once for all.

A member (one call) sees the writes of the members before it, as it would had they
committed first; one that fails is rolled back to its savepoint, alone; its change records
are its own (their own transaction id and request context, `Metabase.write`), written for
every member at the end, with the COMMIT, in partition order, as one transaction writes its
own. Nothing is committed until every member has run, and if the commit fails no member is
committed."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from psycopg.pq import TransactionStatus
from sqlalchemy.engine import Connection

from ripple.changestream.capture import Capture

T = TypeVar("T")


@dataclass
class Outcome(Generic[T]):
    """What one member came to: its result, or the exception it (or the commit) raised."""

    value: T | None = None
    error: Exception | None = None

    def result(self) -> T:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


class AgainAlone(Exception):
    """A member waited too long for a lock another transaction holds (PostgreSQL,
    `Metabase.write_together`): everything it wrote was rolled back; make it again, alone."""


class GroupBroken(Exception):
    """The group's transaction ended under a member (SQLite rolls a whole transaction back on
    some errors: a full disk, an I/O error): no member of the group is committed."""


@dataclass
class Group:
    """The transaction a group of write transactions runs in, on one connection."""

    conn: Connection
    deadlines: list[float] = field(default_factory=list)  # the members' commit deadlines
    captures: list[Capture] = field(default_factory=list)  # what the members changed
    broken: bool = False  # a member's writes could not be undone: commit nothing
    # PostgreSQL: each call of the group has a savepoint too (`call`), taken with its first
    # member's (no round trip of its own) and never released
    call_savepoints: bool = False
    _call_pending: bool = False  # the current call's savepoint is still to be taken
    _call_taken: bool = False  # the current call's savepoint was taken
    _call_captured: int = 0  # captures before the current call
    # PostgreSQL: a request's write (a member not within another) is released with the
    # next statement the group sends, not in a round trip of its own
    release_pending: bool = False
    _depth: int = 0  # members open within one another

    def start_call(self) -> None:
        """A call of the group begins (`call_savepoints`)."""
        self._call_pending, self._call_taken = self.call_savepoints, False
        self._call_captured = len(self.captures)

    def undo_call(self) -> bool:
        """Roll the current call back, every member of it (a write it released before one
        that waited too long: a rate-limit token); whether it could be."""
        if not self._call_taken:
            return True  # it made no member: it wrote nothing
        if self.broken or not self._open(failed=True):
            return False
        self.release_pending = False  # its member is rolled back with it
        try:
            self.driver.execute("ROLLBACK TO call")
        except Exception:
            self.broken = True
            return False
        del self.captures[self._call_captured :]
        return True

    def check(self) -> None:
        """`GroupBroken` unless the group's transaction is open and whole."""
        if not self.intact():
            raise GroupBroken("the metabase rolled back this write with others")

    @property
    def driver(self) -> Any:
        """The group's driver connection (sqlite3's or psycopg's)."""
        return self.conn.connection.driver_connection

    def intact(self) -> bool:
        """Whether the group's transaction is still open, every failed member undone."""
        return not self.broken and self._open(failed=False)

    def _open(self, *, failed: bool) -> bool:
        """Whether the transaction is open (`failed`: or failed, waiting to be rolled back
        to a savepoint: PostgreSQL)."""
        driver = self.driver
        if isinstance(driver, sqlite3.Connection):
            return driver.in_transaction
        status = driver.info.transaction_status
        return status == TransactionStatus.INTRANS or (
            failed and status == TransactionStatus.INERROR
        )

    @contextmanager
    def member(self) -> Iterator[Connection]:
        """One member's write transaction: a savepoint, released when the block ends, rolled
        back (alone) on an exception. On the driver's connection, as BEGIN is
        (`ripple.metabase.db`): through SQLAlchemy a savepoint costs more than its statement."""
        self.check()
        driver = self.driver
        savepoints = "SAVEPOINT member"
        if self._call_pending:
            savepoints = "SAVEPOINT call; SAVEPOINT member"
        driver.execute(self.released(savepoints))  # one round trip for all
        self._call_pending, self._call_taken = False, self._call_taken or self._call_pending
        captured = len(self.captures)
        self._depth += 1
        try:
            yield self.conn
            self.check()
        except BaseException:
            # the captures of the write transactions it made within itself go with it
            del self.captures[captured:]
            if not self.broken and self._open(failed=True):
                try:
                    driver.execute("ROLLBACK TO member")
                    driver.execute("RELEASE member")
                except Exception:
                    self.broken = True  # its writes would be committed with the rest
            raise
        finally:
            self._depth -= 1
        if self.call_savepoints and self._depth == 0:
            self.release_pending = True  # with what the group sends next (`released`)
            return
        try:
            driver.execute("RELEASE member")
        except Exception:
            self.broken = True
            raise

    def released(self, statement: str) -> str:
        """`statement`, after the RELEASE of the last member if it is still to be sent."""
        if not self.release_pending:
            return statement
        self.release_pending = False
        return f"RELEASE member; {statement}"
