"""Which events the journal keeps (`keep_journaled`): a journaled bucket's, committed at or
after its journal was enabled, a rename's single event and not its removed-and-created
pair, and within its period when it was disabled since; and that a pipeline starts the
journal's query only once a bucket is journaled; and the journal's columns parse each
message once."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from ripple.metabase import Metabase, create_project
from ripple.notifications.journal import JournalStore
from ripple.pipeline import journal as journal_module
from ripple.pipeline.journal import JournalQuery, journal_rows, keep_journaled
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


def test_the_journals_columns_parse_each_message_once(spark: SparkSession) -> None:
    """Fields taken from one `from_json` of the message are each parsed again by Spark's
    optimizer (OptimizeJsonExprs): the plan keeps one parse of it, beside the metadata's and
    the tags' (the journal's costliest step, BENCHMARKS.md "Issue 30")."""
    events = spark.createDataFrame([], from_arrow_schema(EVENT_SCHEMA))
    plan = journal_rows(events)._jdf.queryExecution().optimizedPlan().toString()
    assert plan.count("from_json(MapType") == 2  # the metadata's and the tags'
    assert plan.count("from_json(") == 3
