"""Writing change records inside the transaction whose changes they record.

`flush` runs just before COMMIT. For every stream over a changed table it keeps the mods the
stream's options and the transaction's exclusion let through, groups them into one record
per partition per mod type (DELETE, UPDATE, INSERT, in that order) and inserts the records.
A transaction's changes in one bucket all go to one partition (`Partitioning`), that of the
least key it changes there, so the transform sees a DeleteObjects or a rename whole.

The invariant readers rely on: positions and commit timestamps are taken as the last thing
before COMMIT, under the lock of the partition's row in `change_partitions`, held until the
commit is done, so positions are dense and follow commit order. PostgreSQL sends the records
with the COMMIT in one pipeline (`ripple.changestream.commit_pipeline`); on SQLite a row
trigger moves the partition row on (migration 0002's `commit_trigger_0002`). Why and what it
costs: docs/changestream.md, "Ordering and the no-skip rule".
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ripple.changestream import commit_pipeline
from ripple.changestream.capture import Capture, Mod
from ripple.changestream.definition import ModType, StreamDefinition, StreamOptions
from ripple.changestream.schema import change_streams
from ripple.changestream.values import Encoder, encoder, type_code

# Decides, from a changed row's key columns, whether a stream that allows transaction
# exclusion records the change (for `objects`: is eventing enabled for its bucket?).
Scope = Callable[[str, Mapping[str, Any]], bool]

_MOD_ORDER = (ModType.DELETE, ModType.UPDATE, ModType.INSERT)
_RECORD_COLUMNS = (
    "stream_name, stream_version, partition, commit_ns, transaction_id, record_sequence, "
    "is_last_in_partition, records_in_transaction, partitions_in_transaction, mod_type, mods, "
    "transaction_tag, is_system_transaction"
)
# A commit timestamp is also later than every commit any partition of the stream has
# recorded. So a key's changes get increasing commit timestamps even where two of them were
# recorded in different partitions (a PUT in its own, a DeleteObjects in its least key's)
# and whatever the writers' clocks do: the later transaction waited for the earlier one's
# row locks, so it reads the earlier's commit timestamp here. A read of the stream's
# partition rows, without locks.
_FLOOR = "SELECT max(q.last_commit_ns) + 1 FROM change_partitions AS q WHERE q.stream_name = r.s"
# PostgreSQL: take the partition's next position and commit timestamp (one per transaction
# per partition) and insert the record with them. A missing partition row leaves the position
# NULL, which the NOT NULL column refuses.
_INSERT_POSTGRES = f"""
WITH r (s, v, part, ns, t, seq, last, n, np, mt, mods, tag, sys) AS (
  VALUES (%s, %s::integer, %s::integer, %s::bigint, %s, %s::integer, %s::boolean,
          %s::integer, %s::integer, %s::smallint, %s, %s, %s::boolean)),
p AS (
  UPDATE change_partitions AS p
     SET next_position = p.next_position + 1,
         last_commit_ns = CASE WHEN p.last_transaction = r.t THEN p.last_commit_ns
                               ELSE greatest(p.last_commit_ns + 1, r.ns, ({_FLOOR})) END,
         last_transaction = r.t
    FROM r
   WHERE p.stream_name = r.s AND p.partition = r.part
  RETURNING p.next_position, p.last_commit_ns)
INSERT INTO change_records ({_RECORD_COLUMNS}, position)
SELECT r.s, r.v, r.part, p.last_commit_ns, r.t, r.seq, r.last, r.n, r.np, r.mt, r.mods, r.tag,
       r.sys, p.next_position
  FROM r LEFT JOIN p ON true
"""
# SQLite: the one writer takes the next position and commit timestamp from the partition row
# as it inserts; the row trigger then moves the partition row on.
_INSERT_SQLITE = f"""
INSERT INTO change_records ({_RECORD_COLUMNS}, position)
SELECT s, v, p.partition,
       CASE WHEN p.last_transaction = t THEN p.last_commit_ns
            ELSE max(p.last_commit_ns + 1, ns, ({_FLOOR})) END,
       t, seq, last, n, np, mt, mods, tag, sys, p.next_position + 1
  FROM (SELECT ? AS s, ? AS v, ? AS part, ? AS ns, ? AS t, ? AS seq, ? AS last, ? AS n,
               ? AS np, ? AS mt, ? AS mods, ? AS tag, ? AS sys) AS r
  JOIN change_partitions AS p ON p.stream_name = r.s AND p.partition = r.part
