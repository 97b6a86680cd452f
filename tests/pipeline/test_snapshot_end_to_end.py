"""Bucket events archived the whole way (Spark `local[2]`, SQLite): boto3's `sns` client
creates a topic whose push endpoint is `snapshot://archive`, boto3's `s3` client puts a
notification and uploads and deletes through the gateway, and the running pipeline's
snapshot target writes the events as pages (one writer per bucket) that the index lists
and replay reads back in order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from botocore.exceptions import ClientError
from pyspark.sql import SparkSession

from ripple.metabase import Metabase
from ripple.snapshotter import shared
from ripple.snapshotter.index.sqlite import SqliteIndex
from ripple.snapshotter.settings import SnapshotterSettings
from tests.conftest import _empty, _metabase
from tests.gateway.conftest import Running, gateway, s3, services  # noqa: F401
from tests.pipeline.conftest import wait_for
from tests.pipeline.helpers import notify, pipeline
from tests.snapshotter.service_helpers import stored_pages


@pytest.fixture
def db(sqlite_url: str) -> Metabase:
    """SQLite only: the archive is what is tested here (the API runs on both elsewhere)."""
    return _empty(_metabase(sqlite_url))


@pytest.fixture
def archive(tmp_path: Path) -> Iterator[SnapshotterSettings]:
    settings = SnapshotterSettings.embedded(tmp_path, "archive", max_age_seconds=0.2)
    shared.configure({"archive": settings})
    yield settings
    shared.configure({})


def test_uploads_and_deletes_are_archived_in_pages(
    spark: SparkSession,
    gateway: Running,  # noqa: F811
    s3: Any,  # noqa: F811
    sns: Any,
    archive: SnapshotterSettings,
    tmp_path: Path,
) -> None:
    db = gateway.services.db
    db.eventing = gateway.services.registry.is_eventing  # as `ripple serve` wires it
    with pytest.raises(ClientError, match=r"InvalidParameter.*no snapshotter 'nope'"):
        sns.create_topic(Name="nope", Attributes={"push-endpoint": "snapshot://nope"})
    created = sns.create_topic(Name="audit", Attributes={"push-endpoint": "snapshot://archive"})
    s3.create_bucket(Bucket="photos")
    notify(s3, "photos", created["TopicArn"], "audit")

    def archived() -> list[tuple[str, str]]:
        return [
            (record["eventName"], record["s3"]["object"]["key"])
            for page in stored_pages(archive)
            for record in map(orjson.loads, (e.payload for e in page.events))
        ]

    with pipeline(db, tmp_path / "checkpoint"):
        for key in ("a.jpg", "b.jpg", "c.jpg"):
            s3.put_object(Bucket="photos", Key=key, Body=key.encode())
        s3.delete_object(Bucket="photos", Key="b.jpg")
        wait_for(lambda: len(archived()) >= 4, what="4 archived events")

    assert sorted(archived()) == [
        ("ObjectCreated:Put", "a.jpg"),
        ("ObjectCreated:Put", "b.jpg"),
        ("ObjectCreated:Put", "c.jpg"),
        ("ObjectRemoved:Delete", "b.jpg"),
    ]
    pages = stored_pages(archive)
    assert {p.metadata.writer_id for p in pages} == {"photos"}
    records = [orjson.loads(e.payload) for p in pages for e in p.events]
    assert all(r["eventVersion"] == "2.1" for r in records)
    assert all(r["s3"]["configurationId"] == "audit" for r in records)
    index = SqliteIndex(archive.index_location)
    try:
        entries = index.query("photos")
        assert sum(e.event_count for e in entries) == 4
        assert len(entries) == len(pages)
    finally:
        index.close()
