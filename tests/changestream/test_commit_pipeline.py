"""The records' INSERT and the COMMIT in one libpq pipeline (PostgreSQL): rows committed,
errors raised as psycopg's with their SQLSTATE, and the prepared statement surviving
psycopg's DEALLOCATE ALL (which it sends when it rolls a transaction back)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from ripple.changestream import commit_pipeline
from ripple.changestream.schema import change_records
from ripple.metabase import (
    BucketLocation,
    Metabase,
    ObjectLocation,
    create_bucket,
    create_project,
)
from tests.metabase.objects import commit_inline_object

pytestmark = pytest.mark.postgresql


@pytest.fixture
def dsn(postgres_url: str) -> str:
    """The test database's URL as libpq takes it (no SQLAlchemy driver name)."""
    url = sa.make_url(postgres_url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(dsn) as conn:
        yield conn


@pytest.fixture
def table(conn: psycopg.Connection[Any], dsn: str) -> Iterator[str]:
    name = f"pipeline_probe_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(
            f"CREATE TABLE {name} (id integer PRIMARY KEY, note text, flag boolean, n bigint)"
        )
        yield name
        if not conn.closed:
            conn.rollback()  # its locks would hold the DROP up
        admin.execute(f"DROP TABLE {name}")


def insert(table: str) -> str:
    return f"INSERT INTO {table} (id, note, flag, n) VALUES (%s::integer, %s, %s::boolean, %s)"


def rows_of(conn: psycopg.Connection[Any], table: str) -> list[tuple[Any, ...]]:
    return conn.execute(f"SELECT id, note, flag, n FROM {table} ORDER BY id").fetchall()


def ours(conn: psycopg.Connection[Any]) -> list[str]:
    """This connection's prepared statements of commit_pipeline."""
    names = conn.execute(
        "SELECT name FROM pg_prepared_statements WHERE name LIKE 'ripple_record_%'"
    ).fetchall()
    conn.rollback()
    return [n for (n,) in names]


def test_this_psycopg_takes_the_libpq_path(conn: psycopg.Connection[Any]) -> None:
    assert commit_pipeline.available(conn), (
        "psycopg keeps its prepared statements (Connection._prepared._names, an OrderedDict) "
        "or its connection lock (Connection.lock) elsewhere now: eventing commits fall back "
        "to psycopg's slower public pipeline"
    )


def test_rows_and_commit_in_one_pipeline(conn: psycopg.Connection[Any], table: str) -> None:
    rows = [(1, "a 'quoted' note", True, 2**40), (2, "ünï", False, None), (3, "", True, -1)]
    conn.execute("SELECT 1")  # the caller's transaction is open
    commit_pipeline.insert_and_commit(conn, insert(table), rows)
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE  # committed
    with psycopg.connect(conn.info.dsn) as other:  # visible to another session
        assert rows_of(other, table) == rows
    commit_pipeline.insert_and_commit(conn, insert(table), [(4, "b", False, 0)])
    assert len(rows_of(conn, table)) == 4
    assert len(ours(conn)) == 1  # prepared once


def test_a_failed_insert_raises_its_sqlstate_and_commits_nothing(
    conn: psycopg.Connection[Any], table: str
) -> None:
    commit_pipeline.insert_and_commit(conn, insert(table), [(1, "first", True, 1)])
    conn.execute(f"INSERT INTO {table} (id) VALUES (10)")
    with pytest.raises(psycopg.errors.UniqueViolation):
        commit_pipeline.insert_and_commit(
            conn, insert(table), [(2, "x", True, 1), (1, "y", True, 1)]
        )
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
    conn.rollback()
    assert [r[0] for r in rows_of(conn, table)] == [1]  # neither 2 nor 10 was committed
    commit_pipeline.insert_and_commit(conn, insert(table), [(2, "again", False, 2)])
    assert [r[0] for r in rows_of(conn, table)] == [1, 2]


def remembered(conn: psycopg.Connection[Any], statement: str) -> bool:
    """Whether psycopg's table of prepared statements holds `statement` (commit_pipeline
    enters it there)."""
    names = conn._prepared._names
    return any(query == commit_pipeline._numbered(statement) for query, _ in names)


def test_a_failed_prepare_is_not_remembered(conn: psycopg.Connection[Any]) -> None:
    missing = f"INSERT INTO no_such_table_{uuid.uuid4().hex[:8]} (id) VALUES (%s::integer)"
    with pytest.raises(psycopg.errors.UndefinedTable):
        commit_pipeline.insert_and_commit(conn, missing, [(1,)])
    assert not remembered(conn, missing)
    conn.rollback()
    assert ours(conn) == []


def test_an_insert_failing_where_it_was_prepared_keeps_the_statement(
    conn: psycopg.Connection[Any], table: str
) -> None:
    conn.execute(f"INSERT INTO {table} (id) VALUES (1)")
    with pytest.raises(psycopg.errors.UniqueViolation):
        commit_pipeline.insert_and_commit(conn, insert(table), [(1, "twice", True, 1)])
    assert remembered(conn, insert(table))  # prepared, though its first run failed
    conn.pgconn.exec_(b"ROLLBACK")  # behind psycopg's back, which would deallocate it
    assert len(ours(conn)) == 1  # ... and prepared on the server


def test_the_statement_survives_psycopgs_deallocate_all(
    conn: psycopg.Connection[Any], table: str
) -> None:
    commit_pipeline.insert_and_commit(conn, insert(table), [(1, "before", True, 1)])
    for _ in range(6):  # psycopg prepares a statement of its own after 5 executions
        conn.execute("SELECT %s::integer", (1,))
    conn.rollback()  # ... so this rollback makes it send DEALLOCATE ALL
    assert ours(conn) == []
    commit_pipeline.insert_and_commit(conn, insert(table), [(2, "after", True, 2)])
    assert [r[0] for r in rows_of(conn, table)] == [1, 2]
    assert len(ours(conn)) == 1


