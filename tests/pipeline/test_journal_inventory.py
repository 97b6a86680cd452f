"""The live inventory beside the journal, the whole way (Spark `local[2]`, SQLite and
PostgreSQL): boto3 writes a journaled, versioned bucket through the gateway while the
pipeline runs; `ripple journal inventory --all-versions` snapshots it; `spark.read.parquet`
of the inventory, with no ripple code, equals boto3's ListObjectVersions walk, Spark SQL's
current size of a prefix equals ListObjectsV2's, and the journal's rows of the bucket divide
at the snapshot's sequence number: the changes before it are in the inventory, the ones
after it are not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner
from pyspark.errors import AnalysisException
from pyspark.sql import Row, SparkSession

from ripple.cli import cli
from ripple.notifications.journal import JournalStore
from ripple.pipeline.journal import journal_table
from tests.gateway.conftest import Running, gateway, s3, services  # noqa: F401
from tests.pipeline.conftest import wait_for
from tests.pipeline.helpers import pipeline


def _journal(spark: SparkSession, location: Path) -> list[Row]:
    try:
        read = spark.read.parquet(journal_table(str(location)))
    except AnalysisException:  # no batch has written a row yet
        return []
    return read.where("bucket = 'photos'").orderBy("key", "sequence_number").collect()


def _versions(client: Any) -> list[tuple[str, str, bool, bool, int | None]]:
    """(key, version id, latest, delete marker, size) of every version and delete marker, as
    boto3 walks them (two a page), in key and version id order."""
    walked: list[tuple[str, str, bool, bool, int | None]] = []
    for page in client.get_paginator("list_object_versions").paginate(
        Bucket="photos", PaginationConfig={"PageSize": 2}
    ):
        walked += [
            (v["Key"], v["VersionId"], v["IsLatest"], False, v["Size"])
            for v in page.get("Versions", [])
        ]
        walked += [
            (m["Key"], m["VersionId"], m["IsLatest"], True, None)
            for m in page.get("DeleteMarkers", [])
        ]
    return sorted(walked)


def test_the_inventory_is_the_bucket_at_a_journal_sequence_number(
    spark: SparkSession,
    gateway: Running,  # noqa: F811
    s3: Any,  # noqa: F811
    tmp_path: Path,
    runner: CliRunner,
) -> None:
    db = gateway.services.db
    db.eventing = gateway.services.registry.is_eventing  # as `ripple serve` wires it
    location = tmp_path / "journal"
    s3.create_bucket(Bucket="photos")
    s3.put_bucket_versioning(Bucket="photos", VersioningConfiguration={"Status": "Enabled"})
    JournalStore(db).put(gateway.key.project_id, "photos", None, "test")
    gateway.services.config_changed()
    env = {
        "RIPPLE_DATABASE_URL": db.url.render_as_string(hide_password=False),
        "RIPPLE_JOURNAL_LOCATION": str(location),
        "RIPPLE_SPARK_MASTER": "local[2]",
        "COLUMNS": "300",
    }

    with pipeline(db, tmp_path / "checkpoint", journal=location):
        s3.put_object(Bucket="photos", Key="2026/a.jpg", Body=b"a" * 10)
        s3.put_object(Bucket="photos", Key="2026/a.jpg", Body=b"a" * 30)  # a newer version
        s3.put_object(Bucket="photos", Key="2026/b.jpg", Body=b"b" * 7)
        s3.put_object(Bucket="photos", Key="2025/c.jpg", Body=b"c" * 100)
        s3.put_object(Bucket="photos", Key="2026/gone.jpg", Body=b"g" * 5)
        s3.delete_object(Bucket="photos", Key="2026/gone.jpg")  # a delete marker
        made = runner.invoke(cli, ["journal", "inventory", "photos", "--all-versions"], env=env)
        assert made.exit_code == 0, made.output
        walk = _versions(s3)  # the bucket as the snapshot saw it
        s3.put_object(Bucket="photos", Key="2026/later.jpg", Body=b"l")  # after the snapshot
        s3.delete_object(Bucket="photos", Key="2025/c.jpg")
        wait_for(lambda: len(_journal(spark, location)) >= 8, what="8 journal rows")
        rows = _journal(spark, location)

    inventory = spark.read.parquet(str(location / "inventory"))
    snapshot = inventory.where("bucket = 'photos'").collect()
    (sequence,) = {r.sequence_number for r in snapshot}
    assert f"at journal sequence number {sequence}, in" in made.stdout

    # the journal divides at the snapshot: before it, the inventory's changes; after, not
    assert sorted((r.key, r.event_name) for r in rows if r.sequence_number > sequence) == [
        ("2025/c.jpg", "ObjectRemoved:DeleteMarkerCreated"),
        ("2026/later.jpg", "ObjectCreated:Put"),
    ]
    before = [r for r in rows if r.sequence_number <= sequence]
    assert sorted({r.version_id for r in before}) == sorted(r.version_id for r in snapshot)

    # the snapshot is a ListObjectVersions walk of the bucket as it was then
    assert (
        sorted((r.key, r.version_id, r.is_latest, r.is_delete_marker, r.size) for r in snapshot)
        == walk
    )
    assert len(walk) == 6

    # Spark SQL with no ripple code: the current size of a prefix, as ListObjectsV2 says
    inventory.createOrReplaceTempView("inventory")
    (size,) = spark.sql(
        """SELECT sum(size) AS size FROM inventory WHERE bucket = 'photos' AND is_latest
        AND NOT is_delete_marker AND key LIKE '2026/%'"""
    ).collect()
    listed = s3.list_objects_v2(Bucket="photos", Prefix="2026/")["Contents"]
    now = sum(o["Size"] for o in listed if o["Key"] != "2026/later.jpg")
    assert size.size == now == 30 + 7

    # and through `ripple journal query`, which has the view `inventory` too
    answer = runner.invoke(
        cli,
        [
            "journal",
            "query",
            "SELECT count(*) AS n FROM inventory WHERE bucket = 'photos' AND is_latest",
        ],
        env=env,
    )
    assert answer.exit_code == 0, answer.output
    cells = [line.split("│")[1].strip() for line in answer.stdout.splitlines() if "│" in line]
    assert cells == ["4"]  # a.jpg, b.jpg, c.jpg, gone.jpg's marker
