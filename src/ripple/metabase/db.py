"""The metabase handle: engine set-up for SQLite (WAL) and PostgreSQL (psycopg 3),
read and write transactions, and retrying writers that race for the same key.

Every write transaction carries a change capture: what it changed and the request context
(transaction tag). Just before it commits, the change stream writer turns the capture into
change records in the same transaction. A transaction is excluded from the change stream
unless it changes an object of a bucket with eventing (`eventing`, a cached lookup).
"""

from __future__ import annotations

import fcntl
import logging
import os
import random
import select
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.engine import Connection, Engine

from ripple.changestream.capture import Capture, attach, detach
from ripple.changestream.tag import TransactionTag
from ripple.changestream.values import datetime_ns
from ripple.changestream.writer import ChangeStreamWriter, Partitioning
from ripple.metabase.errors import CommitTooLate, ConflictRetry, InvalidArgument
from ripple.metabase.group import AgainAlone, Group, Outcome
from ripple.metabase.schema import buckets, objects

# Is eventing enabled for this bucket (project id, bucket name)? Called for every row a
# write changes, so it must answer from memory.
Eventing = Callable[[uuid.UUID, str], bool]

T = TypeVar("T")

log = logging.getLogger(__name__)

_WRITE_OPTION = "ripple_write"
_MAX_ATTEMPTS = 8
_TOO_LATE = "the metabase was too slow to commit this write in time; try again"
# How long a member of a group commit waits for a lock over PostgreSQL (`write_together`)
_GROUP_LOCK_WAIT = "50ms"


def normalize_url(url: str) -> sa.URL:
    """Parse a database URL, choosing psycopg 3 for PostgreSQL. Raises ValueError if bad."""
    try:
        parsed = sa.make_url(url)
    except exc.ArgumentError as e:
        raise ValueError("not a database URL") from e
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise ValueError(f"unsupported database {parsed.drivername!r}: use sqlite or postgresql")
    return parsed


def _sqlite_engine(url: sa.URL) -> Engine:
    if url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(url, connect_args={"timeout": 30})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control away from pysqlite so BEGIN is ours to emit.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit is on disk before it returns, so an acknowledged write survives a
        # power loss (NORMAL, in WAL mode, may lose the last commits then)
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # Writers take the write lock up front: a deferred transaction that later tries to
        # write can fail with SQLITE_BUSY instead of waiting its turn.
        # On the driver's connection: through SQLAlchemy's execution this BEGIN cost more
        # than some of the statements it begins.
        write = conn.get_execution_options().get(_WRITE_OPTION, False)
        conn.connection.driver_connection.execute(  # type: ignore[union-attr]
            "BEGIN IMMEDIATE" if write else "BEGIN"
        )

    return engine


def _postgres_engine(url: sa.URL, echo: bool) -> Engine:
    # enough kept connections for a gateway's worker threads, so they are not opened and
    # closed per request
    # No pre-ping: it costs every transaction a round trip. A kept connection is checked
    # on checkout without one instead (`_closed_by_server`).
    engine = sa.create_engine(url, echo=echo, pool_size=16, max_overflow=16)

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
        if _closed_by_server(dbapi_conn):
            raise exc.DisconnectionError("the server closed this kept connection")

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # psycopg prepares a statement after 5 runs, and PostgreSQL then may switch to a
        # generic plan that cannot see how long the UNNEST arrays are: bulk deletes became
        # many times slower once single deletes had prepared the same statement
        # (BENCHMARKS.md, "Bulk delete"). Keep the prepared statements, but plan each run
        # with its real parameters.
        with dbapi_conn.cursor() as cursor:
            cursor.execute("SET plan_cache_mode = force_custom_plan")
        dbapi_conn.commit()

    return engine


def _closed_by_server(dbapi_conn: Any) -> bool:
    """Whether an idle kept psycopg connection is no longer usable: closed or broken on
    this side, or readable on its socket, which for a connection between transactions means
    the server has said goodbye (a restart or `pg_terminate_backend` sends an error and
    closes). The pool then opens a fresh one (SQLAlchemy's custom pessimistic disconnect
    handling). A wrong guess costs a reconnect, never an error."""
    if dbapi_conn.closed or dbapi_conn.broken:
        return True
    try:
        poll = select.poll()  # not select.select: a busy gateway's descriptors pass 1024
        poll.register(dbapi_conn.pgconn.socket, select.POLLIN | select.POLLPRI)
        return bool(poll.poll(0))
    except Exception:  # psycopg's OperationalError: the connection is lost
        return True


