"""Fixtures for change stream tests: a metabase with eventing switched on per bucket, and
every record of a stream read back in (partition, position) order."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from ripple.changestream.ddl import create_change_stream, drop_change_stream
from ripple.changestream.reader import ChangeStreamReader
from ripple.changestream.writer import partition_of
from ripple.metabase import Metabase
from ripple.metabase.schema import objects


class Eventing:
    """The set of buckets with eventing; `db.eventing` reads it."""

    def __init__(self, db: Metabase) -> None:
        self.buckets: set[tuple[uuid.UUID, str]] = set()
        db.eventing = lambda project, bucket: (project, bucket) in self.buckets

    def enable(self, project_id: uuid.UUID, bucket: str) -> None:
        self.buckets.add((project_id, bucket))


@pytest.fixture
def eventing(db: Metabase) -> Eventing:
    return Eventing(db)


def partition_of_key(project_id: Any, bucket: str, key: str, partitions: int = 4) -> int:
    """The partition of a change to `key` made by a transaction that changes no other key
    of its bucket (a PUT, a DELETE)."""
    return partition_of([project_id, bucket, key], partitions)


def keys_in(
    project_id: Any,
    bucket: str,
    partition: int,
    count: int,
    *,
    prefix: str = "k",
    partitions: int = 4,
) -> list[str]:
    """`count` keys `<prefix><n>` of `bucket` whose single-key changes go to `partition`."""
    found = (
        key
        for key in (f"{prefix}{n}" for n in itertools.count())
        if partition_of_key(project_id, bucket, key, partitions) == partition
    )
    return list(itertools.islice(found, count))


def read_all(db: Metabase, stream: str = "bucket_eventing") -> list[dict[str, Any]]:
    """Every record of `stream` in commit order: by commit timestamp (a commit is later than
    every earlier one of the stream, whatever its partition), then partition and position."""
    reader = ChangeStreamReader(db.engine, stream, write_engine=db.writer)
    records = [record for p in range(reader.partitions()) for record in reader.drain(p)]
    return sorted(records, key=lambda r: (r["commit_timestamp"], r["partition"], r["position"]))


def tag_of(record: dict[str, Any]) -> dict[str, Any]:
    raw = record["transaction_tag"]
    return json.loads(raw) if raw else {}


@pytest.fixture
def extra_stream(db: Metabase) -> Iterator[Any]:
    """Make a further change stream over objects for one test; dropped afterwards."""
    made: list[str] = []

    def make(name: str, columns: list[str], options: dict[str, Any], partitions: int = 4) -> str:
        with db.write() as conn:
            create_change_stream(conn, name, objects, columns, options, partitions=partitions)
        db.changestreams.reload()
        made.append(name)
        return name

    yield make
    with db.write() as conn:
        for name in made:
            drop_change_stream(conn, name)
    db.changestreams.reload()
