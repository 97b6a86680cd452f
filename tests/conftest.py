"""Shared fixtures: a metabase on SQLite and on PostgreSQL for every test that asks for `db`.

Each test run creates its own PostgreSQL database (dropped at the end), so runs never see
each other's data; tables are emptied between tests. PostgreSQL comes from
RIPPLE_TEST_POSTGRES_URL (default: the local server, user postgres). Without a server the
PostgreSQL cases skip, except under CI (the `CI` variable set), where they fail.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from ripple.changestream.schema import change_offsets, change_partitions, change_records
from ripple.config import ENVIRONMENT_VARIABLES
from ripple.identity.schema import access_keys
from ripple.metabase import Metabase
from ripple.metabase.migrate import upgrade
from ripple.metabase.schema import buckets, client_tokens, objects, projects, rate_limits
from ripple.notifications.schema import (
    bucket_journals,
    bucket_notifications,
    eventing_changes,
    topics,
)
from ripple.pipeline.schema import dead_letters, delivery_retries
from ripple.subscriptions.schema import subscription_events, subscriptions
from ripple.targets.guard import default_guard, set_default_guard

ADMIN_URL = os.environ.get(
    "RIPPLE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def service_missing(what: str, reason: str) -> None:
    """Skip a test whose service is absent, or fail it when CI says services are present."""
    message = f"{what} is not reachable: {reason}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI is set, so this fails instead of skipping)")
    pytest.skip(message)


@contextmanager
def fresh_postgres_database(admin_url: str, prefix: str) -> Iterator[str]:
    """A new, empty database on the server of `admin_url`, dropped afterwards; its URL."""
    admin = sa.make_url(admin_url)
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    conninfo = admin.set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        conn = psycopg.connect(conninfo, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as e:
        service_missing("PostgreSQL", str(e).strip())
    with conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    with fresh_postgres_database(ADMIN_URL, "ripple_test") as url:
        yield url


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('metabase') / 'metabase.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database of its own, not migrated (tests that run migration steps)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    with fresh_postgres_database(ADMIN_URL, "ripple_fresh") as url:
        yield url


_migrated: dict[str, Metabase] = {}


def _metabase(url: str) -> Metabase:
    if url not in _migrated:
        db = Metabase(url)
        upgrade(db)
        _migrated[url] = db
    return _migrated[url]


def _empty(metabase: Metabase) -> Metabase:
    with metabase.write() as conn:
        for table in (
            objects,
            buckets,
            access_keys,
            bucket_notifications,
            bucket_journals,
            topics,
            eventing_changes,
            projects,
            change_records,
            change_offsets,
            delivery_retries,
            dead_letters,
            subscription_events,
            subscriptions,
            rate_limits,
            client_tokens,
        ):
            conn.execute(sa.delete(table))
        conn.execute(
            sa.update(change_partitions).values(
                next_position=0, last_commit_ns=0, last_transaction=None
            )
        )
    metabase.clock = lambda: datetime.now(UTC)
    metabase.eventing = lambda _project, _bucket: False
    metabase.changestreams.reload()
    return metabase


@pytest.fixture(
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)],
)
def db(request: pytest.FixtureRequest) -> Metabase:
    """An empty, migrated metabase; its clock can be set by the test."""
    url_fixture = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    return _empty(_metabase(request.getfixturevalue(url_fixture)))


@pytest.fixture
def postgres_db(postgres_url: str) -> Metabase:
    """`db` on PostgreSQL only, for tests of its concurrency control."""
    return _empty(_metabase(postgres_url))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for metabase in _migrated.values():
        metabase.dispose()


@pytest.fixture(autouse=True)
def _restore_destination_guard() -> Iterator[None]:
    """The process-wide destination guard as it was: a command run in this process (the
    `ripple` group installs the configured one), or a test, may replace it."""
    previous = default_guard()
    yield
    set_default_guard(previous)


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """The `ripple` command in this process, in an empty working directory, with no
    RIPPLE_* variables from the environment."""
    monkeypatch.chdir(tmp_path)
    for name in ENVIRONMENT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return CliRunner()
