"""PostgreSQL: send a transaction's change records and its COMMIT in one libpq pipeline.

This runs in every eventing commit, so it speaks to libpq directly (psycopg's `PGconn`),
which costs the writer far less CPU than psycopg's `Connection.pipeline()`: the INSERTs (one
statement prepared per connection, run on a generic plan, since planning it anew at each
commit cost more than running it), the COMMIT and a Sync go out in one write. psycopg
deallocates prepared statements on a rollback, so the statement is kept in psycopg's own
table (`PrepareManager`, an internal) and prepared anew when missing there; where those
internals differ (`available()` is false) the caller uses psycopg's public pipeline. The
connection must be psycopg's, non-blocking and not in a psycopg pipeline.

Why: docs/changestream.md, "Ordering and the no-skip rule"; the figures: BENCHMARKS.md,
"Change stream: what recording costs a writer, and how fast it reads".
"""

from __future__ import annotations

import functools
import itertools
import select
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import errors, pq

_NAMES = itertools.count()  # names unique in the process, so never one psycopg still has
# For the rest of the transaction: the records' statement is planned once, not per commit
GENERIC_PLAN = "SET LOCAL plan_cache_mode = force_generic_plan"
_GENERIC_PLAN = GENERIC_PLAN.encode()


def _statements(driver: psycopg.Connection[Any]) -> Any:
    """psycopg's table of the connection's prepared statements: (query, types) → name."""
    return getattr(getattr(driver, "_prepared", None), "_names", None)


def available(driver: psycopg.Connection[Any]) -> bool:
    """Whether `insert_and_commit` can be used on this connection: psycopg keeps its prepared
    statements (and the connection's lock) where it expects, prepared statements are allowed
    (`prepare_threshold` None turns them off, as for a pooler in transaction mode), and the
    connection is in a transaction, not in autocommit."""
    return (
        isinstance(_statements(driver), OrderedDict)
        and hasattr(driver, "lock")
        and driver.prepare_threshold is not None
        and not driver.autocommit
    )


@functools.cache  # a handful of statements, one per commit
def _numbered(statement: str) -> bytes:
    """`%s` placeholders as libpq's `$1`, `$2`, …"""
    if "%" in statement.replace("%s", ""):
        raise ValueError("the statement has a % that is not a %s placeholder")
    parts = statement.split("%s")
    numbered = parts[0] + "".join(f"${n}{part}" for n, part in enumerate(parts[1:], 1))
    return numbered.encode()


def _text(value: Any, encoding: str) -> bytes | None:
    """A parameter in PostgreSQL's text format (the statement's casts give the types)."""
    if value is None:
        return None
    if value is True:
        return b"t"
    if value is False:
        return b"f"
    if isinstance(value, str):
        if "\x00" in value:  # libpq would cut the value short there
            raise ValueError("a change record value holds a NUL character")
        return value.encode(encoding)
    if isinstance(value, int):
        return str(value).encode()
    raise TypeError(f"cannot send a {type(value).__name__} as a change record value")


def _wait(fd: int, writing: bool) -> None:
    poll = select.poll()
    poll.register(fd, select.POLLIN | (select.POLLOUT if writing else 0))
    poll.poll()


def insert_and_commit(
    driver: psycopg.Connection[Any], statement: str, rows: Sequence[Sequence[Any]]
) -> None:
    """Execute `statement` (with `%s` placeholders, on a generic plan) once per row, then
    COMMIT, in one round trip. Raises the psycopg error of the first statement that failed
    (the transaction is then left aborted, for the caller to roll back)."""
    pgconn = driver.pgconn
    encoding = driver.info.encoding
    numbered = _numbered(statement)
    key = (numbered, ())  # psycopg's key: the query and its parameters' type oids
    statements = _statements(driver)
    parameters = [[_text(v, encoding) for v in row] for row in rows]
    with driver.lock:
        name = statements.get(key)
        preparing = name is None
        if preparing:
            name = f"ripple_record_{next(_NAMES)}".encode()
        else:
            statements.move_to_end(key)  # recently used: the last psycopg would evict
        try:
            pgconn.enter_pipeline_mode()
            if preparing:
                pgconn.send_prepare(name, numbered)
            pgconn.send_query_params(_GENERIC_PLAN, None)
            for values in parameters:
                pgconn.send_query_prepared(name, values)
            pgconn.send_query_params(b"COMMIT", None)
            pgconn.pipeline_sync()
            error, failed_at = _exchange(pgconn, encoding)
            pgconn.exit_pipeline_mode()
        except BaseException:
            driver.close()  # the pipeline is in an unknown state: the pool replaces it
            raise
        if isinstance(error, errors.InvalidSqlStatementName):
            statements.pop(key, None)  # deallocated behind psycopg's back: prepare anew
        elif preparing and failed_at != 0:  # a failed INSERT does not undo the prepare
            statements[key] = name
    if error is not None:
        raise error


def _exchange(pgconn: pq.abc.PGconn, encoding: str) -> tuple[psycopg.Error | None, int]:
    """Send what is queued and read every result up to the Sync's: the first error, and the
    index of the command that raised it (-1 if none did)."""
    fd = pgconn.socket
    while pgconn.flush():
        _wait(fd, writing=True)
        pgconn.consume_input()
    error: psycopg.Error | None = None
    failed_at, command, ended = -1, 0, False
    while True:
        while pgconn.is_busy():
            _wait(fd, writing=False)
            pgconn.consume_input()
        result = pgconn.get_result()
        if result is None:
            if ended:  # a second one in a row: nothing more yet (as psycopg reads it)
                if pgconn.status == pq.ConnStatus.BAD:
                    raise errors.OperationalError("the connection to the server was lost")
                _wait(fd, writing=False)
                pgconn.consume_input()
                continue
            command, ended = command + 1, True  # the end of one command's results
            continue
        ended = False
        if result.status == pq.ExecStatus.PIPELINE_SYNC:
            return error, failed_at
        if result.status == pq.ExecStatus.FATAL_ERROR and error is None:
            error, failed_at = errors.error_from_result(result, encoding=encoding), command