def test_a_deallocate_behind_psycopgs_back_fails_one_commit_only(
    conn: psycopg.Connection[Any], table: str
) -> None:
    commit_pipeline.insert_and_commit(conn, insert(table), [(1, "before", True, 1)])
    conn.pgconn.exec_(b"DEALLOCATE ALL")  # psycopg does not see this one
    with pytest.raises(psycopg.errors.InvalidSqlStatementName):
        commit_pipeline.insert_and_commit(conn, insert(table), [(2, "lost", True, 2)])
    conn.rollback()
    commit_pipeline.insert_and_commit(conn, insert(table), [(3, "after", True, 3)])
    assert [r[0] for r in rows_of(conn, table)] == [1, 3]


@pytest.mark.parametrize(
    ("value", "error"), [(1.5, TypeError), ("a\x00b", ValueError)], ids=["float", "nul"]
)
def test_a_value_it_cannot_send_sends_nothing(
    conn: psycopg.Connection[Any], table: str, value: Any, error: type[Exception]
) -> None:
    conn.execute(f"INSERT INTO {table} (id) VALUES (10)")
    with pytest.raises(error):
        commit_pipeline.insert_and_commit(
            conn, insert(table), [(1, "x", True, 1), (2, value, True, 1)]
        )
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS  # not committed
    conn.rollback()
    assert rows_of(conn, table) == []


def test_not_available_without_prepared_statements_or_in_autocommit(dsn: str) -> None:
    with psycopg.connect(dsn, prepare_threshold=None) as conn:
        assert not commit_pipeline.available(conn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert not commit_pipeline.available(conn)


def roll_back_a_write(db: Metabase) -> None:
    with db.write() as conn:
        conn.execute(sa.select(sa.literal(1)))  # the transaction begins
        raise RuntimeError("rolled back")


def test_eventing_commits_after_a_rolled_back_write_on_the_same_connection(
    postgres_db: Metabase, postgres_url: str
) -> None:
    """Through the metabase: its rollbacks make psycopg deallocate the connection's
    statements, and the next eventing commit still writes its record."""
    db = Metabase(postgres_url, eventing=lambda _p, _b: True)  # a pool of its own
    try:
        project = create_project(db, "pipeline")
        bucket = create_bucket(db, BucketLocation(project.id, f"b-{uuid.uuid4().hex[:8]}"))
        put = lambda key: commit_inline_object(  # noqa: E731
            db, ObjectLocation(project.id, bucket.name, key), b"x", etag="e" * 32
        )
        for i in range(6):
            put(f"before-{i}")
        with pytest.raises(RuntimeError):
            roll_back_a_write(db)
        with db.read() as conn:
            prepared = conn.exec_driver_sql(
                "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'ripple_record_%%'"
            ).scalar_one()
        assert db.engine.pool.checkedin() == 1  # one connection did all of it
        assert prepared == 0  # the rollback deallocated the record statement
        put("after")
        with db.read() as conn:
            mods = (
                conn.execute(
                    sa.select(change_records.c.mods).where(
                        change_records.c.stream_name == "bucket_eventing"
                    )
                )
                .scalars()
                .all()
            )
        assert sum('"after"' in m for m in mods) == 1
        assert len(mods) == 7
    finally:
        db.dispose()


def test_without_the_libpq_path_psycopgs_pipeline_records(
    postgres_db: Metabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where psycopg's internals differ (`available` false), the records still go out, and
    through psycopg's own pipeline: its prepared statement, not ours."""
    monkeypatch.setattr(commit_pipeline, "available", lambda _driver: False)
    monkeypatch.setattr(commit_pipeline, "insert_and_commit", None)  # not to be called
    postgres_db.eventing = lambda _p, _b: True
    project = create_project(postgres_db, "fallback")
    bucket = create_bucket(postgres_db, BucketLocation(project.id, "fallback"))
    commit_inline_object(
        postgres_db, ObjectLocation(project.id, bucket.name, "k"), b"x", etag="e" * 32
    )
    with postgres_db.read() as conn:
        records = conn.execute(
            sa.select(sa.func.count()).where(change_records.c.stream_name == "bucket_eventing")
        ).scalar_one()
    assert records == 1


def test_eventing_commits_plan_the_record_statement_once(
    postgres_db: Metabase, postgres_url: str
) -> None:
    """The metabase's connections plan every statement with its parameters
    (`force_custom_plan`); the records' statement alone runs on its generic plan, made once,
    since planning it anew cost the server more than running it."""
    db = Metabase(postgres_url, eventing=lambda _p, _b: True)  # a pool of its own
    try:
        project = create_project(db, "plans")
        bucket = create_bucket(db, BucketLocation(project.id, f"b-{uuid.uuid4().hex[:8]}"))
        for i in range(8):
            commit_inline_object(
                db, ObjectLocation(project.id, bucket.name, f"k-{i}"), b"x", etag="e" * 32
            )
        with db.read() as conn:
            assert conn.exec_driver_sql("SHOW plan_cache_mode").scalar_one() == (
                "force_custom_plan"  # the rest of the metabase is planned per run, as before
            )
            plans = conn.exec_driver_sql(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE name LIKE 'ripple_record_%%'"
            ).one()
        assert db.engine.pool.checkedin() == 1  # one connection made every commit
        generic, custom = plans
        assert custom == 0
        assert generic == 9  # the bucket's record (project_eventing) and the 8 objects'

    finally:
        db.dispose()
