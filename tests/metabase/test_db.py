"""The metabase handle: URLs, connection settings, transactions."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from ripple.metabase import Metabase
from ripple.metabase.db import normalize_url
from ripple.metabase.schema import projects
from tests.waiting import wait_for


@pytest.mark.parametrize(
    ("url", "driver"),
    [
        ("postgresql://u@h/d", "postgresql+psycopg"),
        ("postgres://u@h/d", "postgresql+psycopg"),
        ("postgresql+psycopg://u@h/d", "postgresql+psycopg"),
        ("sqlite:///x.db", "sqlite"),
    ],
)
def test_normalize_url(url: str, driver: str) -> None:
    assert normalize_url(url).drivername == driver


@pytest.mark.parametrize("url", ["mysql://u@h/d", "not a url", ""])
def test_normalize_url_refuses(url: str) -> None:
    with pytest.raises(ValueError, match=r"database|URL"):
        normalize_url(url)


def test_connection_settings(db: Metabase) -> None:
    """SQLite runs in WAL mode with foreign keys, and fsyncs every commit (an acknowledged
    write survives a power loss); PostgreSQL plans every statement with its
    real parameters (a generic plan made bulk deletes 20x slower once prepared)."""
    with db.read() as conn:
        if db.dialect == "sqlite":
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
        else:
            assert conn.exec_driver_sql("SHOW plan_cache_mode").scalar() == "force_custom_plan"


def insert_project_then_fail(db: Metabase, project_id: uuid.UUID) -> None:
    with db.write() as conn:
        conn.execute(
            sa.insert(projects).values(
                id=project_id, public_id=uuid.uuid4(), name="p", created_at=db.now()
            )
        )
        raise RuntimeError("boom")


def test_write_rolls_back_on_error(db: Metabase) -> None:
    project_id = uuid.uuid4()
    with pytest.raises(RuntimeError, match="boom"):
        insert_project_then_fail(db, project_id)
    with db.read() as conn:
        assert conn.execute(sa.select(projects).where(projects.c.id == project_id)).first() is None


def test_kept_connections_the_server_closed_are_replaced(postgres_db: Metabase) -> None:
    """A PostgreSQL restart, or an administrator's `pg_terminate_backend`, closes every kept
    connection: the next transactions get fresh ones instead of an error, and no
    transaction pays a round trip before its first statement to learn that."""
    db = postgres_db
    held = [db.engine.connect() for _ in range(3)]  # three kept connections, then idle
    pids = [conn.exec_driver_sql("SELECT pg_backend_pid()").scalar() for conn in held]
    for conn in held:
        conn.close()
    other = sa.create_engine(db.url)
    try:
        with other.connect() as admin:
            for pid in pids:
                admin.exec_driver_sql(f"SELECT pg_terminate_backend({int(pid)})")

            def gone() -> bool:  # the backends end after the signal, not with it
                admin.rollback()  # a new transaction: a new snapshot of the activity
                query = "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%(pids)s)"
                return admin.exec_driver_sql(query, {"pids": pids}).scalar() == 0

            wait_for(gone, what="the terminated backends to exit")
    finally:
        other.dispose()
    for _ in pids:  # each checkout meets one of the closed connections first
        with db.read() as conn:
            assert conn.exec_driver_sql("SELECT 1").scalar() == 1
    project_id = uuid.uuid4()
    with db.write() as conn:
        conn.execute(
            sa.insert(projects).values(
                id=project_id, public_id=uuid.uuid4(), name="p", created_at=db.now()
            )
        )
