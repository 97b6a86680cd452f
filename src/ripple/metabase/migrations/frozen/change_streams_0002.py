"""`CREATE`, `ALTER` and `DROP CHANGE STREAM` as migration steps 0002 to 0013 ran them.

Frozen, never to be edited: this is `ripple.changestream.ddl`, with the option defaults of
`ripple.changestream.definition` and the `column_types` of `ripple.changestream.values`, as
they were when those steps were written, so the steps store on a fresh database the very
definitions they stored then.

A step names what a stream records as Spanner's `column_types` do: each column with its type
code and its ordinal position in the table as the models of the step's revision had it. A
stream records its table's key columns (given when it is created, kept when it is altered)
and the watched ones. Every change makes a new version of the definition; records written
before it keep the version they were written under.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

PARTITIONS = 4
# every option of a new definition: Spanner's defaults
DEFAULT_OPTIONS: dict[str, Any] = {
    "exclude_insert": False,
    "exclude_update": False,
    "exclude_delete": False,
    "exclude_ttl_deletes": False,
    "allow_txn_exclusion": False,
    "value_capture_type": "OLD_AND_NEW_VALUES",
    "retention_period": "1d",
}

_metadata = sa.MetaData()

# as 0002 created them
change_streams = sa.Table(
    "change_streams",
    _metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("table_name", sa.String(64), nullable=False),
    sa.Column("columns", sa.JSON, nullable=False),
    sa.Column("column_types", sa.JSON, nullable=False),
    sa.Column("options", sa.JSON, nullable=False),
    sa.Column("partitions", sa.Integer, nullable=False),
    sa.Column("created_at_ns", sa.BigInteger, nullable=False),
)
change_partitions = sa.Table(
    "change_partitions",
    _metadata,
    sa.Column("stream_name", sa.String(64), primary_key=True),
    sa.Column("partition", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("next_position", sa.BigInteger, nullable=False),
    sa.Column("last_commit_ns", sa.BigInteger, nullable=False),
    sa.Column("last_transaction", sa.String(32), nullable=True),
)
# what DROP deletes, table by table, by the column naming the stream (only that: 0004
# reshapes change_records)
_DROPPED = (
    ("change_records", "stream_name"),
    ("change_offsets", "stream_name"),
    ("change_partitions", "stream_name"),
    ("change_streams", "name"),
)


class ColumnType(NamedTuple):
    """A column a stream records: its name, Spanner type code and ordinal position."""

    name: str
    code: str
    position: int

    def entry(self, *, key: bool) -> dict[str, Any]:
        """Its `column_types` entry."""
        return {
            "name": self.name,
            "type": {"code": self.code},
            "is_primary_key": key,
            "ordinal_position": self.position,
        }


def create_change_stream(
    conn: Connection,
    name: str,
    table: str,
    key: Sequence[ColumnType],
    watched: Sequence[ColumnType],
    options: Mapping[str, Any] | None = None,
    *,
    partitions: int = PARTITIONS,
) -> None:
    """`CREATE CHANGE STREAM name FOR table (watched) OPTIONS (options)`."""
    if _newest(conn, name) is not None:
        raise ValueError(f"change stream {name!r} already exists")
    _check(conn, table, watched)
    column_types = [*(c.entry(key=True) for c in key), *(c.entry(key=False) for c in watched)]
    _insert_version(conn, name, table, column_types, _with(DEFAULT_OPTIONS, options), partitions, 1)
    conn.execute(
        sa.insert(change_partitions),
        [
            {"stream_name": name, "partition": p, "next_position": 0, "last_commit_ns": 0}
            for p in range(partitions)
        ],
    )


def alter_change_stream(
    conn: Connection,
    name: str,
    table: str,
    *,
    watched: Sequence[ColumnType] | None = None,
    options: Mapping[str, Any] | None = None,
) -> None:
    """`ALTER CHANGE STREAM name SET FOR table (watched)` and/or `SET OPTIONS (options)`."""
    current = _newest(conn, name)
    if current is None:
        raise ValueError(f"change stream {name!r} does not exist")
    if current.table_name != table:
        raise ValueError(f"change stream {name!r} watches {current.table_name!r}, not {table!r}")
    column_types: list[dict[str, Any]] = list(current.column_types)
    if watched is not None:
        _check(conn, table, watched)
        key = [c for c in column_types if c["is_primary_key"]]
        column_types = [*key, *(c.entry(key=False) for c in watched)]
    _insert_version(
        conn,
        name,
        table,
        column_types,
        _with(current.options, options),
        current.partitions,
        current.version + 1,
    )


def drop_change_stream(conn: Connection, name: str) -> None:
    """`DROP CHANGE STREAM name`: its definitions, partitions, records and offsets."""
    if _newest(conn, name) is None:
        raise ValueError(f"change stream {name!r} does not exist")
    for table, column in _DROPPED:
        rows = sa.table(table, sa.column(column))
        conn.execute(sa.delete(rows).where(rows.c[column] == name))


def _newest(conn: Connection, name: str) -> sa.Row[Any] | None:
    """The stream's newest version."""
    query = (
        sa.select(change_streams)
        .where(change_streams.c.name == name)
        .order_by(change_streams.c.version.desc())
        .limit(1)
    )
    return conn.execute(query).first()


def _check(conn: Connection, table: str, watched: Sequence[ColumnType]) -> None:
    """Each watched column is one of the table's as the database has it, and not a key."""
    inspector = sa.inspect(conn)
    if not inspector.has_table(table):
        raise ValueError(f"table {table!r} does not exist")
    present = {c["name"] for c in inspector.get_columns(table)}
    keys = set(inspector.get_pk_constraint(table)["constrained_columns"])
    for column in watched:
        if column.name in keys:
            raise ValueError(f"column {column.name!r} is part of the primary key of {table!r}")
        if column.name not in present:
            raise ValueError(f"table {table!r} has no column {column.name!r}")


def _with(options: Mapping[str, Any], changes: Mapping[str, Any] | None) -> dict[str, Any]:
    unknown = sorted(set(changes or {}) - set(DEFAULT_OPTIONS))
    if unknown:
        raise ValueError(f"unknown change stream options {unknown}")
    return {**options, **(changes or {})}


def _insert_version(
    conn: Connection,
    name: str,
    table: str,
    column_types: list[dict[str, Any]],
    options: dict[str, Any],
    partitions: int,
    version: int,
) -> None:
    conn.execute(
        sa.insert(change_streams).values(
            name=name,
            version=version,
            table_name=table,
            columns=[c["name"] for c in column_types if not c["is_primary_key"]],
            column_types=column_types,
            options=options,
            partitions=partitions,
            created_at_ns=time.time_ns(),
        )
    )
