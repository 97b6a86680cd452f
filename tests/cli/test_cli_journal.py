"""`ripple journal enable | disable | status | inventory` (CliRunner, SQLite and
PostgreSQL): the configuration stored as the gateway's `?journal` stores it, record
expiration kept or changed with the journal's start, the status table, the change log
naming the command, and its refusals (an unknown bucket, days out of bounds or no number at
all) as one line on stderr with a non-zero exit and nothing stored; the live inventory
written by the command and by `ripple up`'s schedule, a bucket without a journal refused."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from ripple.cli import cli
from ripple.cli.journal_upkeep import JournalUpkeep
from ripple.metabase import (
    BucketLocation,
    Metabase,
    ObjectLocation,
    create_bucket,
    create_project,
    delete_object,
)
from ripple.notifications.journal import Journal, JournalStore
from ripple.notifications.store import EventingStore
from tests.metabase.objects import commit_inline_object
from tests.waiting import wait_for


@pytest.fixture
def photos(db: Metabase) -> BucketLocation:
    """The bucket `photos` (and `videos`) of the project alice."""
    project = create_project(db, "alice")
    for name in ("photos", "videos"):
        create_bucket(db, BucketLocation(project.id, name))
    return BucketLocation(project.id, "photos")


def ripple(runner: CliRunner, db: Metabase, tmp_path: Path, *args: str) -> Result:
    env = {
        "RIPPLE_DATABASE_URL": db.url.render_as_string(hide_password=False),
        "RIPPLE_DATA_DIR": str(tmp_path / "data"),
        "COLUMNS": "200",  # keep rich from wrapping
    }
    return runner.invoke(cli, list(args), env=env)


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout


def test_enable_change_and_disable(
    runner: CliRunner, db: Metabase, tmp_path: Path, photos: BucketLocation
) -> None:
    store = JournalStore(db)
    out = ok(ripple(runner, db, tmp_path, "journal", "enable", "photos"))
    journal = store.get(photos.project_id, "photos")
    assert journal is not None
    assert journal.expiration_days is None
    since = journal.enabled_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert out.strip() == (
        f"journal of bucket photos enabled since {since}; record expiration: none (rows kept)"
    )

    out = ok(ripple(runner, db, tmp_path, "journal", "enable", "photos", "--expiration-days", "30"))
    assert "record expiration: after 30 days" in out
    assert store.get(photos.project_id, "photos") == Journal(journal.enabled_ns, 30)

    out = ok(ripple(runner, db, tmp_path, "journal", "disable", "photos"))
    assert out.strip() == "journal of bucket photos disabled"
    assert store.get(photos.project_id, "photos") is None
    out = ok(ripple(runner, db, tmp_path, "journal", "disable", "photos"))
    assert out.strip() == "bucket photos had no journal"


def test_status(runner: CliRunner, db: Metabase, tmp_path: Path, photos: BucketLocation) -> None:
    assert ok(ripple(runner, db, tmp_path, "journal", "status")).strip() == (
        "no bucket has a journal"
    )
    ok(ripple(runner, db, tmp_path, "journal", "enable", "videos", "--expiration-days", "7"))
    ok(ripple(runner, db, tmp_path, "journal", "enable", "photos"))
    store = JournalStore(db)
    started = {
        name: journal.enabled_at.strftime("%Y-%m-%d %H:%M:%S UTC")
        for name in ("photos", "videos")
        if (journal := store.get(photos.project_id, name)) is not None
    }
    lines = ok(ripple(runner, db, tmp_path, "journal", "status")).splitlines()
    header = next(line for line in lines if "bucket" in line and "enabled since" in line)
    assert "record expiration" in header
    rows = [line for line in lines if "photos" in line or "videos" in line]
    assert len(rows) == 2
    assert "photos" in rows[0]  # by name
    assert started["photos"] in rows[0]
    assert "none (rows kept)" in rows[0]
    assert "videos" in rows[1]
    assert started["videos"] in rows[1]
    assert "after 7 days" in rows[1]

    one = ok(ripple(runner, db, tmp_path, "journal", "status", "videos"))
    assert "after 7 days" in one
    assert "photos" not in one
    ok(ripple(runner, db, tmp_path, "journal", "disable", "videos"))
    none = ok(ripple(runner, db, tmp_path, "journal", "status", "videos"))
    assert none.strip() == "bucket videos has no journal"


def test_every_change_is_in_the_change_log(
    runner: CliRunner, db: Metabase, tmp_path: Path, photos: BucketLocation
) -> None:
    store = EventingStore(db)
    generation = store.generation()
    ok(ripple(runner, db, tmp_path, "journal", "enable", "photos"))
    ok(ripple(runner, db, tmp_path, "journal", "disable", "photos"))
    assert store.generation() > generation
    changes = store.changes(2)
    assert [c["action"] for c in changes] == ["delete-journal", "put-journal"]
    assert all(str(c["principal"]).startswith("ripple journal (") for c in changes)
    assert set(store.snapshot().journals) == set()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["enable", "nope"], "Error: no bucket named 'nope'"),
        (["disable", "nope"], "Error: no bucket named 'nope'"),
        (["status", "nope"], "Error: no bucket named 'nope'"),
        (
            ["enable", "photos", "--expiration-days", "3"],
            "Error: --expiration-days must be from 7 to 2147483647, not 3",
        ),
        (
            ["enable", "photos", "--expiration-days", "2147483648"],
            "Error: --expiration-days must be from 7 to 2147483647, not 2147483648",
        ),
        (
            ["enable", "photos", "--expiration-days", "x"],
            "Error: --expiration-days must be a whole number from 7 to 2147483647, not 'x'",
        ),
        (
            ["enable", "photos", "--expiration-days", "-30"],
            "Error: --expiration-days must be a whole number from 7 to 2147483647, not '-30'",
        ),
        (
            ["enable", "photos", "--expiration-days", "9" * 400],
            "Error: --expiration-days must be from 7 to 2147483647, not a number of 400 digits",
        ),
        (
            ["enable", "photos", "--expiration-days", "9" * 5000],
            "Error: --expiration-days must be from 7 to 2147483647, not a number of 5000 digits",
        ),
    ],
)
def test_refusals_are_one_line_and_store_nothing(
    runner: CliRunner,
    db: Metabase,
    tmp_path: Path,
    photos: BucketLocation,
    args: list[str],
    message: str,
) -> None:
    generation = EventingStore(db).generation()
    result = ripple(runner, db, tmp_path, "journal", *args)
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # no traceback
    assert result.stderr.splitlines() == [message]
    assert result.stdout == ""
    assert JournalStore(db).get(photos.project_id, "photos") is None
    assert EventingStore(db).generation() == generation


def test_help_says_where_the_journal_goes(runner: CliRunner, tmp_path: Path) -> None:
    for args in (["journal", "--help"], ["journal", "enable", "--help"]):
        result = runner.invoke(cli, args, env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert "journal.location" in result.output
        assert "docs/journal.md" in result.output
    listed = runner.invoke(cli, ["--help"])
    assert "journal" in listed.output


def test_inventory_writes_the_journaled_buckets_objects(
    runner: CliRunner, db: Metabase, tmp_path: Path, photos: BucketLocation
) -> None:
    at = ObjectLocation(photos.project_id, "photos", "a.txt")
    commit_inline_object(db, at, b"abc", etag="e1")
    delete_object(db, ObjectLocation(photos.project_id, "photos", "gone"))  # unversioned: none
    ok(ripple(runner, db, tmp_path, "journal", "enable", "photos"))
    out = ok(ripple(runner, db, tmp_path, "journal", "inventory", "photos"))
    path = tmp_path / "data" / "journal" / "inventory" / "bucket=photos" / "inventory.parquet"
    table = pq.read_table(path)
    sequence = table.schema.metadata[b"ripple.sequence_number"].decode()
    assert out.strip() == (
        "inventory of bucket photos: 1 row (the latest versions) at journal sequence number "
        f"{sequence}, in {path}"
    )
    assert table.column("key").to_pylist() == ["a.txt"]
    assert table.column("size").to_pylist() == [3]

    out = ok(ripple(runner, db, tmp_path, "journal", "inventory", "photos", "--all-versions"))
    assert "1 row (every version and delete marker)" in out
    assert pq.read_schema(path).metadata[b"ripple.versions"] == b"all"


@pytest.mark.parametrize(
    ("bucket", "message"),
    [
        (
            "videos",
            "Error: bucket videos has no journal: `ripple journal enable videos` first "
            "(an inventory is a journaled bucket's)",
        ),
        ("nowhere", "Error: no bucket named 'nowhere'"),
    ],
)
def test_inventory_refusals_are_one_line(
    runner: CliRunner,
    db: Metabase,
    tmp_path: Path,
    photos: BucketLocation,
    bucket: str,
    message: str,
) -> None:
    ok(ripple(runner, db, tmp_path, "journal", "enable", "photos"))
    result = ripple(runner, db, tmp_path, "journal", "inventory", bucket)
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # no traceback
    assert result.stderr.splitlines() == [message]
    assert not (tmp_path / "data" / "journal" / "inventory").exists()


def test_inventory_refuses_a_location_that_is_not_local(
    runner: CliRunner, db: Metabase, tmp_path: Path, photos: BucketLocation
) -> None:
    ok(ripple(runner, db, tmp_path, "journal", "enable", "photos"))
    env = {
        "RIPPLE_DATABASE_URL": db.url.render_as_string(hide_password=False),
        "RIPPLE_JOURNAL_LOCATION": "hdfs://namenode/ripple",
    }
    result = runner.invoke(cli, ["journal", "inventory", "photos"], env=env)
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [
        "Error: the live inventory is written to a local journal.location only, not hdfs:// "
        "(the snapshot replaces its file by a local rename); set journal.location to a local "
        "directory to have one"
    ]


def test_the_schedule_writes_every_journaled_bucket(
    db: Metabase, tmp_path: Path, photos: BucketLocation
) -> None:
    store = JournalStore(db)
    store.put(photos.project_id, "photos", None, "test")
    store.put(photos.project_id, "videos", None, "test")
    commit_inline_object(db, ObjectLocation(photos.project_id, "videos", "v"), b"v", etag="e")
    store.delete(photos.project_id, "photos", "test")  # no longer journaled: no inventory
    schedule = JournalUpkeep(db, str(tmp_path), 3600)
    schedule.start()
    try:
        wait_for(lambda: schedule.runs >= 1, what="a first run")
    finally:
        schedule.stop()
    inventories = tmp_path / "inventory"
    assert sorted(p.name for p in inventories.iterdir()) == ["bucket=videos"]
    table = pq.read_table(inventories / "bucket=videos" / "inventory.parquet")
    assert table.column("key").to_pylist() == ["v"]


def _expired_partition(location: Path) -> Path:
    """A journal table whose log lists one file of photos' 2020-01-01 (long expired)."""
    partition = location / "journal" / "record_date=2020-01-01" / "bucket=photos"
    partition.mkdir(parents=True)
    (partition / "part-0.parquet").write_bytes(b"PAR1")
    log = location / "journal" / "_spark_metadata"
    log.mkdir()
    entry = {"path": f"file://{partition / 'part-0.parquet'}", "size": 4, "action": "add"}
    (log / "0").write_text("v1\n" + json.dumps(entry))
    return partition


