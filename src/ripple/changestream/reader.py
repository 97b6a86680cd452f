"""Reading a change stream: records of one partition after a position, in commit order.

Positions are dense and taken in commit order (see `ripple.changestream.writer`), so
"every record after position N" is complete the moment it is read: no committed record is
ever skipped and no record is read twice in one pass. A consumer persists the last
position it handled per partition (`commit_offsets`) and resumes after it.

An idle partition is closed up to now by a heartbeat: the reader raises the partition's
last commit timestamp to its clock, so every later record commits after it, and reports
`heartbeat_record.timestamp`: every record at or before it has been read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ripple.changestream.definition import ChangeStreamError, ModType, StreamDefinition
from ripple.changestream.schema import (
    change_offsets,
    change_partitions,
    change_records,
    change_streams,
)
from ripple.changestream.values import rfc3339_ns
from ripple.changestream.writer import load_definitions

DEFAULT_STREAM = "bucket_eventing"
PROJECT_STREAM = "project_eventing"  # over the buckets table (migration 0013): bucket events


class ChangeStreamReader:
    """Reads one change stream. `engine` serves reads; `write_engine` (default: `engine`)
    serves the few writes a reader makes: heartbeats, offsets and pruning."""

    def __init__(
        self, engine: Engine, stream: str = DEFAULT_STREAM, *, write_engine: Engine | None = None
    ) -> None:
        self.engine = engine
        self.write_engine = write_engine or engine
        self.stream = stream
        self._versions: dict[int, tuple[str, list[dict[str, Any]], str]] = {}

    def definition(self) -> StreamDefinition:
        with self.engine.connect() as conn:
            found = [d for d in load_definitions(conn) if d.name == self.stream]
        if not found:
            raise ChangeStreamError(
                f"change stream {self.stream!r} does not exist; run `ripple db upgrade`"
            )
        return found[0]

    def partitions(self) -> int:
        return self.definition().partitions

    def read(self, partition: int, after: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        """Up to `limit` records of `partition` with positions above `after`, in order."""
        c = change_records.c
        query = (
            sa.select(change_records)
            .where(c.stream_name == self.stream, c.partition == partition, c.position > after)
            .order_by(c.position)
            .limit(limit)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
            return [self._record(conn, dict(row._mapping)) for row in rows]

    def drain(self, partition: int, after: int = 0, limit: int = 1000) -> Iterator[dict[str, Any]]:
        """Every record of `partition` after `after` up to the last one committed, read in
        batches of `limit`."""
        while records := self.read(partition, after, limit):
            yield from records
            after = records[-1]["position"]

    def _version(self, conn: sa.Connection, version: int) -> tuple[str, list[dict[str, Any]], str]:
        """Table, column types and value capture type of a definition version (cached)."""
        if version not in self._versions:
            s = change_streams.c
            row = conn.execute(
                sa.select(s.table_name, s.column_types, s.options).where(
                    s.name == self.stream, s.version == version
                )
            ).one()
            self._versions[version] = (
                row.table_name,
                row.column_types,
                row.options["value_capture_type"],
            )
        return self._versions[version]

    def _record(self, conn: sa.Connection, row: Mapping[str, Any]) -> dict[str, Any]:
        table, column_types, capture_type = self._version(conn, row["stream_version"])
        return {
            "stream": self.stream,
            **change_record(row, table),
            "column_types": column_types,
            "value_capture_type": capture_type,
            "number_of_records_in_transaction": row["records_in_transaction"],
            "number_of_partitions_in_transaction": row["partitions_in_transaction"],
        }

    def heartbeat(
        self, partition: int, after: int, now_ns: int | None = None
    ) -> dict[str, Any] | None:
        """If `partition` has nothing after `after`, close it up to now and return the
        heartbeat record; None if it has records to read."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        p = change_partitions.c
        later = (
            sa.func.greatest(p.last_commit_ns, now_ns)
            if self.write_engine.dialect.name == "postgresql"
            else sa.func.max(p.last_commit_ns, now_ns)
        )
        with self.write_engine.begin() as conn:
            row = conn.execute(
                sa.update(change_partitions)
                .where(p.stream_name == self.stream, p.partition == partition)
                .values(last_commit_ns=later, last_transaction=None)
                .returning(p.next_position, p.last_commit_ns)
            ).one_or_none()
        if row is None:
            raise ChangeStreamError(f"change stream {self.stream!r} has no partition {partition}")
        if row.next_position > after:
            return None
        return {
            "stream": self.stream,
            "partition": partition,
            "heartbeat_record": {"timestamp": rfc3339_ns(row.last_commit_ns)},
        }

    def start_after(self, partition: int, since_ns: int) -> int:
        """The position to read after so reading starts at the first record committed at
        or after `since_ns`. Refused before the retention period."""
        definition = self.definition()
        oldest = time.time_ns() - definition.options.retention_ns
        if since_ns < oldest:
            raise ChangeStreamError(
                f"{rfc3339_ns(since_ns)} is before the retention period of {self.stream} "
                f"({definition.options.to_json()['retention_period']}); records that old "
                "are gone"
            )
        c = change_records.c
        with self.engine.connect() as conn:
            before = conn.execute(
                sa.select(sa.func.max(c.position)).where(
                    c.stream_name == self.stream, c.partition == partition, c.commit_ns < since_ns
                )
            ).scalar()
        return int(before or 0)

    def end(self, partition: int) -> int:
        """The last position taken in `partition`: reading after it yields only new records."""
        p = change_partitions.c
        with self.engine.connect() as conn:
            value = conn.execute(
                sa.select(p.next_position).where(
                    p.stream_name == self.stream, p.partition == partition
                )
            ).scalar()
        if value is None:
            raise ChangeStreamError(f"change stream {self.stream!r} has no partition {partition}")
        return int(value)

    def ends(self) -> dict[int, int]:
        """`end` of every partition, in one query."""
        p = change_partitions.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(p.partition, p.next_position).where(p.stream_name == self.stream)
            ).all()
        return {row.partition: int(row.next_position) for row in rows}

    def offsets(self, consumer: str) -> dict[int, int]:
        """The last position `consumer` committed, per partition (absent: none yet)."""
        o = change_offsets.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(o.partition, o.position).where(
                    o.stream_name == self.stream, o.consumer == consumer
                )
            ).all()
        return {row.partition: row.position for row in rows}

    def commit_offsets(self, consumer: str, offsets: Mapping[int, int]) -> None:
        """Persist, per partition, the last position `consumer` has handled."""
        o = change_offsets.c
        now = time.time_ns()
        with self.write_engine.begin() as conn:
            for partition, position in offsets.items():
                where = sa.and_(
                    o.stream_name == self.stream,
                    o.consumer == consumer,
                    o.partition == partition,
                )
                updated = conn.execute(
                    sa.update(change_offsets)
                    .where(where)
                    .values(position=position, updated_at_ns=now)
                ).rowcount
                if not updated:
                    conn.execute(
                        sa.insert(change_offsets).values(
                            stream_name=self.stream,
                            consumer=consumer,
                            partition=partition,
                            position=position,
                            updated_at_ns=now,
                        )
                    )

    def prune(self, now_ns: int | None = None, batch: int = 10_000) -> int:
        """Delete the records older than the stream's retention period; returns how many."""
        definition = self.definition()
        now_ns = time.time_ns() if now_ns is None else now_ns
        cutoff = now_ns - definition.options.retention_ns
        return sum(self._prune(p, cutoff, batch) for p in range(definition.partitions))

    def _prune(self, partition: int, cutoff: int, batch: int) -> int:
        c = change_records.c
        mine = sa.and_(c.stream_name == self.stream, c.partition == partition)
        deleted = 0
        while True:
            with self.write_engine.begin() as conn:
                rows = conn.execute(
                    sa.select(c.position, c.commit_ns)
                    .where(mine, c.position.is_not(None))
                    .order_by(c.position)
                    .limit(batch)
                ).all()
                old = [r.position for r in rows if r.commit_ns < cutoff]
                if not old:
                    return deleted
                deleted += conn.execute(
                    sa.delete(change_records).where(mine, c.position <= old[-1])
                ).rowcount
            if len(old) < len(rows):
                return deleted

    def follow(
        self,
        partitions: list[int],
        after: Mapping[int, int],
        *,
        heartbeat_seconds: float = 2.0,
        poll_seconds: float = 0.1,
        limit: int = 1000,
    ) -> Iterator[dict[str, Any]]:
        """Records of `partitions` as they commit, forever; heartbeats for idle ones."""
        positions = {p: after.get(p, 0) for p in partitions}
        last_beat = {p: time.monotonic() for p in partitions}
        while True:
            idle = True
            for p in partitions:
                records = self.read(p, positions[p], limit)
                if records:
                    idle = False
                    positions[p] = records[-1]["position"]
                    last_beat[p] = time.monotonic()
                    yield from records
                elif heartbeat_seconds and time.monotonic() - last_beat[p] >= heartbeat_seconds:
                    beat = self.heartbeat(p, positions[p])
                    last_beat[p] = time.monotonic()
                    if beat is not None:
                        yield beat
            if idle:
                time.sleep(poll_seconds)


_MOD_TYPE_NAMES = {m.value: m.name for m in ModType}


def change_record(row: Mapping[str, Any], table: str) -> dict[str, Any]:
    """The fields of a data change record that its `change_records` row holds by itself
    (the reader adds those of the stream's definition); also the pipeline's records."""
    return {
        "partition": row["partition"],
        "position": row["position"],
        "commit_timestamp": rfc3339_ns(row["commit_ns"]),
        "record_sequence": f"{row['record_sequence']:08d}",
        "server_transaction_id": row["transaction_id"],
        "is_last_record_in_transaction_in_partition": bool(row["is_last_in_partition"]),
        "table_name": table,
        "mods": orjson.loads(row["mods"]),
        "mod_type": _MOD_TYPE_NAMES[row["mod_type"]],
        "transaction_tag": row["transaction_tag"],
        "is_system_transaction": bool(row["is_system_transaction"]),
    }
