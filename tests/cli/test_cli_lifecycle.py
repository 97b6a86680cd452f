"""`ripple lifecycle run` (CliRunner, SQLite and PostgreSQL): the summary line, --bucket,
--batch and --now, its refusals, a failing bucket skipped and counted, a stored rule that no
longer reads (exit status 0, the other buckets applied, the metric counted), the object data
it frees; and `LifecycleSchedule`, the thread `ripple up` runs it on, which survives such a
rule, stops cleanly (and warns when a run does not end in time)."""

from __future__ import annotations

import logging
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from prometheus_client import REGISTRY, generate_latest

from ripple.cli import cli
from ripple.cli.lifecycle import RULE_FAILURES, LifecycleSchedule, free_data
from ripple.gateway.data import ObjectData
from ripple.metabase import LifecycleResult, Metabase, Status, put_bucket_lifecycle
from ripple.metabase.schema import buckets
from ripple.metabase.uploads import begin_upload
from tests.cli.helpers import scrape
from tests.metabase.steps import World
from tests.ripple_process import RippleProcess, table_rows
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
    assert "(1 transactions); 1 rule failed in 1 bucket: see the warnings in the log" in (
        result.output
    )
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


HUGE_DAYS = [{"ID": "huge", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 999999999}}]


def failures(reason: str) -> float:
    """`ripple_lifecycle_rule_failures_total{reason}` as the default registry holds it."""
    value = REGISTRY.get_sample_value("ripple_lifecycle_rule_failures_total", {"reason": reason})
    return value or 0.0


def broken_and_fine(world: World, db: Metabase) -> None:
    """Bucket `broken` with a rule an earlier ripple stored (`Days` 999999999, past any
    date), bucket `fine` with one that expires its object."""
    for name in ("broken", "fine"):
        bucket = world.bucket(name)
        world.put(bucket, "a")
        put_bucket_lifecycle(db, bucket, EXPIRE)
    with db.write() as conn:
        conn.execute(
            sa.update(buckets).where(buckets.c.name == "broken").values(lifecycle=HUGE_DAYS)
        )


def test_run_exits_0_with_a_broken_rule(
    runner: CliRunner,
    world: World,
    db: Metabase,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken_and_fine(world, db)
    before = failures("invalid")
    with caplog.at_level(logging.WARNING, logger="ripple.lifecycle"):
        result = runner.invoke(
            cli, ["lifecycle", "run", "--now", "2026-02-01T00:00:00Z"], env=env(db, tmp_path)
        )
    assert result.exit_code == 0, result.output
    assert result.exception is None
    assert "expired 1 objects" in result.output
    assert "; 1 rule failed in 1 bucket: see the warnings in the log" in result.output
    assert [r.bucket_name for r in world.rows()] == ["broken"]
    assert failures("invalid") == before + 1
    (record,) = caplog.records
    assert record.getMessage().startswith(
        f"lifecycle: project {world.project.id}, bucket 'broken': rule 'huge' skipped: "
        "today's checks refuse it: 'Days' for Expiration action must be at most 1000000"
    )
    assert record.exc_info is None


def test_run_refuses_a_now_past_year_9999(runner: CliRunner, db: Metabase, tmp_path: Path) -> None:
    for late in ("9999-12-31T23:00:00-05:00", "0001-01-01T00:00:00+01:00"):
        result = runner.invoke(cli, ["lifecycle", "run", "--now", late], env=env(db, tmp_path))
        assert result.exit_code == 2, result.output
        assert isinstance(result.exception, SystemExit)  # a usage error, not a traceback
        assert "from year 1 to 9999" in result.output


def test_schedule_survives_a_broken_rule(
    world: World, db: Metabase, caplog: pytest.LogCaptureFixture
) -> None:
    broken_and_fine(world, db)
    world.tick(timedelta(days=3))
    before = failures("invalid")
    schedule = LifecycleSchedule(db, 3600)
    with caplog.at_level(logging.INFO, logger="ripple.lifecycle"):
        schedule.start()
        try:
            wait_for(lambda: schedule.runs >= 1, "the first scheduled lifecycle run", timeout=30)
        finally:
            schedule.stop(timeout=10)
    assert [r.bucket_name for r in world.rows()] == ["broken"]  # the other bucket applied
    assert failures("invalid") == before + 1
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.WARNING]
    skipped, summary = (r.getMessage() for r in caplog.records)
    assert "bucket 'broken': rule 'huge' skipped" in skipped
    assert summary.startswith("lifecycle: expired 1 objects")
    assert summary.endswith("; 1 rule failed in 1 bucket: see the warnings in the log")
    assert "Traceback" not in caplog.text  # not "lifecycle run failed" with its exception


def test_rule_failures_are_exposed_per_reason_only() -> None:
    """Every reason's series exists from the start (at 0 until a failure), none per bucket;
    `ripple up` serves the default registry on metrics.address."""
    exposed = generate_latest(REGISTRY).decode()
    for reason in ("invalid", "bucket_deleted", "error"):
        assert f'ripple_lifecycle_rule_failures_total{{reason="{reason}"}}' in exposed
    assert RULE_FAILURES._labelnames == ("reason",)


def test_up_applies_the_lifecycle_past_a_broken_rule(
    world: World, db: Metabase, tmp_path: Path
) -> None:
    """`ripple up` itself (with Spark): its schedule's first run skips the broken rule,
    applies the other bucket's, counts the failure on the metrics endpoint it serves, and
    `up` runs on and stops with status 0."""
    world.now = datetime(2020, 1, 1, tzinfo=UTC)  # long before the real clock: due now
    broken_and_fine(world, db)
    with RippleProcess(
        tmp_path,
        "up",
        **env(db, tmp_path),
        RIPPLE_METRICS_ADDRESS="127.0.0.1:0",
        RIPPLE_S3_ADDRESS="127.0.0.1:0",
    ) as up:
        up.wait_for_output("pipeline running")
        metrics = table_rows(up.stdout)["metrics"]
        wait_for(
            lambda: scrape(metrics).get('ripple_lifecycle_rule_failures_total{reason="invalid"}'),
            "the broken rule counted on the metrics endpoint",
        )
        wait_for(lambda: [r.bucket_name for r in world.rows()] == ["broken"], "the fine bucket")
        samples = scrape(metrics)
        # what the lifecycle run logged; Spark's own shutdown below may log a Python
        # worker's broken pipe, which is not the lifecycle's to answer for
        while_running = up.stderr
        assert up.interrupt() == 0, up.stderr[-3000:]
    assert samples['ripple_lifecycle_rule_failures_total{reason="invalid"}'] == 1
    assert samples['ripple_lifecycle_rule_failures_total{reason="error"}'] == 0
    assert "bucket 'broken': rule 'huge' skipped: today's checks refuse it" in up.stderr
    assert "1 rule failed in 1 bucket" in up.stderr
    assert "Traceback" not in while_running