"""


def partition_of(values: Sequence[Any], partitions: int) -> int:
    """The partition of these partition values: a stable hash of them. For an object in a
    transaction that changes no other key of its bucket: `[project_id, bucket_name, key]`."""
    # object keys are stored as their UTF-8 bytes: a key hashes the same as bytes or text
    raw = b"\0".join(v if isinstance(v, bytes) else str(v).encode() for v in values)
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big") % partitions


@dataclass(frozen=True)
class Partitioning:
    """How a table's changes are spread over a stream's partitions: by a stable hash of the
    `group` columns and, if `spread` names a column, of that column's least value among the
    transaction's changes in the same group. So one transaction's changes in a group stay
    in one partition, and a group's single-row transactions are spread by row."""

    group: tuple[str, ...]
    spread: str | None = None

    def partitions_of(self, rows: Sequence[Mapping[str, Any]], partitions: int) -> list[int]:
        """The partition of each of one transaction's changed rows."""
        if len(rows) == 1:  # most transactions: the row's own values
            (row,) = rows
            spread = () if self.spread is None else (row[self.spread],)
            return [partition_of([*(row[c] for c in self.group), *spread], partitions)]
        groups = [tuple(row[c] for c in self.group) for row in rows]
        least: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        for g, row in zip(groups, rows, strict=True):
            value = () if self.spread is None else (row[self.spread],)
            if g not in least or value < least[g]:
                least[g] = value
        part = {g: partition_of((*g, *value), partitions) for g, value in least.items()}
        return [part[g] for g in groups]


def load_definitions(conn: Connection) -> list[StreamDefinition]:
    """The newest version of every change stream."""
    newest = (
        sa.select(change_streams.c.name, sa.func.max(change_streams.c.version).label("v"))
        .group_by(change_streams.c.name)
        .subquery()
    )
    query = sa.select(change_streams).join(
        newest,
        sa.and_(change_streams.c.name == newest.c.name, change_streams.c.version == newest.c.v),
    )
    return [
        StreamDefinition(
            name=row.name,
            table=row.table_name,
            columns=tuple(row.columns),
            options=StreamOptions.from_json(row.options),
            partitions=row.partitions,
            version=row.version,
        )
        for row in conn.execute(query)
    ]


class ChangeStreamWriter:
    """Turns each write transaction's capture into change records, before it commits."""

    def __init__(
        self,
        tables: Mapping[str, sa.Table],
        partitioning: Mapping[str, Partitioning],
        scope: Scope,
    ) -> None:
        self.tables = dict(tables)
        self.partitioning = dict(partitioning)
        self.scope = scope
        self._definitions: list[StreamDefinition] | None = None
        # per table: its key columns and each column's encoder, found once (names as plain
        # str: orjson takes no subclass of it as a key)
        self._keys = {
            n: [str(c.name) for c in t.primary_key.columns] for n, t in self.tables.items()
        }
        self._encoders = {
            n: {str(c.name): encoder(type_code(c)) for c in t.columns}
            for n, t in self.tables.items()
        }

    def reload(self) -> None:
        """Forget the cached definitions (after a migration changed them)."""
        self._definitions = None

    def definitions(self, conn: Connection) -> list[StreamDefinition]:
        if self._definitions is None:
            if not sa.inspect(conn).has_table(change_streams.name):
                return []  # not yet migrated: nothing to record into
            self._definitions = load_definitions(conn)
        return self._definitions

    def flush(
        self, conn: Connection, capture: Capture, now_ns: int, *, commit: bool = False
    ) -> int:
        """Insert the records of `capture` for every stream; returns how many.

        With `commit` on PostgreSQL, the INSERT and the COMMIT go to the server together (one
        round trip; the caller's own commit then finds nothing to do)."""
        return self.flush_all(conn, [capture], now_ns, commit=commit)

    def flush_all(
        self, conn: Connection, captures: Sequence[Capture], now_ns: int, *, commit: bool = False
    ) -> int:
        """`flush` for write transactions committed together (`ripple.metabase.group`), in
        the order they ran: each its own records, with its own transaction id. All of them
        go in partition order, as one transaction's do, so writers lock partition rows in
        one order; within a partition, in the transactions' order."""
        rows: list[tuple[Any, ...]] = []
        for capture in captures:
            if not capture.mods:
                continue
            own: list[tuple[Any, ...]] = []
            for stream in self.definitions(conn):
                mods = [m for m in capture.mods if self._records(stream, capture, m)]
                if mods:
                    own.extend(self._record_rows(stream, capture, mods, now_ns))
            own.sort(key=lambda row: (row[0], row[2], row[5]))  # stream, partition, sequence
            rows.extend(own)
        if not rows:
            return 0
        if len(captures) > 1:  # stable: a partition's records keep the transactions' order
            rows.sort(key=lambda row: (row[0], row[2]))
        # Straight to the driver: this runs in every eventing commit, and building the
        # statement through SQLAlchemy cost more than the database's work.
        if conn.dialect.name == "postgresql" and commit:
            _insert_and_commit(conn, rows)
        elif conn.dialect.name == "postgresql":
            conn.exec_driver_sql(commit_pipeline.GENERIC_PLAN)  # as commit_pipeline says
            conn.exec_driver_sql(_INSERT_POSTGRES, rows)
        elif _insert_sqlite(conn, rows) != len(rows):
            raise RuntimeError("a change stream partition row is missing; recreate the stream")
        return len(rows)

    def _records(self, stream: StreamDefinition, capture: Capture, mod: Mod) -> bool:
        options = stream.options
        if mod.table != stream.table or options.excludes(mod.mod_type):
            return False
        if capture.system and options.exclude_ttl_deletes:
            return False
        return not (
            options.allow_txn_exclusion and (capture.excluded or not self.scope(mod.table, mod.row))
        )

    def _record_rows(
        self, stream: StreamDefinition, capture: Capture, mods: list[Mod], now_ns: int
    ) -> list[tuple[Any, ...]]:
        keys, encoders = self._keys[stream.table], self._encoders[stream.table]
        by_partition: dict[int, dict[ModType, list[dict[str, Any]]]] = {}
        recorded = [(m, e) for m in mods if (e := _mod_json(stream, m, keys, encoders)) is not None]
        parts = self.partitioning[stream.table].partitions_of(
            [mod.row for mod, _ in recorded], stream.partitions
        )
        for (mod, entry), part in zip(recorded, parts, strict=True):
            by_partition.setdefault(part, {}).setdefault(mod.mod_type, []).append(entry)
        groups = [
            (part, mod_type, by_partition[part][mod_type])
            for part in sorted(by_partition)
            for mod_type in _MOD_ORDER
            if mod_type in by_partition[part]
        ]
        transaction_id = os.urandom(16).hex()
        tag = capture.tag_json()
        rows = []
        for sequence, (part, mod_type, entries) in enumerate(groups):
            last_in_partition = sequence + 1 == len(groups) or groups[sequence + 1][0] != part
            rows.append(
                (
                    stream.name,
                    stream.version,
                    part,
                    now_ns,
                    transaction_id,
                    sequence,
                    last_in_partition,
                    len(groups),
                    len(by_partition),
                    int(mod_type),
                    orjson.dumps(entries).decode(),
                    tag,
                    capture.system,
                )
            )
        return rows


