"""The bucket journal the whole way (Spark `local[2]`, SQLite and PostgreSQL): boto3 writes
through the gateway — PUT, copy, multipart, DeleteObjects, a versioned delete, tagging, an
ACL, a rename — into a journaled bucket while the pipeline runs, and `spark.read.parquet`
of the journal, with no ripple code, finds each change exactly once, in sequencer order per key,
with its columns as S3's events say; a bucket without a journal, and what a journaled one
did before its journal was enabled, are not in it."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
from click.testing import CliRunner
from pyspark.errors import AnalysisException
from pyspark.sql import Row, SparkSession

from ripple.cli import cli
from ripple.notifications.journal import JournalStore
from ripple.pipeline.journal import JOURNAL_COLUMNS, journal_table
from tests.gateway.conftest import Running, gateway, s3, services  # noqa: F401
from tests.pipeline.conftest import wait_for
from tests.pipeline.helpers import pipeline


def journal(spark: SparkSession, location: Path) -> list[Row]:
    """Every row of the journal, as a reader with no ripple code sees it."""
    table = Path(journal_table(str(location)))
    try:
        read = spark.read.parquet(str(table))
    except AnalysisException:  # no batch has written a row yet: no file to read a schema from
        return []
    return read.orderBy("key", "sequence_number").collect()


def journaled(running: Running, bucket: str) -> None:
    """Journal the gateway user's `bucket` from now on."""
    JournalStore(running.services.db).put(running.key.project_id, bucket, None, "test")
    running.services.config_changed()  # this gateway's registry: the bucket is eventing now


