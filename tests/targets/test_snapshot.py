"""The snapshot target: `snapshot://NAME` endpoints, building it from a topic, and events
archived by a real snapshotter (filesystem pages, SQLite index) with the bucket as writer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from ripple.notifications.endpoints import parse_endpoint
from ripple.notifications.topics import Topic
from ripple.snapshotter import shared
from ripple.snapshotter.settings import SnapshotterSettings
from ripple.targets.base import Delivery, Outcome
from ripple.targets.destinations import push_target
from ripple.targets.snapshot import SnapshotTarget
from tests.snapshotter.service_helpers import stored_pages


@pytest.fixture
def archive(tmp_path: Path) -> Iterator[SnapshotterSettings]:
    settings = SnapshotterSettings.embedded(tmp_path, "archive", max_age_seconds=3600.0)
    shared.configure({"archive": settings})
    yield settings
    shared.configure({})


def delivery(bucket: str, key: str, when: str, event_id: str) -> Delivery:
    record = {
        "eventVersion": "2.1",
        "eventTime": when,
        "eventName": "ObjectCreated:Put",
        "s3": {"bucket": {"name": bucket}, "object": {"key": key}},
    }
    attributes = {"eventName": "ObjectCreated:Put", "bucket": bucket, "key": key}
    return Delivery.of(event_id, record, attributes)


def test_snapshot_endpoints_parse() -> None:
    endpoint = parse_endpoint("snapshot://archive")
    assert (endpoint.kind, endpoint.path) == ("snapshot", "archive")
    for bad in ("snapshot://", "snapshot://a/b", "snapshot://a b"):
        with pytest.raises(ValueError, match="name a snapshotter"):
            parse_endpoint(bad)


def test_a_topic_builds_the_target_of_a_configured_snapshotter(
    archive: SnapshotterSettings,
) -> None:
    target = push_target(Topic("t", "snapshot://archive"))
    assert isinstance(target, SnapshotTarget)
    assert target.snapshotter == "archive"
    with pytest.raises(ValueError, match=r"no snapshotter 'elsewhere'; configured: archive"):
        push_target(Topic("t", "snapshot://elsewhere"))
    with pytest.raises(ValueError, match="takes no arguments"):
        push_target(Topic("t", "snapshot://archive", {"compression": "gzip"}))


def test_events_are_archived_per_bucket_with_their_ids_and_times(
    archive: SnapshotterSettings,
) -> None:
    target = SnapshotTarget("t", "archive")
    target.open()
    results = target.publish(
        [
            delivery("photos", "a.jpg", "2026-11-21T10:00:00.250Z", "e1"),
            delivery("logs", "x.log", "2026-11-21T10:00:01.000Z", "e2"),
            delivery("photos", "b.jpg", "2026-11-21T10:00:02.000Z", "e3"),
        ]
    )
    assert [r.outcome for r in results] == [Outcome.OK] * 3
    target.close()  # the last user closes the snapshotter, which flushes its buffers

    pages = {p.metadata.writer_id: p for p in stored_pages(archive)}
    assert sorted(pages) == ["logs", "photos"]
    photos = pages["photos"].events
    assert [e.event_id for e in photos] == ["e1", "e3"]
    assert [orjson.loads(e.payload)["s3"]["object"]["key"] for e in photos] == ["a.jpg", "b.jpg"]
    assert photos[0].timestamp == 1795255200250  # 2026-11-21T10:00:00.250Z in ms
    assert dict(photos[0].attributes)["eventName"] == "ObjectCreated:Put"
    assert pages["photos"].metadata.start_time == 1795255200250


def test_targets_share_one_snapshotter_until_the_last_closes(archive: SnapshotterSettings) -> None:
    first, second = SnapshotTarget("t1", "archive"), SnapshotTarget("t2", "archive")
    first.open()
    second.open()
    assert first._snap is second._snap
    first.publish([delivery("b", "k", "2026-11-21T10:00:00Z", "e1")])
    first.close()
    assert stored_pages(archive) == []  # still open for the second target
    second.close()
    assert [p.metadata.writer_id for p in stored_pages(archive)] == ["b"]


def test_a_snapshotter_that_cannot_take_events_answers_retry(archive: SnapshotterSettings) -> None:
    target = SnapshotTarget("t", "archive")
    target.open()
    assert target._snap is not None
    target._snap.close()  # as if its log had failed
    results = target.publish([delivery("b", "k", "2026-11-21T10:00:00Z", "e1")])
    assert results[0].outcome is Outcome.RETRY
    assert "snapshotter archive" in (results[0].error or "")
    target.close()