def _mod_json(
    stream: StreamDefinition, mod: Mod, keys: list[str], encoders: Mapping[str, Encoder]
) -> dict[str, Any] | None:
    """One entry of a record's `mods`, per the stream's value capture type; None for an
    UPDATE that changed no watched column (Spanner records none)."""
    capture_type = stream.options.value_capture_type
    watched = stream.columns

    def values(row: Mapping[str, Any] | None, columns: Sequence[str]) -> dict[str, Any]:
        if row is None:
            return {}
        return {c: encoders[c](row[c]) for c in columns}

    entry_keys = {k: encoders[k](mod.row[k]) for k in keys}
    if mod.mod_type is ModType.INSERT:
        new, old = values(mod.new, watched), {}
    elif mod.mod_type is ModType.DELETE:
        new, old = {}, values(mod.old, watched) if capture_type.old_values else {}
    else:
        if mod.old is None or mod.new is None:
            raise ValueError("an UPDATE mod without its old and new rows")
        changed = [c for c in watched if mod.old[c] != mod.new[c]]
        if not changed:
            return None
        new = values(mod.new, watched if capture_type.new_row else changed)
        old = values(mod.old, changed) if capture_type.old_values else {}
    return {"keys": entry_keys, "new_values": new, "old_values": old}


def _insert_sqlite(conn: Connection, rows: list[tuple[Any, ...]]) -> int:
    """SQLite: insert the records through the connection's own sqlite3 cursor, in the
    transaction SQLAlchemy began (its execution context cost a PUT's record more than
    SQLite's work did; another driver than pysqlite still goes through it); returns how
    many were inserted."""
    driver = conn.connection.driver_connection
    if not isinstance(driver, sqlite3.Connection):
        return int(conn.exec_driver_sql(_INSERT_SQLITE, rows).rowcount)
    try:
        if len(rows) == 1:  # most transactions
            cursor = driver.execute(_INSERT_SQLITE, rows[0])
        else:
            cursor = driver.executemany(_INSERT_SQLITE, rows)
        inserted = cursor.rowcount
        cursor.close()
    except sqlite3.Error as e:  # raised as SQLAlchemy raises it, for callers catching sa.exc
        raise sa.exc.DBAPIError.instance(_INSERT_SQLITE, None, e, sqlite3.Error) from e
    return inserted


def _insert_and_commit(conn: Connection, rows: list[tuple[Any, ...]]) -> None:
    """PostgreSQL: send the records' INSERT and the COMMIT in one pipeline, saving the round
    trip that is most of what recording costs an eventing commit: straight through libpq
    (`commit_pipeline`), or through psycopg's pipeline where that is not available."""
    statement = _INSERT_POSTGRES
    driver = conn.connection.driver_connection
    if not isinstance(driver, psycopg.Connection):
        raise TypeError(f"PostgreSQL through psycopg 3 only, not {type(driver).__name__}")
    try:
        if commit_pipeline.available(driver):
            commit_pipeline.insert_and_commit(driver, statement, rows)
            return
        with driver.pipeline(), driver.cursor() as cursor:
            cursor.execute(commit_pipeline.GENERIC_PLAN)
            for row in rows:  # prepared: planning the statement cost more than running it
                cursor.execute(statement, row, prepare=True)
            driver.commit()
    except psycopg.Error as e:  # as SQLAlchemy would raise it, so writers retry conflicts
        raise sa.exc.DBAPIError.instance(statement, None, e, psycopg.Error) from e
