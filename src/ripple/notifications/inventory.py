"""The live inventory of a journaled bucket: the state of every object (the latest versions,
or all versions and delete markers) as one Parquet file per bucket beside the journal table,
`<journal.location>/inventory/bucket=<name>/inventory.parquet`, replaced atomically by each
new snapshot (docs/journal.md).

A snapshot is read in one transaction, and is consistent with a `sequence_number` of the
journal: every journal row of the bucket's keys whose `sequence_number` is not greater is
in it, and none that is greater. To make that so, the snapshot closes the change stream's
partitions up to a commit time first (as a heartbeat closes one): under the partition rows'
locks (in-flight commits finish first) it moves every partition's last commit time to the
greatest one or now, pins the read transaction's snapshot, then lets writers go on, whose
commits then take a later time (`ripple.changestream.writer`).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ripple.changestream.reader import DEFAULT_STREAM
from ripple.changestream.schema import change_partitions
from ripple.events.sequencer import MAX_INDEX, sequencer
from ripple.metabase import BucketLocation, Metabase, Object
from ripple.metabase.rows import METADATA_COLUMNS, at_bucket, get_bucket, object_from_row
from ripple.metabase.schema import objects
from ripple.metabase.types import COMMITTED_STATUSES
from ripple.notifications.journal_expiry import local_directory

__all__ = [
    "INVENTORY_FILE",
    "INVENTORY_SCHEMA",
    "Inventory",
    "InventoryError",
    "consistent_read",
    "inventory_directory",
    "write_inventory",
]

INVENTORY_FILE = "inventory.parquet"  # one per bucket, under `bucket=<name>/`
ROWS_PER_GROUP = 65_536  # a Parquet row group: a Spark task's share of a large bucket
SEQUENCE_KEY = b"ripple.sequence_number"  # the snapshot's, in the file's key-value metadata
VERSIONS_KEY = b"ripple.versions"  # `latest` or `all`

_STRINGS = pa.map_(pa.string(), pa.string())
# The columns, after Amazon S3 Metadata's inventory table; `bucket` is the directory's
INVENTORY_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("sequence_number", pa.string()),
        ("version_id", pa.string()),
        ("is_latest", pa.bool_()),
        ("is_delete_marker", pa.bool_()),
        ("size", pa.int64()),
        ("last_modified_date", pa.timestamp("us", tz="UTC")),
        ("e_tag", pa.string()),
        ("content_type", pa.string()),
        ("is_multipart", pa.bool_()),
        ("checksum_algorithm", pa.string()),
        ("object_tags", _STRINGS),
        ("user_metadata", _STRINGS),
    ]
)


class InventoryError(Exception):
    """An inventory that cannot be written: the message says why and what to do."""


@dataclass(frozen=True)
class Inventory:
    """A written snapshot: where, how many rows, and the journal's sequence number it is
    consistent with."""

    path: Path
    rows: int
    sequence_number: str
    all_versions: bool


def inventory_directory(location: str) -> Path:
    """The inventory table under a journal location: a local directory (a path, or a
    `file:` URL). Another scheme is refused: the snapshot's atomic replacement is a local
    file system's rename."""
    local = local_directory(location)
    if local is None:
        raise InventoryError(
            f"the live inventory is written to a local journal.location only, not "
            f"{urlsplit(location).scheme}:// (the snapshot replaces its file by a local "
            f"rename); set journal.location to a local directory to have one"
        )
    return local / "inventory"


@contextmanager
def consistent_read(db: Metabase, stream: str = DEFAULT_STREAM) -> Iterator[tuple[Connection, str]]:
    """A read transaction, and the journal sequence number its snapshot is consistent with
    (module docstring): every change of an object committed in the snapshot has a smaller
    sequence number, every change committed after it a greater one."""
    p = change_partitions.c
    engine = db.engine
    if db.dialect == "postgresql":  # one snapshot for all its statements
        engine = engine.execution_options(isolation_level="REPEATABLE READ")
    with engine.connect() as reader:
        with db.write() as conn:  # SQLite: the write lock; PostgreSQL: the partition rows'
            last: list[int] = list(
                conn.execute(
                    sa.select(p.last_commit_ns)
                    .where(p.stream_name == stream)
                    .order_by(p.partition)  # the writers' order: no deadlock with one
                    .with_for_update()
                )
                .scalars()
                .all()
            )
            closed = max([*last, time.time_ns()])
            if last:
                conn.execute(
                    sa.update(change_partitions)
                    .where(p.stream_name == stream)
                    .values(last_commit_ns=closed, last_transaction=None)
                )
            snapshot = reader.begin()
            # a statement that reads a table pins the snapshot (SQLite's, in WAL mode, too)
            reader.execute(sa.select(p.partition).limit(1)).all()
        try:
            yield reader, sequencer(closed, MAX_INDEX)
        finally:
            snapshot.rollback()


