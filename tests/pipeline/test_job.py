"""The Spark job end to end (Spark `local[2]`, both databases): metabase writes → change
stream → events → routing → delivery, with admission control, restarts from the checkpoint,
and a lost checkpoint resumed from the offsets in the metabase."""

from __future__ import annotations

import hashlib
import shutil
import uuid
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import orjson
import pytest
from pyspark.sql import SparkSession

from ripple.changestream.reader import ChangeStreamReader
from ripple.changestream.tail import transactions
from ripple.events import s3_events
from ripple.metabase import (
    BucketLocation,
    DeleteObjectsItem,
    Metabase,
    ObjectLocation,
    create_bucket,
    create_project,
    delete_object,
    delete_objects,
)
from ripple.notifications.registry import Destination, Registry
from ripple.pipeline import metrics
from ripple.targets.base import Target
from tests.changestream.conftest import keys_in, partition_of_key
from tests.metabase.objects import commit_inline_object
from tests.pipeline.conftest import running_pipeline, wait_for
from tests.pipeline.fakes import FileRecordingTarget

TOPIC = "projects/p/topics/photos"
OTHER = "projects/p/topics/logs"


class World:
    def __init__(self, db: Metabase) -> None:
        self.db = db
        self.project = create_project(db, "pipeline")
        self.registry = Registry()
        db.eventing = self.registry.is_eventing

    def bucket(self, name: str, *destinations: Destination) -> BucketLocation:
        create_bucket(self.db, BucketLocation(self.project.id, name))
        self.registry.set_bucket(self.project.id, name, destinations)
        return BucketLocation(self.project.id, name)

    def put(self, bucket: BucketLocation, key: str, data: bytes = b"x") -> None:
        commit_inline_object(
            self.db,
            ObjectLocation(bucket.project_id, bucket.bucket_name, key),
            data,
            etag=hashlib.md5(data).hexdigest(),
        )

    def running(
        self, checkpoint: Path, targets: dict[str, list[Target]], **options: Any
    ) -> AbstractContextManager[Any]:
        """The pipeline over this metabase and registry (`running_pipeline`) until the block
        ends."""
        url = self.db.url.render_as_string(hide_password=False)
        return running_pipeline(url, checkpoint, self.registry, targets, self.db.writer, **options)

    def expected(self) -> list[dict[str, Any]]:
        """Every event of the stream, by the mapping `changestream tail --events` uses."""
        reader = ChangeStreamReader(self.db.engine)
        owners = {str(self.project.id): str(self.project.public_id)}
        out: list[dict[str, Any]] = []
        for p in range(reader.partitions()):
            for group in transactions(reader.drain(p)):
                out.extend(e.message for e in s3_events(group, owners=owners))
        return out


@pytest.fixture
def world(db: Metabase) -> World:
    return World(db)


def events_of(target: FileRecordingTarget) -> list[dict[str, Any]]:
    return [orjson.loads(d.body)["Records"][0] for d in target.acked]


