"""Which events the journal keeps (`keep_journaled`): a journaled bucket's, committed at or
after its journal was enabled, a rename's single event and not its removed-and-created
pair, and within its period when it was disabled since; and that a pipeline starts the
journal's query only once a bucket is journaled; and the journal's columns, read from the
events' messages in the task and finished in Spark."""

from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
from pyspark.sql import SparkSession

from ripple.metabase import Metabase, create_project
from ripple.notifications.journal import JournalStore
from ripple.pipeline import journal as journal_module
from ripple.pipeline.journal import JournalQuery, journal_columns
from ripple.pipeline.journal_events import keep_journaled
from ripple.pipeline.journal_rows import JOURNAL_COLUMNS, TASK_SCHEMA, journal_rows
from ripple.pipeline.transform import EVENT_SCHEMA

PROJECT = str(uuid.uuid4())


def events(*rows: tuple[str, int, str | None]) -> pa.RecordBatch:
    """Events of (bucket, commit ns, rename) in PROJECT."""
    columns: dict[str, list[Any]] = {name: [None] * len(rows) for name in EVENT_SCHEMA.names}
    columns["project_id"] = [PROJECT] * len(rows)
    columns["bucket"] = [bucket for bucket, _, _ in rows]
    columns["commit_ns"] = [ns for _, ns, _ in rows]
    columns["rename"] = [rename for _, _, rename in rows]
    columns["key"] = [f"k{i}" for i in range(len(rows))]
    return pa.RecordBatch.from_pydict(columns, schema=EVENT_SCHEMA)


def test_a_journaled_buckets_events_since_it_was_enabled_are_kept() -> None:
    batch = events(
        ("photos", 99, None),  # before the journal
        ("photos", 100, None),
        ("photos", 101, "s3"),  # a rename's removed + created pair
        ("photos", 101, "s3"),
        ("photos", 101, "single"),  # the same rename as one event
        ("other", 200, None),  # no journal
    )
    forever = 2**63 - 1
    kept = keep_journaled(batch, {(PROJECT, "photos"): (100, forever)})
    assert kept.column("key").to_pylist() == ["k1", "k4"]
    assert keep_journaled(batch, {}).num_rows == 0
    one = events(("photos", 100, None))
    assert keep_journaled(one, {(PROJECT, "photos"): (100, forever)}).num_rows == 1


def test_a_disabled_journal_keeps_the_events_of_its_period() -> None:
    """Disabled (or its bucket deleted) while the pipeline lags: what was committed while it
    was enabled is still journaled, what came after is not."""
    batch = events(("photos", 99, None), ("photos", 100, None), ("photos", 149, None))
    batch = pa.concat_batches([batch, events(("photos", 150, None), ("photos", 151, None))])
    kept = keep_journaled(batch, {(PROJECT, "photos"): (100, 150)})
    assert kept.column("commit_ns").to_pylist() == [100, 149]


class Started(JournalQuery):
    """A journal query that records its start instead of asking Spark."""

    def start(self) -> Any:
        return "started"


