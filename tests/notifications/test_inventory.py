"""A journaled bucket's live inventory on SQLite and PostgreSQL: the latest versions, or all
versions and delete markers, exactly as ListObjectVersions walks them; a new snapshot
replacing the old one whole; and the journal sequence number a snapshot claims, checked
against the change records of writes made while it was taken."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from ripple.events.sequencer import timestamp_ns
from ripple.metabase import (
    BucketLocation,
    Metabase,
    ObjectLocation,
    Versioning,
    create_bucket,
    create_project,
    delete_object,
    list_object_versions,
    put_object_tagging,
)
from ripple.metabase.errors import BucketNotFound
from ripple.notifications.inventory import (
    INVENTORY_FILE,
    INVENTORY_SCHEMA,
    InventoryError,
    inventory_directory,
    write_inventory,
)
from tests.changestream.conftest import read_all
from tests.metabase.objects import commit_inline_object


def _walk(db: Metabase, loc: BucketLocation) -> list[dict[str, object]]:
    """Every version and delete marker, as ListObjectVersions pages through them (2 a page)."""
    rows: list[dict[str, object]] = []
    key_marker = version_marker = ""
    while True:
        page = list_object_versions(
            db, loc, key_marker=key_marker, version_id_marker=version_marker, max_keys=2
        )
        for entry in page.versions:
            obj = entry.object
            rows.append(
                {
                    "key": obj.object_key,
                    "version_id": obj.version_id,
                    "is_latest": entry.is_latest,
                    "is_delete_marker": obj.is_delete_marker,
                    "size": None if obj.is_delete_marker else obj.total_plain_size,
                    "e_tag": None if obj.is_delete_marker else obj.etag,
                    "last_modified_date": obj.created_at,
                    "object_tags": sorted(obj.tags.items()),
                    "user_metadata": sorted(obj.user_metadata.items()),
                }
            )
        if not page.is_truncated:
            return rows
        key_marker, version_marker = page.next_key_marker, page.next_version_id_marker


def _read(path: Path) -> list[dict[str, object]]:
    table = pq.read_table(path)
    assert table.schema.remove_metadata() == INVENTORY_SCHEMA
    rows = table.to_pylist()
    for row in rows:
        for name in ("object_tags", "user_metadata"):
            row[name] = sorted(row[name])
    return rows


def _compared(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    names = ("key", "version_id", "is_latest", "is_delete_marker", "size", "e_tag")
    return [
        {
            **{name: row[name] for name in names},
            "last_modified_date": row["last_modified_date"],
            "object_tags": row["object_tags"],
            "user_metadata": row["user_metadata"],
        }
        for row in rows
    ]


@pytest.fixture
def versioned(db: Metabase) -> BucketLocation:
    """A versioned bucket: keys with several versions, a delete marker on the latest of one,
    tags, user metadata, and a key whose only version is a delete marker."""
    project = create_project(db, "alice")
    loc = BucketLocation(project.id, "photos")
    create_bucket(db, loc, versioning=Versioning.ENABLED)
    at = lambda key: ObjectLocation(project.id, "photos", key)  # noqa: E731
    for i in range(3):
        commit_inline_object(db, at("a.txt"), b"a" * (i + 1), etag=f"ea{i}")
    commit_inline_object(db, at("b/c.jpg"), b"bc", etag="ebc", user_metadata={"camera": "x"})
    put_object_tagging(db, at("b/c.jpg"), {"colour": "red", "size": "big"})
    commit_inline_object(db, at("gone"), b"g", etag="eg")
    delete_object(db, at("gone"))
    delete_object(db, at("never"))  # a delete marker alone
    commit_inline_object(db, at("é z"), b"ez", etag="eez")
    return loc


def test_all_versions_are_a_list_object_versions_walk(
    db: Metabase, versioned: BucketLocation, tmp_path: Path
) -> None:
    inventory = write_inventory(db, versioned, str(tmp_path), all_versions=True)
    assert inventory is not None
    assert inventory.path == tmp_path / "inventory" / "bucket=photos" / INVENTORY_FILE
    rows = _read(inventory.path)
    walk = _walk(db, versioned)
    assert inventory.rows == len(walk) == 8
    assert _compared(rows) == walk
    assert {row["sequence_number"] for row in rows} == {inventory.sequence_number}
    metadata = pq.read_schema(inventory.path).metadata
    assert metadata[b"ripple.sequence_number"] == inventory.sequence_number.encode()
    assert metadata[b"ripple.versions"] == b"all"


def test_latest_versions_leave_out_older_versions_and_delete_markers(
    db: Metabase, versioned: BucketLocation, tmp_path: Path
) -> None:
    inventory = write_inventory(db, versioned, str(tmp_path))
    assert inventory is not None
    rows = _read(inventory.path)
    latest = [r for r in _walk(db, versioned) if r["is_latest"] and not r["is_delete_marker"]]
    assert [r["key"] for r in rows] == ["a.txt", "b/c.jpg", "é z"]
    assert _compared(rows) == latest
    assert rows[1]["object_tags"] == [("colour", "red"), ("size", "big")]
    assert rows[1]["user_metadata"] == [("camera", "x")]
    assert rows[0]["size"] == 3
    assert rows[0]["e_tag"] == "ea2"
    assert pq.read_schema(inventory.path).metadata[b"ripple.versions"] == b"latest"


def test_a_new_snapshot_replaces_the_old_one_whole(
    db: Metabase, versioned: BucketLocation, tmp_path: Path
) -> None:
    first = write_inventory(db, versioned, str(tmp_path))
    assert first is not None
    opened = pq.ParquetFile(first.path)  # a reader that opened the old snapshot keeps it
    commit_inline_object(db, ObjectLocation(versioned.project_id, "photos", "new"), b"n", etag="en")
    second = write_inventory(db, versioned, str(tmp_path))
    assert second is not None
    assert second.path == first.path
    assert second.sequence_number > first.sequence_number
    assert [r["key"] for r in _read(second.path)] == ["a.txt", "b/c.jpg", "new", "é z"]
    assert opened.read().num_rows == 3
    assert sorted(p.name for p in first.path.parent.iterdir()) == [INVENTORY_FILE]


def test_a_cancelled_snapshot_keeps_the_previous_one(
    db: Metabase, versioned: BucketLocation, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = write_inventory(db, versioned, str(tmp_path))
    assert first is not None
    monkeypatch.setattr("ripple.notifications.inventory.ROWS_PER_GROUP", 1)
    assert write_inventory(db, versioned, str(tmp_path), cancelled=lambda: True) is None
    assert sorted(p.name for p in first.path.parent.iterdir()) == [INVENTORY_FILE]
    assert pq.read_metadata(first.path).num_rows == 3


def test_an_empty_bucket_has_an_inventory_with_its_schema(db: Metabase, tmp_path: Path) -> None:
    project = create_project(db, "alice")
    loc = BucketLocation(project.id, "empty")
    create_bucket(db, loc)
    inventory = write_inventory(db, loc, str(tmp_path))
    assert inventory is not None
    assert inventory.rows == 0
    assert pq.read_table(inventory.path).schema.remove_metadata() == INVENTORY_SCHEMA


def test_a_missing_bucket_writes_nothing(db: Metabase, tmp_path: Path) -> None:
    project = create_project(db, "alice")
    with pytest.raises(BucketNotFound):
        write_inventory(db, BucketLocation(project.id, "nowhere"), str(tmp_path))
    assert not (tmp_path / "inventory").exists()


@pytest.mark.parametrize("location", ["hdfs://namenode/ripple", "s3a://bucket/journal"])
def test_a_location_that_is_not_local_is_refused(location: str) -> None:
    with pytest.raises(InventoryError, match=r"local journal\.location only"):
        inventory_directory(location)


def test_a_file_url_is_a_local_directory(tmp_path: Path) -> None:
    assert inventory_directory(f"file://{tmp_path}") == tmp_path / "inventory"


def test_the_sequence_number_divides_the_writes_made_while_the_snapshot_is_taken(
    db: Metabase, tmp_path: Path
) -> None:
    """Writers PUT new keys, recorded in the change stream, before, while and after the
    snapshot is read: the snapshot holds exactly the keys whose change record's commit time
    is at or before its sequence number's, so a journal row is in it if and only if its
    sequence number is not greater."""
    project = create_project(db, "alice")
    loc = BucketLocation(project.id, "busy")
    create_bucket(db, loc)
    db.eventing = lambda _project, _bucket: True  # every write recorded
    stop = threading.Event()
    written: list[int] = []

    def writer(n: int) -> None:
        i = 0
        while not stop.is_set() or i < 20:
            commit_inline_object(
                db, ObjectLocation(project.id, "busy", f"w{n}-{i:05}"), b"x", etag="e"
            )
            written.append(1)
            i += 1

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    try:
        while len(written) < 30:  # the writers are well under way
            threading.Event().wait(0.01)
        inventory = write_inventory(db, loc, str(tmp_path))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert inventory is not None
    closed_ns = int(inventory.sequence_number[:16], 16)
    commits: dict[str, int] = {}
    for record in read_all(db):
        for mod in record["mods"]:
            if record["mod_type"] == "INSERT" and mod["keys"]["bucket_name"] == "busy":
                commits[mod["keys"]["object_key"]] = timestamp_ns(record["commit_timestamp"])
    assert len(commits) == len(written)
    before = {key for key, ns in commits.items() if ns <= closed_ns}
    after = set(commits) - before
    assert before
    assert after
    assert {row["key"] for row in _read(inventory.path)} == before


def test_pyarrow_reads_the_inventories_as_a_partitioned_dataset(
    db: Metabase, versioned: BucketLocation, tmp_path: Path
) -> None:
    write_inventory(db, versioned, str(tmp_path))
    dataset = ds.dataset(tmp_path / "inventory", partitioning="hive")
    table = dataset.to_table()
    assert table.column("bucket").to_pylist() == ["photos"] * 3
    assert table.column("key").to_pylist() == ["a.txt", "b/c.jpg", "é z"]