def _row_values(obj: Object, sequence_number: str, is_latest: bool) -> tuple[object, ...]:
    marker = obj.is_delete_marker
    return (
        obj.object_key,
        sequence_number,
        obj.version_id,
        is_latest,
        marker,
        None if marker else obj.total_plain_size,
        obj.created_at,
        None if marker else obj.etag,
        None if marker else obj.content_type,
        bool(obj.part_sizes),
        None if obj.checksum is None else obj.checksum.algorithm,
        list(obj.tags.items()),
        list(obj.user_metadata.items()),
    )


def _batch(rows: list[tuple[object, ...]]) -> pa.RecordBatch:
    columns: list[Sequence[object]] = (
        list(zip(*rows, strict=True)) if rows else [() for _ in INVENTORY_SCHEMA]
    )
    return pa.record_batch(
        [
            pa.array(values, type=field.type)
            for values, field in zip(columns, INVENTORY_SCHEMA, strict=True)
        ],
        schema=INVENTORY_SCHEMA,
    )


def _committed(loc: BucketLocation) -> tuple[sa.ColumnElement[bool], ...]:
    """The bucket's committed rows: its versions and delete markers, no pending upload."""
    return at_bucket(loc), objects.c.status.in_(COMMITTED_STATUSES)


def _rows(
    conn: Connection, loc: BucketLocation, sequence_number: str, all_versions: bool
) -> Iterator[tuple[object, ...]]:
    """The bucket's rows in key order, each key's versions newest first: every version with
    `all_versions`, else each key's latest unless it is a delete marker. One query, its rows
    streamed (a server-side cursor on PostgreSQL): the snapshot is one anyway."""
    query = (
        sa.select(*METADATA_COLUMNS)
        .where(*_committed(loc))
        .order_by(objects.c.object_key, objects.c.version.desc())
    )
    previous: bytes | None = None
    for row in conn.execute(query, execution_options={"yield_per": ROWS_PER_GROUP}):
        obj = object_from_row(row)
        raw = obj.object_key.encode("utf-8")
        is_latest = raw != previous
        previous = raw
        if all_versions or (is_latest and not obj.is_delete_marker):
            yield _row_values(obj, sequence_number, is_latest)


def _count(conn: Connection, loc: BucketLocation) -> int:
    """The bucket's committed rows: the most the inventory has (for a progress bar)."""
    return conn.execute(
        sa.select(sa.func.count()).select_from(objects).where(*_committed(loc))
    ).scalar_one()


def write_inventory(
    db: Metabase,
    loc: BucketLocation,
    location: str,
    *,
    all_versions: bool = False,
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] = lambda: False,
) -> Inventory | None:
    """Write the bucket's inventory under the journal `location`, replacing its previous
    snapshot atomically (a reader opens the old file or the new one, never a part);
    `progress(rows scanned so far, rows at most)` now and then. None if `cancelled` said
    so before the end (the previous snapshot stays)."""
    directory = inventory_directory(location) / f"bucket={loc.bucket_name}"
    staging = directory / f".{INVENTORY_FILE}.{uuid.uuid4().hex}"  # hidden from readers
    written = 0
    try:
        with consistent_read(db) as (conn, sequence_number):
            get_bucket(conn, loc)  # BucketNotFound if it went
            directory.mkdir(parents=True, exist_ok=True)
            most = _count(conn, loc)
            versions = b"all" if all_versions else b"latest"
            metadata = {SEQUENCE_KEY: sequence_number.encode(), VERSIONS_KEY: versions}
            with pq.ParquetWriter(
                staging, INVENTORY_SCHEMA.with_metadata(metadata), compression="zstd"
            ) as writer:
                group: list[tuple[object, ...]] = []
                for row in _rows(conn, loc, sequence_number, all_versions):
                    group.append(row)
                    if len(group) == ROWS_PER_GROUP:
                        if cancelled():
                            return None
                        writer.write_batch(_batch(group))
                        written += len(group)
                        group = []
                        if progress is not None:
                            progress(written, most)
                writer.write_batch(_batch(group))  # an empty bucket's file has its schema
                written += len(group)
        with open(staging, "rb") as f:
            os.fsync(f.fileno())
        target = directory / INVENTORY_FILE
        os.replace(staging, target)
        _sync_directory(directory)
    finally:
        staging.unlink(missing_ok=True)
    if progress is not None:
        progress(written, written)
    return Inventory(target, written, sequence_number, all_versions)


def _sync_directory(directory: Path) -> None:
    """The rename on disk too (a directory's fsync), where the platform has one."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
