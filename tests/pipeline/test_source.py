"""The change-stream source's planning, without Spark: how a batch's ranges become input
partitions (tasks), and that reading one gives every record of its ranges."""

from __future__ import annotations

import hashlib

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from ripple.metabase import (
    BucketLocation,
    DeleteObjectsItem,
    Metabase,
    ObjectLocation,
    create_bucket,
    create_project,
    delete_objects,
    rename_object,
    rename_prefix,
)
from ripple.pipeline import source
from ripple.pipeline.source import ChangeStreamStreamReader, RangePartition
from tests.changestream.conftest import keys_in
from tests.metabase.objects import commit_inline_object


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


@pytest.mark.parametrize("change", ["delete-objects", "rename", "rename-prefix"])
def test_a_large_batch_with_a_change_of_several_keys_is_one_task(
    db: Metabase, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """A DeleteObjects or a rename is recorded in its least key's partition, so a key's
    events may be in two partitions of one batch: the batch is then one task, which delivers
    them in commit order."""
    db.eventing = lambda _project, _bucket: True
    project = create_project(db, "source")
    bucket = BucketLocation(project.id, "photos")
    create_bucket(db, bucket)
    keys = [key for p in range(4) for key in keys_in(project.id, "photos", p, 2)]
    for key in keys:
        commit_inline_object(
            db, ObjectLocation(project.id, "photos", key), b"x", etag=hashlib.md5(b"x").hexdigest()
        )
    monkeypatch.setattr(source, "SINGLE_TASK_RECORDS", 2)
    reader = ChangeStreamStreamReader({"url": db.url.render_as_string(hide_password=False)})
    try:
        start = reader.initialOffset()
        assert len(reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))) == 4
        if change == "delete-objects":
            delete_objects(db, bucket, [DeleteObjectsItem(keys[0]), DeleteObjectsItem(keys[-1])])
        elif change == "rename":
            rename_object(db, ObjectLocation(project.id, "photos", keys[-1]), "renamed")
        else:  # a prefix of one key: only the tag tells it is a rename
            old = ObjectLocation(project.id, "photos", "old/k")
            commit_inline_object(db, old, b"x", etag=hashlib.md5(b"x").hexdigest())
            rename_prefix(db, bucket, "old/", "new/")
        (part,) = reader.partitions(start, reader.latestOffset(start, ReadAllAvailable()))
        assert isinstance(part, RangePartition)
        assert [p for p, _, _ in part.ranges] == [0, 1, 2, 3]
    finally:
        reader.stop()


@pytest.mark.parametrize("change", ["delete-objects", "rename"])
def test_a_backlog_never_takes_a_keys_later_event_before_an_earlier_one(
    db: Metabase, change: str
) -> None:
    """A key's deletion by a change of several keys is recorded in another partition (its
    least key's); its next PUT in its own. A backlog cut into batches by maxRecordsPerBatch
    takes every partition up to one commit time, so no batch holds the PUT without the
    deletion before it, however the partitions' backlogs differ."""
    db.eventing = lambda _project, _bucket: True
    project = create_project(db, "source")
    bucket = BucketLocation(project.id, "photos")
    create_bucket(db, bucket)
    # `first` sorts before `key` and lives in another partition: the change is recorded there
    first, *fillers = keys_in(project.id, "photos", 0, 12, prefix="a")
    (key,) = keys_in(project.id, "photos", 3, 1, prefix="z")
    put = lambda k: commit_inline_object(  # noqa: E731
        db, ObjectLocation(project.id, "photos", k), b"x", etag=hashlib.md5(b"x").hexdigest()
    )
    reader = ChangeStreamStreamReader({"url": db.url.render_as_string(hide_password=False)})
    try:
        start = reader.initialOffset()
        for k in (key, first, *fillers):  # a backlog in partition 0, little in partition 3
            put(k)
        if change == "delete-objects":
            delete_objects(db, bucket, [DeleteObjectsItem(first), DeleteObjectsItem(key)])
        else:
            rename_object(db, ObjectLocation(project.id, "photos", key), first)
        put(key)  # after the change, in partition 3
        seen: list[tuple[int, int]] = []  # (commit_ns, position) of each batch's records
        batches = 0
        begin = start
        while True:
            end = reader.latestOffset(begin, ReadMaxRows(8))
            parts = reader.partitions(begin, end)
            if not parts:
                break
            rows = [
                row
                for part in parts
                if isinstance(part, RangePartition)
                for batch in reader.read(part)
                for row in batch.to_pylist()
            ]
            # nothing committed earlier than this batch's records is left for a later batch
            assert not seen or min(r["commit_ns"] for r in rows) > max(ns for ns, _ in seen)
            seen += [(r["commit_ns"], r["position"]) for r in rows]
            begin, batches = end, batches + 1
        assert batches > 1  # the backlog was cut
        assert len(seen) == len(set(seen))
    finally:
        reader.stop()