def test_the_query_starts_once_a_bucket_is_journaled(
    db: Metabase, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr(journal_module, "CHECK_EVERY_S", 0.0)
    url = db.url.render_as_string(hide_password=False)
    common = {"url": url, "events": None}
    query = Started(None, location=str(tmp_path), max_records_per_batch=10, **common)  # type: ignore[arg-type]
    assert query.start_if_journaled() is None
    project = create_project(db, "alice")
    JournalStore(db).put(project.id, "photos", None, "alice")
    assert query.start_if_journaled() == "started"
    nowhere = Started(None, location="", max_records_per_batch=10, **common)  # type: ignore[arg-type]
    assert nowhere.start_if_journaled() is None  # no journal location: never
    query.close()


def message(name: str, time: str, **s3_object: Any) -> bytes:
    """An S3 event record, as the pipeline's transform writes one (the fields the journal
    reads, among others it skips)."""
    return orjson.dumps(
        {
            "eventVersion": "2.1",
            "eventTime": time,
            "eventName": name,
            "userIdentity": {"principalId": f"who-{name}"},
            "requestParameters": {"sourceIPAddress": "10.1.2.3"},
            "responseElements": {"x-amz-request-id": f"req-{name}", "x-amz-id-2": "host"},
            "s3": {"bucket": {"name": "photos"}, "object": {"key": "k", **s3_object}},
        }
    )


def test_a_journal_row_holds_what_its_events_message_says() -> None:
    """Each column read from the messages (all of a batch at once) is what the message
    holds, the rest from the event's own columns; a field a message lacks is null."""
    names = [
        "ObjectCreated:Put",
        "ObjectRemoved:DeleteMarkerCreated",
        "ObjectRenamed:Rename",
        "LifecycleExpiration:Delete",
        "ObjectAcl:Put",
    ]
    objects: list[dict[str, Any]] = [
        {"size": 5, "eTag": "abc", "sequencer": "01"},
        {"sequencer": "02"},
        {"size": 7, "eTag": "def", "renameFromKey": "old%2Fname+x"},
        {"sequencer": "04"},
        {"size": 2**40, "eTag": "ghi"},
    ]
    times = [f"2026-11-2{n}T23:59:59.{n}00Z" for n in range(5)]
    batch = events(*(("photos", n, None) for n in range(5)))
    columns = {name: batch.column(name) for name in batch.schema.names}
    columns["event_name"] = pa.array(names)
    columns["sequencer"] = pa.array([f"SEQ{n}" for n in range(5)])
    columns["version_id"] = pa.array(["v0", None, None, "v3", None])
    columns["metadata"] = pa.array(['{"colour":"blue"}', None, "{}", None, None])
    columns["tags"] = pa.array([None, None, None, None, '{"k":"v"}'])
    columns["message"] = pa.array(
        [message(n, t, **o) for n, t, o in zip(names, times, objects, strict=True)], pa.binary()
    )
    batch = pa.RecordBatch.from_pydict(columns, schema=EVENT_SCHEMA)

    rows = journal_rows(batch)
    assert rows.schema == TASK_SCHEMA
    assert list(TASK_SCHEMA.names) == list(JOURNAL_COLUMNS)
    got = rows.to_pylist()
    for row, raw, name in zip(got, columns["message"].to_pylist(), names, strict=True):
        said = orjson.loads(raw)
        when = datetime.fromisoformat(said["eventTime"])
        assert row["record_timestamp"] == when
        assert row["record_date"] == when.date()
        assert row["requester"] == said["userIdentity"]["principalId"]
        assert row["source_ip_address"] == said["requestParameters"]["sourceIPAddress"]
        assert row["request_id"] == said["responseElements"]["x-amz-request-id"]
        assert row["size"] == said["s3"]["object"].get("size")
        assert row["e_tag"] == said["s3"]["object"].get("eTag")
        assert row["rename_source_key"] == said["s3"]["object"].get("renameFromKey")
        assert row["event_name"] == name
        assert row["bucket"] == "photos"
    assert [r["key"] for r in got] == [f"k{n}" for n in range(5)]
    assert [r["sequence_number"] for r in got] == [f"SEQ{n}" for n in range(5)]
    assert [r["version_id"] for r in got] == ["v0", None, None, "v3", None]
    assert [r["record_type"] for r in got] == [
        "CREATE", "DELETE", "UPDATE_METADATA", "DELETE", "UPDATE_METADATA"
    ]  # fmt: skip
    assert [r["is_delete_marker"] for r in got] == [False, True, False, False, False]
    assert [r["last_modified_date"] for r in got] == [got[0]["record_timestamp"], *[None] * 4]
    assert [r["user_metadata"] for r in got] == ['{"colour":"blue"}', None, "{}", None, None]
    assert [r["object_tags"] for r in got] == [None, None, None, None, '{"k":"v"}']
    assert journal_rows(batch.slice(0, 0)).schema == TASK_SCHEMA


def test_spark_reads_the_maps_and_decodes_a_renames_source_key(spark: SparkSession) -> None:
    """What the tasks leave to Spark: the metadata and tags into maps, the rename's source
    key URL-decoded; the columns in the journal's order."""
    rows = pa.RecordBatch.from_pylist(
        [
            {"key": "a", "user_metadata": '{"colour":"blue"}', "object_tags": "{}"},
            {"key": "b", "rename_source_key": "old%2Fname+x"},
        ],
        schema=TASK_SCHEMA,
    )
    frame = journal_columns(spark.createDataFrame(pa.Table.from_batches([rows]).to_pandas()))
    assert frame.columns == list(JOURNAL_COLUMNS)
    first, second = frame.orderBy("key").collect()
    assert first.user_metadata == {"colour": "blue"}
    assert first.object_tags == {}
    assert second.user_metadata is None
    assert second.rename_source_key == "old/name x"
