"""Change stream DDL for migration steps: `CREATE`, `ALTER` and `DROP CHANGE STREAM`.

```
create_change_stream(conn, "bucket_eventing", objects, ["status", "total_plain_size"],
                     {"exclude_ttl_deletes": True, "exclude_update": True,
                      "allow_txn_exclusion": True})
```
is this project's `CREATE CHANGE STREAM bucket_eventing FOR objects (status,
total_plain_size) OPTIONS (...)`. Every change makes a new version of the definition;
records written before it keep the version (and so the column types) they were written under.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ripple.changestream.definition import (
    DEFAULT_PARTITIONS,
    ChangeStreamError,
    StreamDefinition,
    StreamOptions,
    validate,
)
from ripple.changestream.schema import (
    change_offsets,
    change_partitions,
    change_records,
    change_streams,
)
from ripple.changestream.values import column_types
from ripple.changestream.writer import load_definitions


def _current(conn: Connection, name: str) -> StreamDefinition | None:
    return next((d for d in load_definitions(conn) if d.name == name), None)


def _table_columns(conn: Connection, table: sa.Table) -> tuple[list[str], list[str]]:
    """The columns the database's table has now, and its key columns."""
    inspector = sa.inspect(conn)
    if not inspector.has_table(table.name):
        return [], []
    present = [c["name"] for c in inspector.get_columns(table.name)]
    keys = list(inspector.get_pk_constraint(table.name)["constrained_columns"])
    return present, keys


def _insert_version(
    conn: Connection,
    name: str,
    table: sa.Table,
    columns: tuple[str, ...],
    options: StreamOptions,
    partitions: int,
    version: int,
) -> None:
    conn.execute(
        sa.insert(change_streams).values(
            name=name,
            version=version,
            table_name=table.name,
            columns=list(columns),
            column_types=column_types(table, columns),
            options=options.to_json(),
            partitions=partitions,
            created_at_ns=time.time_ns(),
        )
    )


def create_change_stream(
    conn: Connection,
    name: str,
    table: sa.Table,
    columns: Sequence[str],
    options: Mapping[str, Any] | None = None,
    *,
    partitions: int = DEFAULT_PARTITIONS,
) -> None:
    """`CREATE CHANGE STREAM name FOR table (columns) OPTIONS (options)`."""
    if _current(conn, name) is not None:
        raise ChangeStreamError(f"change stream {name!r} already exists")
    present, keys = _table_columns(conn, table)
    watched = validate(
        name, table.name, columns, partitions, table_columns=present, key_columns=keys
    )
    parsed = StreamOptions().with_changes(options or {})
    _insert_version(conn, name, table, watched, parsed, partitions, 1)
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
    table: sa.Table,
    *,
    columns: Sequence[str] | None = None,
    options: Mapping[str, Any] | None = None,
) -> None:
    """`ALTER CHANGE STREAM name SET FOR table (columns)` and/or `SET OPTIONS (options)`."""
    current = _current(conn, name)
    if current is None:
        raise ChangeStreamError(f"change stream {name!r} does not exist")
    if table.name != current.table:
        raise ChangeStreamError(
            f"change stream {name!r} watches {current.table!r}, not {table.name!r}"
        )
    present, keys = _table_columns(conn, table)
    watched = current.columns
    if columns is not None:
        watched = validate(
            name, table.name, columns, current.partitions, table_columns=present, key_columns=keys
        )
    changed = current.options.with_changes(options or {})
    _insert_version(conn, name, table, watched, changed, current.partitions, current.version + 1)


def drop_change_stream(conn: Connection, name: str) -> None:
    """`DROP CHANGE STREAM name`: its definitions, partitions, records and offsets."""
    if _current(conn, name) is None:
        raise ChangeStreamError(f"change stream {name!r} does not exist")
    for table in (change_records, change_offsets, change_partitions, change_streams):
        column = table.c.name if table is change_streams else table.c.stream_name
        conn.execute(sa.delete(table).where(column == name))
