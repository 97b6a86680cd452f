"""Fixtures for change stream tests: a metabase with eventing switched on per bucket, and
every record of a stream read back in (partition, position) order."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from ripple.changestream.ddl import create_change_stream, drop_change_stream
from ripple.changestream.reader import ChangeStreamReader
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


def read_all(db: Metabase, stream: str = "bucket_eventing") -> list[dict[str, Any]]:
    """Every record of `stream`, partition by partition, in position order."""
    reader = ChangeStreamReader(db.engine, stream, write_engine=db.writer)
    return [record for p in range(reader.partitions()) for record in reader.drain(p)]


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
