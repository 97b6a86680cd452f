"""Change stream definitions: options and their validation, the DDL that migration steps
run, and a later migration step changing bucket_eventing with the records following it."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from ripple.changestream import ChangeStreamError, StreamOptions, ValueCaptureType
from ripple.changestream.ddl import alter_change_stream, create_change_stream
from ripple.changestream.definition import parse_retention
from ripple.changestream.schema import change_streams
from ripple.changestream.writer import load_definitions
from ripple.metabase import (
    BucketLocation,
    Metabase,
    ObjectLocation,
    create_bucket,
    create_project,
    delete_object,
)
from ripple.metabase.migrate import head_revision, upgrade
from ripple.metabase.schema import objects
from tests.changestream.conftest import read_all
from tests.metabase.objects import commit_inline_object

TEST_MIGRATIONS = Path(__file__).parent / "migrations"


@pytest.mark.parametrize(
    ("text", "period"),
    [
        ("1d", timedelta(days=1)),
        ("30d", timedelta(days=30)),
        ("36h", timedelta(hours=36)),
        ("10080m", timedelta(days=7)),
        ("86400s", timedelta(days=1)),
    ],
)
def test_retention_period_in_range(text: str, period: timedelta) -> None:
    assert parse_retention(text) == period


@pytest.mark.parametrize("text", ["0d", "23h", "31d", "721h", "1w", "", "d", "-1d"])
def test_retention_period_out_of_range_or_malformed(text: str) -> None:
    with pytest.raises(ChangeStreamError, match="retention_period"):
        parse_retention(text)


def test_options_validation() -> None:
    options = StreamOptions().with_changes(
        {"exclude_update": True, "value_capture_type": "NEW_ROW", "retention_period": "7d"}
    )
    assert options.exclude_update
    assert options.value_capture_type is ValueCaptureType.NEW_ROW
    assert options.retention_period == timedelta(days=7)
    assert StreamOptions.from_json(options.to_json()) == options
    with pytest.raises(ChangeStreamError, match="unknown change stream option 'exclude_upsert'"):
        StreamOptions().with_changes({"exclude_upsert": True})
    with pytest.raises(ChangeStreamError, match="OLD_AND_NEW_VALUES, NEW_ROW"):
        StreamOptions().with_changes({"value_capture_type": "OLD_VALUES"})
    with pytest.raises(ChangeStreamError, match="TRUE or FALSE"):
        StreamOptions().with_changes({"exclude_insert": "yes"})


def test_bucket_eventing_as_migrated(db: Metabase) -> None:
    with db.read() as conn:
        [stream] = [d for d in load_definitions(conn) if d.name == "bucket_eventing"]
        first = conn.execute(
            sa.select(change_streams.c.columns).where(
                change_streams.c.name == "bucket_eventing", change_streams.c.version == 1
            )
        ).scalar_one()
    assert first == ["status", "total_plain_size"]  # 0002, as DESIGN.md defines it
    # 0003 added stream_id, 0009 user_metadata, 0010 tags (and records tag changes), 0011
    # the ACL and the lock settings, 0012 expirations
    assert stream.columns == (
        "status",
        "total_plain_size",
        "stream_id",
        "user_metadata",
        "tags",
        "acl",
        "retention_mode",
        "retain_until",
        "legal_hold",
        "etag",
    )
    assert stream.version == 6
    assert stream.options == StreamOptions(
        exclude_ttl_deletes=False,  # since 0012: expirations are events
        exclude_update=False,
        allow_txn_exclusion=True,
        value_capture_type=ValueCaptureType.NEW_ROW_AND_OLD_VALUES,
    )


@pytest.mark.parametrize(
    ("name", "columns", "partitions", "message"),
    [
        ("keys", ["object_key"], 4, "part of the primary key"),
        ("missing", ["colour"], 4, "has no column 'colour'"),
        ("1bad", ["status"], 4, "must start with a letter"),
        ("zero", ["status"], 0, "partitions must be 1 to"),
        ("bucket_eventing", ["status"], 4, "already exists"),
    ],
)
def test_create_change_stream_refuses(
    db: Metabase, name: str, columns: list[str], partitions: int, message: str
) -> None:
    with pytest.raises(ChangeStreamError, match=message), db.write() as conn:
        create_change_stream(conn, name, objects, columns, partitions=partitions)
    with db.read() as conn:
        names = {d.name for d in load_definitions(conn)}
    assert names == {"bucket_eventing", "project_eventing"}  # nothing was created


def test_alter_refuses_unknown_stream_and_bad_options(db: Metabase) -> None:
    with pytest.raises(ChangeStreamError, match="does not exist"), db.write() as conn:
        alter_change_stream(conn, "nope", objects, options={"exclude_insert": True})
    with pytest.raises(ChangeStreamError, match="out of range"), db.write() as conn:
        alter_change_stream(conn, "bucket_eventing", objects, options={"retention_period": "40d"})
    with db.read() as conn:
        [stream] = [d for d in load_definitions(conn) if d.name == "bucket_eventing"]
    assert stream.version == 6


def test_later_migration_steps_change_the_records(fresh_url: str) -> None:
    """0002 creates bucket_eventing, 0003 adds stream_id, and a test-only step 9001 changes
    its options: the records written after each step follow it; earlier records keep the
    definition they were written under."""
    db = Metabase(fresh_url, eventing=lambda _project, bucket: bucket == "photos")
    try:
        upgrade(db, "0002")
        # today's code reads and writes columns later steps add (0010 objects.tags, 0011
        # the ACLs and lifecycle, 0014 part sizes, 0015 checksums): lend the 0002 schema those
        # columns while it writes, and take them back before upgrading
        lent = [
            ("objects", "tags"),
            ("objects", "acl"),
            ("objects", "part_sizes"),
            ("objects", "checksum"),
            ("buckets", "acl"),
            ("buckets", "lifecycle"),
        ]
        with db.engine.begin() as conn:
            for table, column in lent:
                conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column} JSON")
        project = create_project(db, "p")
        create_bucket(db, BucketLocation(project.id, "photos"))
        loc = ObjectLocation(project.id, "photos", "a.jpg")
        commit_inline_object(db, loc, b"1", etag="e1")
        with db.engine.begin() as conn:
            for table, column in lent:
                conn.exec_driver_sql(f"ALTER TABLE {table} DROP COLUMN {column}")
        [v1] = read_all(db)
        assert v1["mods"][0]["new_values"] == {"status": 3, "total_plain_size": 1}
        assert [c["name"] for c in v1["column_types"]][4:] == ["status", "total_plain_size"]

        upgrade(db)
        assert head_revision() == "0018"
        second = commit_inline_object(db, loc, b"22", etag="e2").object
        records = read_all(db)
        assert records[0] == v1  # unchanged by the migration
        insert = records[-1]
        assert insert["mods"][0]["new_values"] == {
            "status": 3,
            "total_plain_size": 2,
            "stream_id": str(second.stream_id),
            "user_metadata": None,
            "tags": None,
            "acl": None,
            "retention_mode": None,
            "retain_until": None,
            "legal_hold": False,
            "etag": "e2",
        }
        assert [c["name"] for c in insert["column_types"]][4:] == [
            "status",
            "total_plain_size",
            "stream_id",
            "user_metadata",
            "tags",
            "acl",
            "retention_mode",
            "retain_until",
            "legal_hold",
            "etag",
        ]
        assert records[-2]["mod_type"] == "DELETE"  # the overwrite's DELETE, with old values
        assert records[-2]["mods"][0]["old_values"]["total_plain_size"] == 1

        upgrade(db, extra_versions=[TEST_MIGRATIONS])
        before = len(read_all(db))
        third = commit_inline_object(db, loc, b"333", etag="e3").object
        delete_object(db, loc)
        after = read_all(db)[before:]
        assert [r["mod_type"] for r in after] == ["INSERT"]  # exclude_delete: no DELETEs
        assert after[0]["value_capture_type"] == "NEW_VALUES"
        assert after[0]["mods"][0]["new_values"]["stream_id"] == str(third.stream_id)
    finally:
        db.dispose()


def test_project_eventing_as_migrated(db: Metabase) -> None:
    """0013: the buckets table's own stream, one partition, every transaction recorded."""
    with db.read() as conn:
        [stream] = [d for d in load_definitions(conn) if d.name == "project_eventing"]
    assert (stream.table, stream.partitions, stream.version) == ("buckets", 1, 1)
    assert stream.columns == ("versioning", "object_lock_enabled", "created_at")
    assert stream.options == StreamOptions(exclude_update=True, allow_txn_exclusion=False)
