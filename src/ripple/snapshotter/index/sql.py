"""The SQL index (SQLite and PostgreSQL): the `snapshot_pages` table and its queries.

One row per page, primary key `(writer_id, page_sequence)`, and an index on
`(writer_id, start_time)` for a writer's pages in a time range: a page overlaps
`[since, until]` if `start_time <= until` (the index range) and `end_time >= since`. `publish`
is an upsert (`INSERT … ON CONFLICT DO UPDATE`, both dialects); `replace` deletes the old rows
and upserts the new one in one transaction, so a reader (one SELECT, one snapshot) sees the
old entries or the new one. An old entry is deleted only if it is still the one given (same
writer, sequence and page key): a page republished under that sequence in between is kept.

`SqlIndex` holds all of it; `SqliteIndex` and `PostgresIndex` (`sqlite`, `postgresql`) only
make the engine. Every database error is `IndexError_`:
`<backend> index <where>: <operation>: <cause>`, on one line, never with a password.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, fields
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection, Engine

from ripple.snapshotter.index.base import IndexEntry, IndexError_

__all__ = ["DEFAULT_TABLE", "WRITE_OPTION", "SqlIndex", "one_line", "pages_table"]

DEFAULT_TABLE = "snapshot_pages"
_COLUMNS = [f.name for f in fields(IndexEntry)]
_KEY = ("writer_id", "page_sequence")
WRITE_OPTION = "ripple_index_write"  # set on the connection of a write transaction


def pages_table(metadata: sa.MetaData, name: str = DEFAULT_TABLE) -> sa.Table:
    """The index table `name` in `metadata`, with its (writer_id, start_time) index."""
    table = sa.Table(
        name,
        metadata,
        sa.Column("writer_id", sa.Text, primary_key=True),
        sa.Column("page_sequence", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("page_key", sa.Text, nullable=False),
        sa.Column("start_time", sa.BigInteger, nullable=False),
        sa.Column("end_time", sa.BigInteger, nullable=False),
        sa.Column("event_count", sa.BigInteger, nullable=False),
        sa.Column("page_size_bytes", sa.BigInteger, nullable=False),
        sa.Column("storage_size_bytes", sa.BigInteger, nullable=False),
        sa.Column("format", sa.Text, nullable=False),
        sa.Column("compression", sa.Text, nullable=False),
    )
    sa.Index(f"ix_{name}_writer_start", table.c.writer_id, table.c.start_time)
    return table


def one_line(e: BaseException, secret: str | None = None) -> str:
    """An error's text on one line, without `secret` (a password) if it appears."""
    text = " ".join(str(e).split()) or type(e).__name__
    return text.replace(secret, "***") if secret else text


class SqlIndex:
    """The index in one table of a SQL database; see the module docstring."""

    backend = "sql"

    def __init__(
        self,
        engine: Engine,
        where: str,
        insert: Callable[[sa.Table], Any],  # the dialect's: it has on_conflict_do_update
        *,
        table: str = DEFAULT_TABLE,
        secret: str | None = None,
        serialize_writes: bool = False,
    ) -> None:
        """`where` names the database in errors, never with `secret` (its password);
        `serialize_writes`: this process's writers take turns on a lock (SQLite has one
        writer at a time) rather than in the database's busy handler."""
        self.engine = engine
        self.where = where
        self._secret = secret
        self._writers: AbstractContextManager[object] = (
            threading.Lock() if serialize_writes else nullcontext()
        )
        self.table = pages_table(sa.MetaData(), table)
        c = self.table.c
        upsert = insert(self.table)
        self._upsert = upsert.on_conflict_do_update(
            index_elements=[c.writer_id, c.page_sequence],
            set_={name: upsert.excluded[name] for name in _COLUMNS if name not in _KEY},
        )
        self._delete = sa.delete(self.table).where(
            c.writer_id == sa.bindparam("w"),
            c.page_sequence == sa.bindparam("s"),
            c.page_key == sa.bindparam("k"),
        )
        try:
            self._create()
        except IndexError_:
            engine.dispose()
            raise

    def _create(self) -> None:
        with self._guard("create table"):
            try:
                self.table.metadata.create_all(self.engine, checkfirst=True)
            except exc.DBAPIError:
                # another process created it between our check and our CREATE: check again
                self.table.metadata.create_all(self.engine, checkfirst=True)

    # --- the Index protocol ---------------------------------------------------------------

    def publish(self, entry: IndexEntry) -> None:
        with self._guard("publish"), self._write() as conn:
            conn.execute(self._upsert, [asdict(entry)])

    def query(
        self, writer_id: str, since: int | None = None, until: int | None = None
    ) -> list[IndexEntry]:
        c = self.table.c
        statement = sa.select(*[c[name] for name in _COLUMNS]).where(c.writer_id == writer_id)
        if until is not None:
            statement = statement.where(c.start_time <= until)
        if since is not None:
            statement = statement.where(c.end_time >= since)
        statement = statement.order_by(c.start_time, c.page_sequence)
        with self._guard("query"), self._read() as conn:
            return [IndexEntry(**row._asdict()) for row in conn.execute(statement)]

    def writers(self) -> list[str]:
        statement = sa.select(self.table.c.writer_id).distinct()
        with self._guard("writers"), self._read() as conn:
            # sorted here: the database's collation need not sort as Python does
            return sorted(conn.execute(statement).scalars())

    def keys(self) -> set[str]:
        with self._guard("keys"), self._read() as conn:
            return set(conn.execute(sa.select(self.table.c.page_key)).scalars())

    def last_sequence(self, writer_id: str) -> int:
        c = self.table.c
        statement = sa.select(sa.func.max(c.page_sequence)).where(c.writer_id == writer_id)
        with self._guard("last sequence"), self._read() as conn:
            last = conn.execute(statement).scalar()
        return -1 if last is None else int(last)

    def replace(self, old: Sequence[IndexEntry], new: IndexEntry) -> None:
        gone = [{"w": e.writer_id, "s": e.page_sequence, "k": e.page_key} for e in old]
        with self._guard("replace"), self._write() as conn:
            if gone:
                conn.execute(self._delete, gone)
            conn.execute(self._upsert, [asdict(new)])

    def count(self) -> int:
        statement = sa.select(sa.func.count()).select_from(self.table)
        with self._guard("count"), self._read() as conn:
            return int(conn.execute(statement).scalar_one())

    def close(self) -> None:
        self.engine.dispose()

    # --- helpers --------------------------------------------------------------------------

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with (
            self._writers,
            self.engine.connect().execution_options(**{WRITE_OPTION: True}) as conn,
            conn.begin(),
        ):
            yield conn

    @contextmanager
    def _guard(self, operation: str) -> Iterator[None]:
        """Database errors, as `IndexError_` naming the backend, the database and `op`."""
        try:
            yield
        except (exc.SQLAlchemyError, OSError) as e:
            cause: Any = e.orig if isinstance(e, exc.DBAPIError) and e.orig else e
            text = one_line(cause, self._secret)
            raise IndexError_(f"{self.backend} index {self.where}: {operation}: {text}") from e