class _WriterTurns:
    """SQLite's one writer at a time, taken in turns by every process on the file: a
    thread lock, then an exclusive `flock` on `<database>-writer.lock`. The kernel wakes
    the next waiter the moment a writer is done; SQLite's busy handler, which writers of
    other processes met before, sleeps and polls (up to 100 ms a turn). Re-entrant within
    a thread, as the thread lock is. Only the waiting is ordered here: SQLite's own lock
    still guards the data (a process that shares the lock file's descriptor with a forked
    child is no longer kept apart from it by the flock, and meets SQLite's lock instead)."""

    def __init__(self, database: Path) -> None:
        self.path = database.with_name(database.name + "-writer.lock")
        self._lock = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    def __enter__(self) -> None:
        self._lock.acquire()
        try:
            if self._depth == 0:
                if self._fd is None:
                    self._fd = self._open()
                if self._fd >= 0:
                    fcntl.flock(self._fd, fcntl.LOCK_EX)
            self._depth += 1
        except BaseException:
            self._lock.release()
            raise

    def __exit__(self, *_: object) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None and self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._lock.release()

    def _open(self) -> int:
        """The lock file's descriptor; -1 (writers meet in SQLite's lock, as before) when
        this user may not open it (another user made it, e.g. a command run as root)."""
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except PermissionError as e:
            log.warning(
                "cannot open %s (%s): writers of several processes wait longer",
                e.filename,
                e.strerror,
            )
            return -1


_TURNS: dict[str, _WriterTurns] = {}
_TURNS_LOCK = threading.Lock()


def _writer_turns(database: str) -> _WriterTurns:
    """The one `_WriterTurns` of this process for a database file (two handles on one file
    in one process share it: a thread writing through both must not wait for itself)."""
    path = os.path.realpath(database)
    with _TURNS_LOCK:
        if path not in _TURNS:
            _TURNS[path] = _WriterTurns(Path(path))
        return _TURNS[path]


def _outcome(call: Callable[[], T]) -> Outcome[T]:
    try:
        return Outcome(value=call())
    except Exception as e:
        return Outcome(error=e)


def _waited_too_long(error: BaseException | None) -> bool:
    """Whether `error` is (or was raised from) PostgreSQL's lock_not_available: a lock wait
    ended by `lock_timeout` (`Metabase.write_together`)."""
    for _ in range(8):  # a chain of causes, not a cycle of them
        if error is None:
            return False
        if _sqlstate(error) == "55P03":
            return True
        error = error.__cause__ or error.__context__
    return False


def _is_write_conflict(error: exc.DBAPIError) -> bool:
    """A unique violation on a version we computed, a serialization failure or a deadlock."""
    return _sqlstate(error) in ("23505", "40001", "40P01")


def _sqlstate(error: BaseException) -> str | None:
    """The database's SQLSTATE of a driver error, raised as it is or wrapped by SQLAlchemy."""
    sqlstate = getattr(getattr(error, "orig", error), "sqlstate", None)
    return sqlstate if isinstance(sqlstate, str) else None


