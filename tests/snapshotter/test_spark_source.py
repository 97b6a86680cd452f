"""A day of pages read by Spark: protobuf/zstd pages through the `ripple-snapshot` data
source, NDJSON/gzip pages through `spark.read.json`, both counted per event name."""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ripple.pipeline.session import spark_session
from ripple.snapshotter.index.sqlite import SqliteIndex
from ripple.snapshotter.service import Publish, Snapshotter
from ripple.snapshotter.settings import SnapshotterSettings
from ripple.snapshotter.spark_source import NAME, register
from ripple.snapshotter.storage import FilesystemStorage

DAY = 1_759_968_000_000  # 2025-10-09T00:00:00Z
NAMES = ["ObjectCreated:Put", "ObjectCreated:Copy", "ObjectRemoved:Delete"]


def a_day(writer: str) -> list[Publish]:
    """240 events, one every 6 minutes of the day, names in uneven proportions."""
    return [
        Publish(
            writer,
            b'{"eventName":"%s","n":%d}' % (NAMES[min(i % 6, 2)].encode(), i),
            {"eventName": NAMES[min(i % 6, 2)], "n": str(i)},
            timestamp=DAY + i * 360_000,
        )
        for i in range(240)
    ]


def archive(settings: SnapshotterSettings, events: list[Publish]) -> None:
    storage = FilesystemStorage(settings.pages_path)
    with Snapshotter(settings, storage, SqliteIndex(settings.index_location)) as snap:
        snap.publish_many(events)


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = spark_session("local[2]")
    register(session)
    yield session
    session.stop()


def test_a_day_of_pages_counted_per_event_name_by_spark(
    spark: SparkSession, tmp_path: Path
) -> None:
    base = SnapshotterSettings.embedded(tmp_path, max_events=50, max_age_seconds=3600.0)
    binary = replace(base, name="pb", directory=tmp_path / "pb")
    text = replace(base, name="nd", directory=tmp_path / "nd", format="ndjson", compression="gzip")
    photos, logs = a_day("photos"), a_day("logs")[:100]
    archive(binary, photos + logs)
    archive(text, photos)
    expected = Counter(e.attributes["eventName"] for e in photos)  # type: ignore[index]
    assert sorted(expected.values()) == [40, 40, 160]
    assert len(list(FilesystemStorage(binary.pages_path).list())) == 7  # 5 + 2 pages

    events = (
        spark.read.format(NAME)
        .option("path", str(binary.pages_path))
        .option("writer", "photos")
        .load()
    )
    assert events.rdd.getNumPartitions() == 7  # one per page file
    counted = events.groupBy(events.attributes["eventName"].alias("name")).count().collect()
    assert {r["name"]: r["count"] for r in counted} == expected
    first = events.orderBy("timestamp").first()
    assert first is not None
    assert (first.writer_id, first.page_sequence, first.timestamp) == ("photos", 0, DAY)
    assert bytes(first.payload) == photos[0].payload
    assert first.sequence == 0
    everyone = spark.read.format(NAME).option("path", str(binary.pages_path)).load()
    assert everyone.count() == 340

    lines = (
        spark.read.option("recursiveFileLookup", "true")
        .option("pathGlobFilter", "*.ndjson.gz")
        .json(str(text.pages_path))
    )
    rows = lines.where(F.col("metadata").isNull())
    counted = rows.groupBy(F.col("attributes.eventName").alias("name")).count().collect()
    assert {r["name"]: r["count"] for r in counted} == expected
    assert lines.where(F.col("metadata").isNotNull()).count() == 5  # one line per page
    payload = rows.where(F.col("attributes.n") == "7").select("payload").first()
    assert payload is not None
    assert base64.b64decode(payload[0]) == photos[7].payload
