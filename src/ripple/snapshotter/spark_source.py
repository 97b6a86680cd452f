"""A Spark batch data source over a snapshotter's pages: `spark.read.format("ripple-snapshot")`.

    from ripple.snapshotter.spark_source import register
    register(spark)
    events = spark.read.format("ripple-snapshot").option("path", PAGES).load()

It reads every page file under a directory (a filesystem storage's root), whatever its key
template, format and compression: one Spark input partition per page file, one row per
event. PySpark is imported by this module only (it is a runtime dependency of ripple).

Options, the row schema, files skipped, and reading NDJSON pages without this source:
docs/snapshotter.md, "Spark".
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ripple.snapshotter.pages import PageError, decode

__all__ = ["NAME", "SCHEMA", "PageFile", "SnapshotSource", "page_files", "register"]

NAME = "ripple-snapshot"
SCHEMA = (
    "writer_id string, page_sequence long, event_id string, timestamp long, payload binary, "
    "attributes map<string,string>, sequence long"
)
ARROW_SCHEMA = pa.schema(
    [
        ("writer_id", pa.string()),
        ("page_sequence", pa.int64()),
        ("event_id", pa.string()),
        ("timestamp", pa.int64()),
        ("payload", pa.binary()),
        ("attributes", pa.map_(pa.string(), pa.string())),
        ("sequence", pa.int64()),
    ]
)
_SKIPPED = ("dead-letters.ndjson",)
_TEMP_PREFIX = ".tmp-"


def register(spark: SparkSession) -> None:
    """Make `spark.read.format("ripple-snapshot")` available in this session."""
    spark.dataSource.register(SnapshotSource)


def page_files(root: Path) -> list[str]:
    """Every page file under `root`, sorted (temporary files and symbolic links left out)."""
    found: list[str] = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith(_TEMP_PREFIX))
        for name in files:
            path = os.path.join(directory, name)
            if name.startswith(_TEMP_PREFIX) or name in _SKIPPED or os.path.islink(path):
                continue
            found.append(path)
    return sorted(found)


class PageFile(InputPartition):
    """One page file: what one Spark task reads."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class SnapshotSource(DataSource):
    """`ripple-snapshot`: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return SnapshotReader(self.options)


class SnapshotReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        options = {k.lower(): v for k, v in options.items()}
        if not options.get("path"):
            raise ValueError(
                "the ripple-snapshot source needs option 'path' (a filesystem storage's root)"
            )
        self.root = Path(options["path"])
        if not self.root.is_dir():
            raise ValueError(f"ripple-snapshot: path {str(self.root)!r} is not a directory")
        self.writer = options.get("writer") or None
        self.ignore_corrupt = options.get("ignorecorruptfiles", "false").lower() == "true"

    def partitions(self) -> Sequence[InputPartition]:
        return [PageFile(path) for path in page_files(self.root)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, PageFile):
            raise TypeError(f"not a page file: {type(partition).__name__}")
        return read_page(partition.path, self.writer, self.ignore_corrupt)


def read_page(
    path: str, writer: str | None, ignore_corrupt: bool = False
) -> Iterator[pa.RecordBatch]:
    """The events of one page file as one Arrow batch of the source's schema (none if it
    belongs to another writer than `writer`)."""
    try:
        page = decode(Path(path).read_bytes())
    except (OSError, PageError) as e:
        if ignore_corrupt:
            return
        raise ValueError(f"ripple-snapshot: {path}: {e}") from e
    meta = page.metadata
    if writer is not None and meta.writer_id != writer:
        return
    events = sorted(page.events, key=lambda e: e.sequence)
    yield pa.RecordBatch.from_arrays(
        [
            pa.array([meta.writer_id] * len(events), pa.string()),
            pa.array([meta.page_sequence] * len(events), pa.int64()),
            pa.array([e.event_id for e in events], pa.string()),
            pa.array([e.timestamp for e in events], pa.int64()),
            pa.array([e.payload for e in events], pa.binary()),
            pa.array([list(e.attributes.items()) for e in events], ARROW_SCHEMA.field(5).type),
            pa.array([e.sequence for e in events], pa.int64()),
        ],
        schema=ARROW_SCHEMA,
    )