class Metabase:
    """A connection pool to the metabase, and the clock its rules are judged by."""

    def __init__(self, url: str, *, echo: bool = False, eventing: Eventing | None = None) -> None:
        self.url = normalize_url(url)
        # SQLite has one writer at a time: writers queue on a lock (every process's, on a
        # file: `_WriterTurns`) rather than in SQLite's busy handler, which sleeps and polls
        self._writers: AbstractContextManager[object] = nullcontext()
        if self.url.get_backend_name() == "sqlite":
            self.engine = _sqlite_engine(self.url)
            database = self.url.database or ":memory:"
            in_memory = database == ":memory:"
            self._writers = threading.RLock() if in_memory else _writer_turns(database)
        else:
            self.engine = _postgres_engine(self.url, echo)
        # the engine of write transactions (SQLite: BEGIN IMMEDIATE)
        self.writer = self.engine.execution_options(**{_WRITE_OPTION: True})
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)
        self.eventing: Eventing = eventing or (lambda _project, _bucket: False)
        self._local = threading.local()  # this thread's commit deadline, if any
        self.changestreams = ChangeStreamWriter(
            {"objects": objects, "buckets": buckets},
            {
                "objects": Partitioning(("project_id", "bucket_name"), spread="object_key"),
                "buckets": Partitioning(("project_id", "name")),
            },
            self._in_scope,
        )

    def _in_scope(self, table: str, row: Mapping[str, object]) -> bool:
        if table != "objects":
            return True  # a bucket's own changes (project_eventing excludes no transaction)
        project_id, bucket_name = row["project_id"], row["bucket_name"]
        if not isinstance(project_id, uuid.UUID) or not isinstance(bucket_name, str):
            raise TypeError("an objects row without a project id and bucket name")
        return self.eventing(project_id, bucket_name)

    @property
    def dialect(self) -> str:
        """`sqlite` or `postgresql`."""
        return self.engine.dialect.name

    def now(self) -> datetime:
        return self.clock()

    @contextmanager
    def read(self, *, exclude_txn_from_change_streams: bool = False) -> Iterator[Connection]:
        """A read-only transaction. It writes nothing, so it cannot be excluded from change
        streams: asking to is an error, as in Spanner."""
        if exclude_txn_from_change_streams:
            raise InvalidArgument(
                "exclude_txn_from_change_streams is a write transaction option; "
                "a read-only transaction must not set it"
            )
        reader: Connection | None = getattr(self._local, "reader", None)
        if reader is not None and not reader.in_transaction():  # in `read_together`
            with reader.begin():
                yield reader
            return
        with self.engine.connect() as conn, conn.begin():
            yield conn

    def read_together(self, calls: Sequence[Callable[[], T]]) -> list[Outcome[T]]:
        """Call each of `calls` in turn, every read transaction they begin (`read`) on one
        connection, one after another (each its own snapshot: a call that looks again sees
        what committed meanwhile); each call's outcome, in order. It saves a pooled
        connection's checkout and return per call."""
        if len(calls) == 1 or getattr(self._local, "reader", None) is not None:
            return [_outcome(call) for call in calls]
        with self.engine.connect() as conn:
            self._local.reader = conn
            try:
                return [_outcome(call) for call in calls]
            finally:
                self._local.reader = None

    @contextmanager
    def commit_deadline(self, deadline: float) -> Iterator[None]:
        """Write transactions this thread runs in the block commit before `deadline`
        (`time.monotonic()`), or roll back with `CommitTooLate`. The gateway commits new
        data only within a window of its last write, so `ripple data gc`, which waits
        longer than that window, never removes a file whose commit is still to come."""
        before = getattr(self._local, "deadline", None)
        self._local.deadline = deadline
        try:
            yield
        finally:
            self._local.deadline = before

    @contextmanager
    def write(
        self,
        tag: TransactionTag | None = None,
        *,
        system: bool = False,
        exclude_txn_from_change_streams: bool = True,
    ) -> Iterator[Connection]:
        """A write transaction: committed when the block ends, rolled back on an exception.

        Like every write transaction of the metabase it is excluded from change streams that
        allow transaction exclusion, unless it is one of the operations that make events
        (commit, copy, delete, DeleteObjects) and says so with
        `exclude_txn_from_change_streams=False`; even then only the changes in buckets with
        eventing are recorded. `tag` is the request context its records carry; `system`
        marks a transaction ripple itself runs (TTL deletes)."""
        capture = Capture(
            tag, system=system, exclude_txn_from_change_streams=exclude_txn_from_change_streams
        )
        group: Group | None = getattr(self._local, "group", None)
        if group is not None:  # one of `write_together`'s members: a savepoint
            with group.member() as conn:
                attach(conn, capture)
                try:
                    yield conn
                    deadline = self._deadline_kept()
                finally:
                    detach(conn)
            # released: its change records are written with the group's (`write_together`)
            group.captures.append(capture)
            if deadline is not None:
                group.deadlines.append(deadline)
            return
        with self._writers, self.writer.connect() as conn, conn.begin():
            attach(conn, capture)
            try:
                yield conn
                self._deadline_kept()
                now_ns = datetime_ns(self.now())
                # PostgreSQL sends the change records and the COMMIT together
                self.changestreams.flush(conn, capture, now_ns, commit=True)
            finally:
                detach(conn)

    def _deadline_kept(self) -> float | None:
        """This thread's commit deadline (`commit_deadline`), if it has one; `CommitTooLate`
        once it has passed."""
        deadline: float | None = getattr(self._local, "deadline", None)
        if deadline is not None and time.monotonic() > deadline:
            raise CommitTooLate(_TOO_LATE)
        return deadline

    def run_write(
        self,
        fn: Callable[[Connection], T],
        tag: TransactionTag | None = None,
        *,
        system: bool = False,
        exclude_txn_from_change_streams: bool = True,
    ) -> T:
        """Run `fn` in a write transaction, again from the start if a concurrent writer won.

        `fn` must compute everything it writes from what it reads inside the transaction.
        """
        for attempt in range(_MAX_ATTEMPTS):
            try:
                with self.write(
                    tag,
                    system=system,
                    exclude_txn_from_change_streams=exclude_txn_from_change_streams,
                ) as conn:
                    return fn(conn)
            except exc.DBAPIError as e:
                if not _is_write_conflict(e):
                    raise
                time.sleep(random.uniform(0, 0.002 * 2**attempt))
        raise ConflictRetry("too many concurrent writes to the same objects; try again")

    def write_together(self, calls: Sequence[Callable[[], T]]) -> list[Outcome[T]]:
        """Group commit (`ripple.metabase.group`): call each of `calls` in turn, in one
        write transaction in which every write transaction a call makes (`write`,
        `run_write`) is a savepoint, and commit once, with every member's change records.
        Each call's outcome, in order: its result, or its exception (its writes rolled back);
        if the commit fails (or a member's commit deadline, `commit_deadline`, has passed by
        then), nothing is committed and every call that succeeded gets the commit's
        exception.

        Over PostgreSQL a member waits for a row or key lock at most `_GROUP_LOCK_WAIT`
        (another gateway's write of the same key; another group that locked keys in
        another order): then its call is rolled back, every write it made, and its outcome
        is `AgainAlone`: the caller makes it again, alone (with no limit on its waits), once
        the group's calls are answered. Groups that lock in different orders so never wait
        on each other for long, nor a group for one member's wait.

        Calls must write only through this metabase, in this thread, and do nothing that
        cannot be undone before the commit (remove files after it)."""
        if len(calls) == 1:
            return [_outcome(call) for call in calls]
        if getattr(self._local, "group", None) is not None:
            raise RuntimeError("write_together within write_together")
        postgres = self.dialect == "postgresql"
        with self._writers, self.writer.connect() as conn:
            transaction = conn.begin()
            group = Group(conn, call_savepoints=postgres)
            if postgres:  # this also begins the transaction on the server
                group.driver.execute(f"SET LOCAL lock_timeout = '{_GROUP_LOCK_WAIT}'")
            self._local.group = group
            try:
                outcomes = [self._member_call(group, call) for call in calls]
            finally:
                self._local.group = None
            try:
                group.check()
                if group.deadlines and time.monotonic() > min(group.deadlines):
                    raise CommitTooLate(_TOO_LATE)
                if postgres:  # the change records wait for partition rows as long as they must
                    group.driver.execute(group.released("SET LOCAL lock_timeout = DEFAULT"))
                now_ns = datetime_ns(self.now())
                self.changestreams.flush_all(conn, group.captures, now_ns, commit=postgres)
                transaction.commit()
            except Exception as e:
                if transaction.is_active:
                    transaction.rollback()
                outcomes = [o if o.error is not None else Outcome(error=e) for o in outcomes]
        return outcomes

    @staticmethod
    def _member_call(group: Group, call: Callable[[], T]) -> Outcome[T]:
        group.start_call()
        outcome = _outcome(call)
        if group.call_savepoints and _waited_too_long(outcome.error) and group.undo_call():
            outcome = Outcome(error=AgainAlone(str(outcome.error)))
        return outcome

    def dispose(self) -> None:
        self.engine.dispose()