def by_sequencer(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(events, key=lambda e: (e["s3"]["bucket"]["name"], e["s3"]["object"]["sequencer"]))


def test_writes_reach_their_destinations_as_the_tail_maps_them(
    spark: SparkSession, world: World, tmp_path: Path
) -> None:
    photos = world.bucket("photos", Destination(TOPIC))
    logs = world.bucket(
        "logs", Destination(OTHER, "OnlyCreatedJson", ("s3:ObjectCreated:*",), "app/", ".json")
    )
    world.put(photos, "red flower.jpg")
    world.put(photos, "red flower.jpg", b"again")  # an overwrite: one Put event, no delete
    world.put(photos, "b.jpg")
    delete_object(world.db, ObjectLocation(photos.project_id, "photos", "b.jpg"))
    delete_objects(world.db, photos, [DeleteObjectsItem("red flower.jpg"), DeleteObjectsItem("x")])
    world.put(logs, "app/1.json")
    world.put(logs, "app/1.txt")  # not selected by the suffix
    world.put(logs, "other/2.json")  # nor by the prefix
    delete_object(world.db, ObjectLocation(logs.project_id, "logs", "app/1.json"))  # not created

    photos_target = FileRecordingTarget("photos", tmp_path / "photos.jsonl")
    logs_target = FileRecordingTarget("logs", tmp_path / "logs.jsonl")
    expected = world.expected()
    expected_photos = [e for e in expected if e["s3"]["bucket"]["name"] == "photos"]
    assert sorted(e["eventName"] for e in expected_photos) == [  # read partition by partition
        "ObjectCreated:Put",
        "ObjectCreated:Put",
        "ObjectCreated:Put",
        "ObjectRemoved:Delete",
        "ObjectRemoved:Delete",
    ]
    with world.running(tmp_path / "checkpoint", {TOPIC: [photos_target], OTHER: [logs_target]}):
        wait_for(lambda: len(photos_target.acked) >= 5 and logs_target.acked, "events arrive")

    assert by_sequencer(events_of(photos_target)) == by_sequencer(expected_photos)
    [log_event] = events_of(logs_target)
    assert log_event["s3"]["object"]["key"] == "app/1.json"
    assert log_event["s3"]["configurationId"] == "OnlyCreatedJson"
    attrs = photos_target.acked[0].attributes
    assert set(attrs) >= {"eventName", "bucket", "key", "sequencer"}
    ids = [d.event_id for d in photos_target.acked]
    assert len(set(ids)) == len(ids)


def test_a_batch_delivers_in_commit_order_across_partitions(
    spark: SparkSession, world: World, tmp_path: Path
) -> None:
    """`k` is PUT (recorded in k's partition), then deleted by a DeleteObjects whose least key
    `a` is in a lower partition: both records come in one batch, partition 0 first, and the
    handler puts the Put before the Delete."""
    photos = world.bucket("photos", Destination(TOPIC))
    pid = photos.project_id
    key = next(k for k in (f"k{n}" for n in range(1000)) if partition_of_key(pid, "photos", k) > 0)
    least = next(
        f"a{n}"
        for n in range(1000)
        if partition_of_key(pid, "photos", f"a{n}") < partition_of_key(pid, "photos", key)
    )
    world.put(photos, key)
    world.put(photos, least)
    delete_objects(world.db, photos, [DeleteObjectsItem(least), DeleteObjectsItem(key)])
    reader = ChangeStreamReader(world.db.engine)
    deleted_in = {
        r["partition"]
        for p in range(reader.partitions())
        for r in reader.drain(p)
        if r["mod_type"] == "DELETE"
    }
    assert deleted_in == {partition_of_key(pid, "photos", least)}  # not k's partition

    target = FileRecordingTarget("photos", tmp_path / "target.jsonl")
    with world.running(tmp_path / "checkpoint", {TOPIC: [target]}):
        wait_for(lambda: len(target.acked) >= 4, "4 events arrive")
    assert len({d.batch_id for d in target.acked}) == 1
    of_key = [e["eventName"] for e in events_of(target) if e["s3"]["object"]["key"] == key]
    assert of_key == ["ObjectCreated:Put", "ObjectRemoved:Delete"]


def test_backlog_drains_in_bounded_batches_that_keep_transactions_whole(
    spark: SparkSession, world: World, tmp_path: Path
) -> None:
    photos = world.bucket("photos", Destination(TOPIC))
    keys = keys_in(photos.project_id, "photos", 0, 6)  # one partition: the budget is shared
    for i in range(12):  # each an overwrite: a DELETE and an INSERT record in one transaction
        world.put(photos, keys[i % 6])
    target = FileRecordingTarget("photos", tmp_path / "target.jsonl")
    with world.running(tmp_path / "checkpoint", {TOPIC: [target]}, max_records=3):
        wait_for(lambda: len(target.acked) >= 12, "12 events arrive")
    batches = {d.batch_id for d in target.acked}
    assert len(batches) >= 18 // 3  # 18 records, at most 3 a batch (a transaction may exceed)
    # no event was lost to a transaction cut in two: overwrites report only Put
    assert [e["eventName"] for e in events_of(target)] == ["ObjectCreated:Put"] * 12


def test_a_restart_resumes_after_what_was_delivered_even_without_its_checkpoint(
    spark: SparkSession, world: World, tmp_path: Path
) -> None:
    photos = world.bucket("photos", Destination(TOPIC))
    checkpoint = tmp_path / "checkpoint"
    first = FileRecordingTarget("photos", tmp_path / "first.jsonl")
    world.put(photos, "a")
    with world.running(checkpoint, {TOPIC: [first]}):
        wait_for(lambda: len(first.acked) == 1, "the first event arrives")
        world.put(photos, "b")
        wait_for(lambda: len(first.acked) == 2, "the second event arrives")

    world.put(photos, "c")  # while the pipeline is stopped
    second = FileRecordingTarget("photos", tmp_path / "second.jsonl")
    with world.running(checkpoint, {TOPIC: [second]}):
        wait_for(lambda: len(second.acked) >= 1, "the third event arrives")
    assert [e["s3"]["object"]["key"] for e in events_of(second)] == ["c"]

    shutil.rmtree(checkpoint)  # lost: the offsets in the metabase still say where it was
    world.put(photos, "d")
    third = FileRecordingTarget("photos", tmp_path / "third.jsonl")
    with world.running(checkpoint, {TOPIC: [third]}):
        wait_for(lambda: len(third.acked) >= 1, "the fourth event arrives")
    assert [e["s3"]["object"]["key"] for e in events_of(third)] == ["d"]


def test_events_of_a_bucket_without_destinations_are_counted_and_dropped(
    spark: SparkSession, world: World, tmp_path: Path
) -> None:
    photos = world.bucket("photos", Destination(TOPIC))
    gone = world.bucket("gone", Destination(TOPIC))
    world.put(gone, "lost.jpg")
    world.registry.set_bucket(gone.project_id, "gone", [])  # its configuration is removed
    world.put(photos, "kept.jpg")
    before = metrics.EVENTS_UNROUTED._value.get()
    target = FileRecordingTarget("photos", tmp_path / "target.jsonl")
    with world.running(tmp_path / "checkpoint", {TOPIC: [target]}):
        wait_for(lambda: len(target.acked) >= 1, "the routed event arrives")
        wait_for(lambda: metrics.EVENTS_UNROUTED._value.get() == before + 1, "the count")
    assert [e["s3"]["object"]["key"] for e in events_of(target)] == ["kept.jpg"]
    assert uuid.UUID(str(gone.project_id))  # the bucket existed with eventing when written
