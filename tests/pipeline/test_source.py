"""The change-stream source's planning, without Spark: how a batch's ranges become input
partitions (tasks), and that reading one gives every record of its ranges."""

from __future__ import annotations

import hashlib

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from ripple.metabase import (
    BucketLocation,
    Metabase,
    ObjectLocation,
    commit_inline_object,
    create_bucket,
    create_project,
)
from ripple.pipeline import source
from ripple.pipeline.source import ChangeStreamStreamReader, RangePartition
from tests.changestream.conftest import keys_in


@pytest.fixture
def planned(db: Metabase) -> tuple[ChangeStreamStreamReader, dict[str, int], dict[str, int]]:
    """Two PUTs in each of the 4 partitions, and a reader's (start, end) over all of them."""
    db.eventing = lambda _project, _bucket: True
    project = create_project(db, "source")
    create_bucket(db, BucketLocation(project.id, "photos"))
    for p in range(4):
        for key in keys_in(project.id, "photos", p, 2):
            commit_inline_object(
                db,
                ObjectLocation(project.id, "photos", key),
                key.encode(),
                etag=hashlib.md5(key.encode()).hexdigest(),
            )
    reader = ChangeStreamStreamReader({"url": db.url.render_as_string(hide_password=False)})
    start = reader.initialOffset()
    return reader, start, reader.latestOffset(start, ReadAllAvailable())


def records_of(reader: ChangeStreamStreamReader, part: RangePartition) -> list[tuple[int, int]]:
    return [
        (row["partition"], row["position"])
        for batch in reader.read(part)
        for row in batch.to_pylist()
    ]


def test_a_small_batch_is_one_task_over_every_partition(
    planned: tuple[ChangeStreamStreamReader, dict[str, int], dict[str, int]],
) -> None:
    reader, start, end = planned
    try:
        (part,) = reader.partitions(start, end)
        assert isinstance(part, RangePartition)
        assert part.ranges == ((0, 0, 2), (1, 0, 2), (2, 0, 2), (3, 0, 2))
        assert records_of(reader, part) == [(p, n) for p in range(4) for n in (1, 2)]
    finally:
        reader.stop()


def test_a_large_batch_is_a_task_per_stream_partition(
    planned: tuple[ChangeStreamStreamReader, dict[str, int], dict[str, int]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    planned[0].stop()
    monkeypatch.setattr(source, "SINGLE_TASK_RECORDS", 7)  # the batch holds 8
    _, start, end = planned
    reader = ChangeStreamStreamReader({"url": planned[0].url})
    try:
        parts = reader.partitions(start, end)
        assert [p.ranges for p in parts if isinstance(p, RangePartition)] == [
            ((p, 0, 2),) for p in range(4)
        ]
        assert [records_of(reader, p) for p in parts if isinstance(p, RangePartition)] == [
            [(p, 1), (p, 2)] for p in range(4)
        ]
        assert reader.partitions(end, end) == []  # nothing new: no task
    finally:
        reader.stop()


def test_a_batch_of_more_than_half_of_max_records_is_a_task_per_partition(
    planned: tuple[ChangeStreamStreamReader, dict[str, int], dict[str, int]],
) -> None:
    """With maxRecordsPerBatch 14, a backlog drains in batches of up to 14: 8 records are
    more than half of that, so they keep a task per partition."""
    planned[0].stop()
    _, start, end = planned
    reader = ChangeStreamStreamReader({"url": planned[0].url, "maxRecordsPerBatch": "14"})
    try:
        assert len(reader.partitions(start, end)) == 4
    finally:
        reader.stop()