def test_every_change_of_a_journaled_bucket_is_in_the_journal_once(
    spark: SparkSession,
    gateway: Running,  # noqa: F811
    s3: Any,  # noqa: F811
    tmp_path: Path,
    runner: CliRunner,
) -> None:
    db = gateway.services.db
    db.eventing = gateway.services.registry.is_eventing  # as `ripple serve` wires it
    location = tmp_path / "journal"
    for bucket in ("photos", "docs", "other"):
        s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket="photos", VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket="photos", Key="before.txt", Body=b"not journaled")
    journaled(gateway, "photos")
    journaled(gateway, "docs")  # unversioned: renames

    with pipeline(db, tmp_path / "checkpoint", journal=location):
        put = s3.put_object(
            Bucket="photos", Key="a.txt", Body=b"hello", Metadata={"colour": "blue"}
        )
        s3.copy_object(Bucket="photos", Key="b.txt", CopySource="photos/a.txt")
        upload = s3.create_multipart_upload(Bucket="photos", Key="big.bin")
        part = s3.upload_part(
            Bucket="photos", Key="big.bin", UploadId=upload["UploadId"], PartNumber=1, Body=b"x"
        )
        s3.complete_multipart_upload(
            Bucket="photos",
            Key="big.bin",
            UploadId=upload["UploadId"],
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
        )
        s3.put_object_tagging(
            Bucket="photos", Key="a.txt", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]}
        )
        s3.put_object_acl(Bucket="photos", Key="a.txt", ACL="public-read")
        s3.delete_objects(
            Bucket="photos", Delete={"Objects": [{"Key": "b.txt"}, {"Key": "big.bin"}]}
        )
        s3.delete_object(Bucket="photos", Key="a.txt")  # versioned: a delete marker
        s3.put_object(Bucket="other", Key="elsewhere.txt", Body=b"no journal")
        s3.put_object(Bucket="docs", Key="draft.md", Body=b"# draft")
        s3.rename_object(Bucket="docs", Key="final.md", RenameSource="docs/draft.md")
        wait_for(lambda: len(journal(spark, location)) >= 10, what="10 journal rows")
        everything = journal(spark, location)

    renamed = [
        (r.key, r.record_type, r.event_name, r.rename_source_key)
        for r in everything
        if r.bucket == "docs"
    ]
    assert renamed == [
        ("draft.md", "CREATE", "ObjectCreated:Put", None),
        ("final.md", "UPDATE_METADATA", "ObjectRenamed:Rename", "draft.md"),
    ]
    rows = [r for r in everything if r.bucket == "photos"]

    assert [list(row.asDict()) for row in rows[:1]] == [list(JOURNAL_COLUMNS)]
    seen = [(r.key, r.event_name, r.record_type) for r in rows]
    assert seen == [
        ("a.txt", "ObjectCreated:Put", "CREATE"),
        ("a.txt", "ObjectTagging:Put", "UPDATE_METADATA"),
        ("a.txt", "ObjectAcl:Put", "UPDATE_METADATA"),
        ("a.txt", "ObjectRemoved:DeleteMarkerCreated", "DELETE"),
        ("b.txt", "ObjectCreated:Copy", "CREATE"),
        ("b.txt", "ObjectRemoved:DeleteMarkerCreated", "DELETE"),
        ("big.bin", "ObjectCreated:CompleteMultipartUpload", "CREATE"),
        ("big.bin", "ObjectRemoved:DeleteMarkerCreated", "DELETE"),
    ]
    created = rows[0]
    assert created.bucket == "photos"
    assert created.size == 5
    assert created.e_tag == put["ETag"].strip('"')
    assert created.version_id == put["VersionId"]
    assert created.user_metadata == {"colour": "blue"}
    assert created.requester  # the principal that wrote it
    assert created.source_ip_address == "127.0.0.1"
    assert created.request_id
    assert created.last_modified_date == created.record_timestamp
    # the event's date in UTC: the session's zone (here the machine's) plays no part
    utc = created.record_timestamp.astimezone(datetime.UTC)
    assert str(created.record_date) == utc.date().isoformat()
    assert rows[1].object_tags == {"k": "v"}
    assert [r.is_delete_marker for r in rows] == [
        False, False, False, True, False, True, False, True
    ]  # fmt: skip
    sequencers = [r.sequence_number for r in rows if r.key == "a.txt"]
    assert sequencers == sorted(sequencers, key=lambda s: (len(s), s))

    # pyarrow, listing the directory itself (no crash here, so no batch written twice)
    listed = ds.dataset(journal_table(str(location)), partitioning="hive").to_table()
    assert sorted(
        zip(listed.column("key").to_pylist(), listed.column("event_name").to_pylist(), strict=True)
    ) == sorted((r.key, r.event_name) for r in everything)

    # Spark SQL over it, with no ripple code: the deletes by a requester in a time range
    spark.read.parquet(journal_table(str(location))).createOrReplaceTempView("journal")
    times = [r.record_timestamp for r in rows]
    start, end = min(times), max(times)
    deletes = spark.sql(
        f"""SELECT key FROM journal WHERE record_type = 'DELETE'
        AND requester = '{created.requester}'
        AND record_timestamp BETWEEN '{start}' AND '{end}' ORDER BY key"""
    ).collect()
    assert [r.key for r in deletes] == ["a.txt", "b.txt", "big.bin"]

    # the same through `ripple journal query`, for users without a notebook
    answer = runner.invoke(
        cli,
        [
            "journal",
            "query",
            "SELECT key, size FROM journal WHERE record_type = 'CREATE' "
            "AND bucket = 'photos' ORDER BY key",
            "--limit",
            "2",
        ],
        env={"RIPPLE_JOURNAL_LOCATION": str(location), "RIPPLE_SPARK_MASTER": "local[2]"},
    )
    assert answer.exit_code == 0, answer.output
    printed = [line.split("│")[1:3] for line in answer.stdout.splitlines() if "│" in line]
    assert [[cell.strip() for cell in cells] for cells in printed] == [
        ["a.txt", "5"],
        ["b.txt", "5"],
    ]
    header = next(line for line in answer.stdout.splitlines() if "key" in line)
    assert header.split() == ["┃", "key", "┃", "size", "┃"]
    assert "the first 2 rows (--limit N for more)" in answer.stderr
    wrong = runner.invoke(
        cli,
        ["journal", "query", "SELECT nothing FROM journal"],
        env={"RIPPLE_JOURNAL_LOCATION": str(location)},
    )
    assert wrong.exit_code == 1
    assert wrong.stdout == ""
    said = wrong.stderr.strip().splitlines()
    assert len(said) == 1, said
    assert said[0].startswith("Error: the query failed: [UNRESOLVED_COLUMN")