def test_expire_drops_what_is_past_the_record_expiration(
    runner: CliRunner, db: Metabase, tmp_path: Path, photos: BucketLocation
) -> None:
    partition = _expired_partition(tmp_path / "data" / "journal")
    ok(ripple(runner, db, tmp_path, "journal", "enable", "photos"))  # rows kept
    location = tmp_path / "data" / "journal"
    said = (
        f"record expiration: 0 partitions out of the journal table's log, 0 deleted from {location}"
    )
    assert ok(ripple(runner, db, tmp_path, "journal", "expire")).strip() == said
    ok(ripple(runner, db, tmp_path, "journal", "enable", "photos", "--expiration-days", "7"))
    out = ok(ripple(runner, db, tmp_path, "journal", "expire"))
    assert out.strip() == said.replace("0 partitions", "1 partition")
    assert (location / "journal" / "_spark_metadata" / "0").read_text() == "v1"
    out = ok(ripple(runner, db, tmp_path, "journal", "expire"))
    assert out.strip() == said.replace("0 deleted", "1 deleted")
    assert not partition.exists()


def test_the_schedule_expires_before_it_writes_the_inventories(
    db: Metabase, tmp_path: Path, photos: BucketLocation
) -> None:
    partition = _expired_partition(tmp_path)
    JournalStore(db).put(photos.project_id, "photos", 7, "test")
    schedule = JournalUpkeep(db, str(tmp_path), 3600)
    schedule.run_once()
    assert (tmp_path / "journal" / "_spark_metadata" / "0").read_text() == "v1"
    assert partition.exists()  # deleted a run later
    assert (tmp_path / "inventory" / "bucket=photos" / "inventory.parquet").is_file()
    schedule.run_once()
    assert not partition.exists()


def test_the_schedule_ends_with_one_warning_on_a_location_that_is_not_local(
    db: Metabase, caplog: pytest.LogCaptureFixture
) -> None:
    schedule = JournalUpkeep(db, "hdfs://namenode/ripple", 0.01)
    schedule.start()
    try:
        wait_for(lambda: "no journal upkeep" in caplog.text, what="the warning")
    finally:
        schedule.stop()
    assert caplog.text.count("no journal upkeep") == 1
    assert "need a local journal.location, not hdfs://namenode/ripple" in caplog.text
    assert schedule.runs == 0
