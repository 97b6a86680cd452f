"""Migrations: the migrated schema is exactly `schema.metadata`, and upgrading again is a
no-op that keeps the data."""

from __future__ import annotations

import orjson
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from ripple.metabase import (
    BucketLocation,
    Metabase,
    ObjectLocation,
    create_bucket,
    create_project,
    get_object,
    list_projects,
)
from ripple.metabase.migrate import (
    _config,
    all_metadata,
    current_revision,
    head_revision,
    upgrade,
)
from tests.metabase.objects import commit_inline_object


def _schema_diff(db: Metabase) -> list[object]:
    with db.read() as conn:
        # Server defaults are compared on PostgreSQL only: Alembic's SQLite comparison
        # reports DEFAULT '' as changed even when the DDL says exactly that.
        opts = {"compare_type": True, "compare_server_default": db.dialect == "postgresql"}
        context = MigrationContext.configure(conn, opts=opts)
        return list(compare_metadata(context, all_metadata()))


def test_schema_matches_metadata(db: Metabase) -> None:
    assert _schema_diff(db) == []


def test_every_table_is_created(db: Metabase) -> None:
    with db.read() as conn:
        names = set(sa.inspect(conn).get_table_names())
    assert names == {
        "projects",
        "buckets",
        "objects",
        "change_streams",
        "change_partitions",
        "change_records",
        "change_offsets",
        "delivery_retries",
        "dead_letters",
        "subscriptions",
        "subscription_events",
        "access_keys",
        "topics",
        "bucket_notifications",
        "bucket_journals",
        "eventing_changes",
        "rate_limits",
        "client_tokens",
        "alembic_version",
    }


def test_current_revision_is_head(db: Metabase) -> None:
    head = head_revision()
    assert head is not None
    assert current_revision(db) == head


def test_upgrade_is_idempotent(db: Metabase) -> None:
    project = create_project(db, "kept")
    upgrade(db)
    upgrade(db)
    assert current_revision(db) == head_revision()
    assert list_projects(db) == [project]
    assert _schema_diff(db) == []


def test_fresh_sqlite_database(tmp_path) -> None:
    fresh = Metabase(f"sqlite:///{tmp_path / 'nested' / 'fresh.db'}")
    try:
        assert current_revision(fresh) is None
        upgrade(fresh)
        assert current_revision(fresh) == head_revision()
        assert _schema_diff(fresh) == []
    finally:
        fresh.dispose()


def test_comparison_sees_a_missing_column(db: Metabase) -> None:
    """The check above is not vacuous: a column the database lacks is reported."""
    changed = all_metadata()
    changed.tables["objects"].append_column(sa.Column("extra", sa.Integer, nullable=True))
    with db.read() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), changed)
    assert [(d[0], d[2], d[3].name) for d in diff] == [("add_column", "objects", "extra")]


def test_the_issue_9_steps_go_down_and_up_again_with_data(fresh_url: str) -> None:
    """0015, 0014, 0013, 0012 and 0011 downgrade a metabase that holds buckets and objects
    (on SQLite too, whose foreign keys refuse rebuilding a table another one refers to) and
    upgrade again, keeping the data."""
    db = Metabase(fresh_url)
    try:
        upgrade(db)
        project = create_project(db, "p")
        loc = ObjectLocation(project.id, "photos", "a.jpg")
        create_bucket(db, BucketLocation(project.id, "photos"))
        commit_inline_object(db, loc, b"hello", etag="e")
        config = _config()
        with db.write() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, "0010")
        assert current_revision(db) == "0010"
        with db.read() as conn:
            columns = {c["name"] for c in sa.inspect(conn).get_columns("buckets")}
        assert "lifecycle" not in columns
        upgrade(db)
        assert current_revision(db) == head_revision()
        assert _schema_diff(db) == []
        assert get_object(db, loc).etag == "e"
    finally:
        db.dispose()


def test_0017_fills_in_the_object_and_sequencer_of_queued_and_dead_events(
    fresh_url: str,
) -> None:
    """Events queued or dead before per-key ordering get their object (bucket, decoded key)
    and sequencer from the event, a page at a time; an event of no object gets neither."""
    db = Metabase(fresh_url)
    try:
        upgrade(db)
        config = _config()
        with db.write() as conn:
            config.attributes["connection"] = conn
            command.downgrade(config, "0016")

        def record(key: str, sequencer: str) -> str:
            obj = {"key": key, "sequencer": sequencer}
            return orjson.dumps({"s3": {"bucket": {"name": "photos"}, "object": obj}}).decode()

        events = [record("a+b.jpg", "0A"), record("c", "0B"), '{"Event": "s3:TestEvent"}']
        common = {"destination": "hook", "attempts": 1, "first_failed_ns": 1}
        with db.write() as conn:
            for table, extra in (
                ("delivery_retries", {"next_attempt_ns": 1, "last_error": "x"}),
                ("dead_letters", {"dead_at_ns": 1, "reason": "x"}),
            ):
                conn.execute(
                    sa.table(
                        table, *(sa.column(n) for n in ["event_id", "event", *common, *extra])
                    ).insert(),
                    [
                        {"event_id": f"e{i}", "event": e, **common, **extra}
                        for i, e in enumerate(events)
                    ],
                )
        updates: list[str] = []

        def count(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
            if statement.lstrip().startswith("UPDATE") and "alembic_version" not in statement:
                updates.append(statement)

        sa.event.listen(db.engine, "before_cursor_execute", count)
        try:
            upgrade(db)
        finally:
            sa.event.remove(db.engine, "before_cursor_execute", count)
        assert len(updates) == 2  # one executemany a page of each table, not one a row
        assert _schema_diff(db) == []
        with db.read() as conn:
            for table in ("delivery_retries", "dead_letters"):
                rows = conn.execute(
                    sa.text(f"SELECT object_path, sequencer FROM {table} ORDER BY id")
                ).all()
                assert [tuple(r) for r in rows] == [
                    ("photos/a b.jpg", "0A"),
                    ("photos/c", "0B"),
                    (None, None),
                ]
    finally:
        db.dispose()
