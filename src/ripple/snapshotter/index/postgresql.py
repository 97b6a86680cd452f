"""The PostgreSQL index (backend `postgresql`): the `snapshot_pages` table on a server.

The URL is `postgresql://`, `postgres://` or `postgresql+psycopg://` (psycopg 3 either way);
the table (default `snapshot_pages`, or `table`) and its index are made on open if missing.
Several servers and the CLI may share one table. A failed connection is `IndexError_` at
once (5 s connect timeout), and a connection the server dropped is replaced before use
(pre-ping). The queries are `ripple.snapshotter.index.sql`'s.
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert

from ripple.metabase.db import normalize_url
from ripple.snapshotter.index.base import IndexError_
from ripple.snapshotter.index.sql import DEFAULT_TABLE, SqlIndex

__all__ = ["PostgresIndex"]

CONNECT_TIMEOUT_S = 5
_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}")  # room for ix_<table>_writer_start


class PostgresIndex(SqlIndex):
    """The index in table `table` of the PostgreSQL database at `url`."""

    backend = "postgresql"

    def __init__(self, url: str, table: str = DEFAULT_TABLE) -> None:
        try:
            parsed = normalize_url(url)
        except ValueError as e:
            raise IndexError_(f"postgresql index: open: {e}") from None
        where = parsed.set(drivername="postgresql", password=None).render_as_string()
        if parsed.get_backend_name() != "postgresql":
            raise IndexError_(f"postgresql index {where}: open: not a postgresql:// URL")
        if not _TABLE.fullmatch(table):
            raise IndexError_(
                f"postgresql index {where}: open: table name {table!r} must be up to 48 "
                "letters, digits and underscores, not starting with a digit"
            )
        engine = sa.create_engine(
            parsed,
            pool_pre_ping=True,
            pool_size=4,
            max_overflow=4,
            connect_args={"connect_timeout": CONNECT_TIMEOUT_S},
        )
        super().__init__(engine, where, insert, table=table, secret=parsed.password or None)
