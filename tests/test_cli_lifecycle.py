"""`ripple lifecycle run` (CliRunner, SQLite and PostgreSQL): the summary line, --bucket,
--batch and --now, its refusals, a failing bucket skipped and counted, the object data it
frees; and `LifecycleSchedule`, the thread `ripple up` runs it on, which stops cleanly (and
warns when a run does not end in time)."""

from __future__ import annotations

import logging
import sys
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from ripple.cli import cli
from ripple.cli.lifecycle import LifecycleSchedule, free_data
from ripple.gateway.data import ObjectData
from ripple.metabase import LifecycleResult, Metabase, Status, put_bucket_lifecycle
from ripple.metabase.schema import buckets
from ripple.metabase.uploads import begin_upload
from tests.metabase.steps import World
from tests.waiting import wait_for

EXPIRE = {"Rules": [{"ID": "r1", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 1}}]}


@pytest.fixture
def world(db: Metabase) -> World:
    return World(db)


def env(db: Metabase, tmp_path: Path) -> dict[str, str]:
    return {
        "RIPPLE_DATABASE_URL": db.url.render_as_string(hide_password=False),
        "RIPPLE_DATA_DIR": str(tmp_path / "data"),
    }


def test_run_expires_and_summarises(
    runner: CliRunner, world: World, db: Metabase, tmp_path: Path
) -> None:
    first, second = world.bucket("first"), world.bucket("second")
    for bucket in (first, second):
        for key in ("a", "b", "c"):
            world.put(bucket, key)
        put_bucket_lifecycle(db, bucket, EXPIRE)
    result = runner.invoke(
        cli,
        ["lifecycle", "run", "--bucket", "second", "--batch", "2", "--now", "2026-01-02T00:00:00Z"],
        env=env(db, tmp_path),
    )
    assert result.exit_code == 0, result.output
    assert "expired 0 objects" in result.output  # not yet: created on day 0, Days=1
    result = runner.invoke(
        cli,
        ["lifecycle", "run", "--bucket", "second", "--batch", "2", "--now", "2026-01-03T00:00:00"],
        env=env(db, tmp_path),
    )
    assert result.exit_code == 0, result.output
    assert "expired 3 objects" in result.output
    assert "(2 transactions)" in result.output
    assert [r.bucket_name for r in world.rows()] == ["first"] * 3
    everything = runner.invoke(
        cli, ["lifecycle", "run", "--now", "2030-01-01T00:00:00+02:00"], env=env(db, tmp_path)
    )
    assert everything.exit_code == 0, everything.output
    assert "expired 3 objects" in everything.output
    assert world.rows() == []


def test_run_refusals(runner: CliRunner, db: Metabase, tmp_path: Path) -> None:
    missing = runner.invoke(cli, ["lifecycle", "run", "--bucket", "nope"], env=env(db, tmp_path))
    assert missing.exit_code != 0
    assert "no bucket named 'nope'" in missing.output
    bad_time = runner.invoke(cli, ["lifecycle", "run", "--now", "soon"], env=env(db, tmp_path))
    assert bad_time.exit_code != 0
    assert "not an ISO 8601 time" in bad_time.output
    bad_batch = runner.invoke(cli, ["lifecycle", "run", "--batch", "0"], env=env(db, tmp_path))
    assert bad_batch.exit_code != 0


def test_free_data_removes_versions_and_parts(world: World, db: Metabase, tmp_path: Path) -> None:
    data = ObjectData(tmp_path / "objects")
    bucket = world.bucket()
    obj = world.put(bucket, "a")
    upload = begin_upload(db, world.loc(bucket, "b"))
    stored = data.path_of(obj.stream_id)
    stored.parent.mkdir(parents=True)
    stored.write_bytes(b"x")
    part = data.part_path(upload.stream_id, 1)
    part.parent.mkdir(parents=True)
    part.write_bytes(b"y")
    free_data(data)([obj, upload])
    assert not stored.exists()
    assert not part.parent.exists()
    assert upload.status is Status.PENDING


def test_schedule_runs_and_stops(world: World, db: Metabase) -> None:
    bucket = world.bucket()
    world.put(bucket, "a")
    put_bucket_lifecycle(db, bucket, EXPIRE)
    world.tick(timedelta(days=3))
    freed: list[Any] = []
    schedule = LifecycleSchedule(db, 3600, removed=freed.extend)
    schedule.start()
    try:
        wait_for(lambda: schedule.runs >= 1, "the first scheduled lifecycle run", timeout=30)
        assert world.rows() == []
        assert [r.object_key for r in freed] == ["a"]
    finally:
        schedule.stop(timeout=10)
    assert schedule._thread is not None
    assert not schedule._thread.is_alive()  # stopped while waiting for the next run


def test_run_skips_a_failing_bucket(
    runner: CliRunner, world: World, db: Metabase, tmp_path: Path
) -> None:
    for name in ("broken", "fine"):
        bucket = world.bucket(name)
        world.put(bucket, "a")
        put_bucket_lifecycle(db, bucket, EXPIRE)
    with db.write() as conn:  # a stored configuration that no longer reads
        conn.execute(
            sa.update(buckets).where(buckets.c.name == "broken").values(lifecycle=[{"ID": "x"}])
        )
    result = runner.invoke(
        cli, ["lifecycle", "run", "--now", "2026-02-01T00:00:00Z"], env=env(db, tmp_path)
    )
    assert result.exit_code == 0, result.output
    assert "expired 1 objects" in result.output
    assert "(1 transactions); 1 buckets failed (see the warnings)" in result.output
    assert [r.bucket_name for r in world.rows()] == ["broken"]


def test_schedule_stop_warns_when_a_run_does_not_end(
    db: Metabase, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    entered, release = threading.Event(), threading.Event()

    def stuck(*args: Any, **kwargs: Any) -> LifecycleResult:
        entered.set()
        release.wait(30)  # a statement that takes long: `cancelled` is not asked meanwhile
        return LifecycleResult()

    # the module, not the `lifecycle` click group `ripple.cli` exports under its name
    monkeypatch.setattr(sys.modules["ripple.cli.lifecycle"], "run_lifecycle", stuck)
    schedule = LifecycleSchedule(db, 3600)
    schedule.start()
    assert entered.wait(30)
    with caplog.at_level(logging.WARNING, logger="ripple.lifecycle"):
        schedule.stop(timeout=0.05)
    assert "did not stop within 0.05 s" in caplog.text
    release.set()
    assert schedule._thread is not None
    schedule._thread.join(30)
    assert not schedule._thread.is_alive()
    assert schedule.runs == 1
