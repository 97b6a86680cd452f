"""Prebuilt statements run straight on the connection's DB-API cursor: the hot paths'
one-key look-ups and writes (every PUT, GET and DELETE makes a few).

SQLAlchemy compiles each statement once per dialect, and hands over its type conversions
(bind and result processors: UUIDs and datetimes on SQLite, JSON); a run then costs the
driver's own work and a loop over the parameters and columns, not SQLAlchemy's per-execution
machinery (execution context, events, result metadata), which cost several times what
SQLite spends executing a one-row look-up. A driver error is raised as SQLAlchemy's
`DBAPIError` subclass for it, as `Connection.execute` would, so callers (the write retry on
a conflict) see no difference; listeners of SQLAlchemy's `before_cursor_execute` event
(instrumentation, tests counting statements) see each statement as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

__all__ = ["Lean"]

Processor = Callable[[Any], Any]


@dataclass(frozen=True)
class _Compiled:
    sql: str
    positional: tuple[str, ...] | None  # bind names in order (qmark drivers), or None
    defaults: Mapping[str, Any]  # the values the statement binds itself (a LIMIT's)
    binds: Mapping[str, Processor]  # bind name -> its type's conversion
    columns: tuple[str, ...]  # result column names
    results: tuple[tuple[str, Processor], ...]  # the columns that need a conversion


class Lean:
    """One statement, compiled per dialect on first use; `rows` and `run` execute it."""

    def __init__(self, statement: ClauseElement) -> None:
        self.statement = statement
        self._compiled: dict[tuple[str, str], _Compiled] = {}
        self._lock = threading.Lock()

    def rows(self, conn: Connection, parameters: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The result rows, as column name -> value."""
        compiled = self._of(conn.dialect)
        cursor = self._execute(conn, compiled, parameters)
        try:
            fetched = cursor.fetchall()
        finally:
            cursor.close()
        found = [dict(zip(compiled.columns, row, strict=True)) for row in fetched]
        for row in found:
            for name, process in compiled.results:
                value = row[name]
                if value is not None:
                    row[name] = process(value)
        return found

    def run(self, conn: Connection, parameters: Mapping[str, Any]) -> int:
        """Execute it for its effect; the number of rows it changed."""
        cursor = self._execute(conn, self._of(conn.dialect), parameters)
        try:
            return int(cursor.rowcount)
        finally:
            cursor.close()

    def _execute(self, conn: Connection, compiled: _Compiled, parameters: Mapping[str, Any]) -> Any:
        values = {**compiled.defaults, **parameters}
        for name, process in compiled.binds.items():
            if values.get(name) is not None:
                values[name] = process(values[name])
        bound: Sequence[Any] | Mapping[str, Any] = values
        if compiled.positional is not None:
            bound = [values[name] for name in compiled.positional]
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        if conn.dispatch.before_cursor_execute:  # instrumentation, tests: they see it too
            conn.dispatch.before_cursor_execute(conn, cursor, compiled.sql, bound, None, False)
        try:
            cursor.execute(compiled.sql, bound)
        except conn.dialect.loaded_dbapi.Error as e:
            cursor.close()
            raise exc.DBAPIError.instance(
                compiled.sql, bound, e, conn.dialect.loaded_dbapi.Error, dialect=conn.dialect
            ) from e
        return cursor

    def _of(self, dialect: Dialect) -> _Compiled:
        which = (dialect.name, dialect.driver)  # the SQL and its parameter style
        found = self._compiled.get(which)
        if found is None:
            with self._lock:
                found = self._compiled.get(which) or _compile(self.statement, dialect)
                self._compiled[which] = found
        return found


def _compile(statement: ClauseElement, dialect: Dialect) -> _Compiled:
    compiled = statement.compile(dialect=dialect)
    if not isinstance(compiled, SQLCompiler):
        raise TypeError(f"not a SQL statement: {type(statement).__name__}")
    positional = tuple(compiled.positiontup or ()) if dialect.positional else None
    binds: dict[str, Processor] = {}
    for bind, name in compiled.bind_names.items():
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if process is not None:
            binds[name] = process
    defaults = {name: b.value for name, b in compiled.binds.items() if not b.required}
    columns: tuple[str, ...] = ()
    results: list[tuple[str, Processor]] = []
    if isinstance(statement, sa.Select):
        for column in statement.selected_columns:
            columns += (str(column.key),)
            process = column.type.dialect_impl(dialect).result_processor(dialect, None)
            if process is not None:
                results.append((str(column.key), process))
    return _Compiled(compiled.string, positional, defaults, binds, columns, tuple(results))
