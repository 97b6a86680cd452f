"""The journal's record expiration on a table Spark's own file sink wrote (Spark `local[2]`):
after a run, `spark.read.parquet` of the table, with no ripple code, no longer sees the
expired days of the expiring bucket and sees everything else; the sink's next batches,
through a compaction of its log, do not bring them back; and the next run deletes their
files without breaking a reader."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

from pyspark.sql import SparkSession

from ripple.notifications.journal_expiry import journal_table, prune_journal

TODAY = date(2026, 11, 28)
SCHEMA = "key string, record_date date, bucket string"


def _append(
    spark: SparkSession, source: Path, table: str, batch: int, rows: list[dict[str, str]]
) -> None:
    """One micro-batch of `rows` into the table, through Spark's file sink."""
    (source / f"{batch}.json").write_text("\n".join(json.dumps(r) for r in rows))
    query = (
        spark.readStream.schema(SCHEMA)
        .json(str(source))
        .writeStream.format("parquet")
        .option("path", table)
        .option("checkpointLocation", str(source.parent / "checkpoint"))
        .partitionBy("record_date", "bucket")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def _keys(spark: SparkSession, table: str) -> list[str]:
    return sorted(r.key for r in spark.read.parquet(table).collect())


def test_expired_days_leave_what_spark_reads_and_stay_gone(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    table = journal_table(str(tmp_path))
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", "2")
    try:
        _append(
            spark,
            source,
            table,
            0,
            [
                {"key": "old-photo", "record_date": "2026-11-01", "bucket": "photos"},
                {"key": "old-doc", "record_date": "2026-11-01", "bucket": "docs"},
            ],
        )
        _append(
            spark,
            source,
            table,
            1,
            [
                {"key": "new-photo", "record_date": "2026-11-27", "bucket": "photos"},
                {"key": "older-photo", "record_date": "2026-10-30", "bucket": "photos"},
            ],
        )
        assert _keys(spark, table) == ["new-photo", "old-doc", "old-photo", "older-photo"]

        first = prune_journal(str(tmp_path), {"photos": 7}, TODAY)
        assert first is not None
        assert first.unlisted == {
            "record_date=2026-10-30/bucket=photos",
            "record_date=2026-11-01/bucket=photos",
        }
        assert first.deleted == []
        assert _keys(spark, table) == ["new-photo", "old-doc"]

        # the sink goes on, compacting its log (every 2 batches here): nothing comes back
        _append(
            spark,
            source,
            table,
            2,
            [{"key": "today", "record_date": "2026-11-28", "bucket": "photos"}],
        )
        _append(
            spark,
            source,
            table,
            3,
            [{"key": "today-2", "record_date": "2026-11-28", "bucket": "docs"}],
        )
        assert any(p.name.endswith(".compact") for p in Path(table, "_spark_metadata").iterdir())
        assert _keys(spark, table) == ["new-photo", "old-doc", "today", "today-2"]

        second = prune_journal(str(tmp_path), {"photos": 7}, TODAY)
        assert second is not None
        assert sorted(second.deleted) == [
            "record_date=2026-10-30/bucket=photos",
            "record_date=2026-11-01/bucket=photos",
        ]
        assert not Path(table, "record_date=2026-10-30").exists()
        assert Path(table, "record_date=2026-11-01", "bucket=docs").is_dir()
        assert _keys(spark, table) == ["new-photo", "old-doc", "today", "today-2"]
    finally:
        spark.conf.unset("spark.sql.streaming.fileSink.log.compactInterval")
