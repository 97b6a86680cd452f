"""The SQLite index (backend `sqlite`): the `snapshot_pages` table in one local file.

The file (and its directory) is made on open, the table too. The database is in WAL mode
with a busy timeout, so another process (`ripple snapshot compact`, `replay`, `reconcile`)
reads it, and writes to it, while the server publishes: readers never wait for the writer,
and a writer waits for the other (up to `BUSY_TIMEOUT_S`) instead of failing. A write
transaction starts with `BEGIN IMMEDIATE`, taking the write lock before it reads anything,
so it waits its turn rather than failing when another process wrote in between.
`synchronous=FULL`: a published entry survives a power cut (one fsync per page, which is
cheap at the rate pages are made). The queries are `ripple.snapshotter.index.sql`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.dialects.sqlite import insert
from sqlalchemy.engine import Connection, Engine

from ripple.snapshotter.index.base import IndexError_
from ripple.snapshotter.index.sql import WRITE_OPTION, SqlIndex, one_line

__all__ = ["BUSY_TIMEOUT_S", "SqliteIndex"]

BUSY_TIMEOUT_S = 30


class SqliteIndex(SqlIndex):
    """The index in the SQLite file `path_or_url` (a path, or `sqlite:///PATH`)."""

    backend = "sqlite"

    def __init__(self, path_or_url: str | Path) -> None:
        path = _path(path_or_url)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise IndexError_(f"sqlite index {path}: open: {one_line(e)}") from e
        super().__init__(_engine(path), str(path), insert, serialize_writes=True)
        self.path = path


def _path(path_or_url: str | Path) -> Path:
    text = str(path_or_url)
    if not text.startswith("sqlite:"):
        return Path(text)
    try:
        url = sa.make_url(text)
    except exc.ArgumentError as e:
        raise IndexError_(f"sqlite index {text}: open: not a database URL") from e
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        raise IndexError_(f"sqlite index {text}: open: use a file, sqlite:///PATH")
    return Path(url.database)


def _engine(path: Path) -> Engine:
    engine = sa.create_engine(
        sa.URL.create("sqlite", database=str(path)), connect_args={"timeout": BUSY_TIMEOUT_S}
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # BEGIN is ours to emit (see _on_begin)
        cursor = dbapi_conn.cursor()
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine
