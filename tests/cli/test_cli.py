"""The `ripple` command: help, `ripple up` on SQLite and PostgreSQL (the installed command,
run as a user would), configuration and connection errors, `ripple db status`."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from ripple.cli import cli
from ripple.config import MAX_AUTOMATIC_WORKERS, usable_cores
from ripple.metabase import BucketLocation, Metabase, create_bucket, create_project
from ripple.metabase.migrate import head_revision
from ripple.notifications.journal import JournalStore
from tests.certificates import authority, issue, serial_of, served_serial
from tests.cli.helpers import scrape
from tests.conftest import fresh_postgres_database
from tests.ripple_process import RIPPLE, RippleProcess, environment, table_rows
from tests.waiting import wait_for


def run_ripple(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The installed `ripple` command, with no RIPPLE_* variables but those given."""
    return subprocess.run(
        [str(RIPPLE), *args],
        cwd=cwd,
        env=environment(**env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_installed_command_exists() -> None:
    assert RIPPLE.is_file(), f"ripple is not installed next to {sys.executable}"


# --- help -----------------------------------------------------------------------------


def test_help(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["--help"])
    assert result.exit_code == 0, result.output
    assert "S3-compatible bucket event notifications" in result.output
    assert "ripple up" in result.output
    assert "RIPPLE_DATABASE_URL" in result.output
    for command in ("up", "db", "--config", "--version"):
        assert command in result.output


def test_up_help(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["up", "--help"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "Run ripple's main job on the embedded defaults, until Ctrl-C." in text
    assert "migrates the metabase to the newest schema" in text
    assert "migrations that already ran are skipped" in text
    assert "runs the eventing pipeline" in text
    assert "until Ctrl-C" in text


def test_db_help(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["db", "--help"])
    assert result.exit_code == 0, result.output
    assert "upgrade" in result.output
    assert "status" in result.output


def test_version(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert "0.1.0" in result.output


def test_installed_help() -> None:
    result = subprocess.run(
        [str(RIPPLE), "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "Usage: ripple" in result.stdout


# --- ripple up ------------------------------------------------------------------------


def test_up_on_sqlite_migrates_runs_the_pipeline_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    data = tmp_path / "data"
    upgraded = run_ripple(tmp_path, "db", "upgrade", RIPPLE_DATA_DIR=str(data))
    assert upgraded.returncode == 0, upgraded.stderr
    db = Metabase(f"sqlite:///{data / 'metabase.db'}")
    try:
        one = create_project(db, "one")
        create_project(db, "two")
        create_bucket(db, BucketLocation(one.id, "logs"))
        JournalStore(db).put(one.id, "logs", None, "test")
    finally:
        db.dispose()

    inventory = data / "journal" / "inventory" / "bucket=logs" / "inventory.parquet"
    with RippleProcess(
        tmp_path,
        "up",
        RIPPLE_DATA_DIR=str(data),
        RIPPLE_METRICS_ADDRESS="127.0.0.1:0",
        RIPPLE_S3_ADDRESS="127.0.0.1:0",
    ) as ripple:
        ripple.wait_for_output("pipeline running")
        rows = table_rows(ripple.stdout)
        metrics = scrape(rows["metrics"])
        # the journaled bucket's live inventory, written at start
        wait_for(inventory.is_file, what="the live inventory of the journaled bucket")
        code = ripple.interrupt()
    assert code == 0, ripple.stderr[-3000:]
    database = data / "metabase.db"
    assert rows == {
        "data directory": str(data.resolve()),
        "schema revision": str(head_revision()),
        "projects": "2",
        "buckets": "1",
        "objects": "0",
        "metabase": f"sqlite:///{database}",
        "spark master": "local[*]",
        "checkpoint": str((data / "checkpoint").resolve()),
        "metrics": rows["metrics"],
        "eventing buckets": "0",
        "S3 endpoint": rows["S3 endpoint"],
        "gateway processes": str(min(usable_cores(), MAX_AUTOMATIC_WORKERS)),  # one per core
        "lifecycle runs": "every 3600 s",
        "journal upkeep": "every 3600 s",
    }
    assert re.fullmatch(r"http://127\.0\.0\.1:[1-9][0-9]*", rows["S3 endpoint"])
    assert re.fullmatch(r"http://127\.0\.0\.1:[1-9][0-9]*/metrics", rows["metrics"])
    assert metrics["ripple_events_unrouted_total"] == 0
    assert "ripple_pipeline_lag_seconds" in metrics
    assert ripple.stdout.rstrip().endswith("pipeline stopped")
    assert "SIGINT: stopping after the batch in flight" in ripple.stderr
    # the stop cancels the batch in flight (the delivery's lease), and says so in no trace,
    # Python's or Java's, nor in Spark's lines about the jobs it cancelled (a Python worker
    # the signal ended before the pipeline stopped may still have Spark log an error)
    stopping = ripple.stderr.partition("SIGINT: stopping")[2]
    for noise in ("Traceback", "Exception in thread", "Failed to cancel job group"):
        assert noise not in stopping, (noise, stopping[-3000:])
    assert (data / "checkpoint" / "metadata").is_file()


def test_db_upgrade_with_default_data_dir(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / ".ripple" / "metabase.db").is_file()
    assert f"is at revision {head_revision()}" in result.output


def test_db_upgrade_reads_ripple_toml(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "ripple.toml").write_text('data-dir = "from-file"\n', encoding="utf-8")
    result = runner.invoke(cli, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "from-file" / "metabase.db").is_file()
    assert not (tmp_path / ".ripple").exists()


@pytest.fixture
def fresh_postgres_url(postgres_url: str) -> Iterator[str]:
    """A new, empty database on the test PostgreSQL server, dropped afterwards."""
    with fresh_postgres_database(postgres_url, "ripple_cli") as url:
        yield url


@pytest.mark.postgresql
def test_up_on_postgresql(tmp_path: Path, fresh_postgres_url: str) -> None:
    """`ripple up` on PostgreSQL, with both its listeners on HTTPS: one SIGHUP to the
    process reloads the certificate of each."""
    data = tmp_path / "data"
    ca, ca_file = authority(tmp_path)
    cert, key = issue(ca, tmp_path)
    tls = {"CERT": str(cert), "KEY": str(key)}
    with RippleProcess(
        tmp_path,
        "up",
        RIPPLE_DATA_DIR=str(data),
        RIPPLE_DATABASE_URL=fresh_postgres_url,
        RIPPLE_METRICS_ADDRESS="127.0.0.1:0",
        RIPPLE_S3_ADDRESS="127.0.0.1:0",
        **{
            f"RIPPLE_{where}_TLS_{part}": path
            for where in ("S3", "METRICS")
            for part, path in tls.items()
        },
    ) as ripple:
        ripple.wait_for_output("pipeline running")
        listening = table_rows(ripple.stdout)
        ports = [
            int(listening[row].split(":")[2].split("/")[0]) for row in ("S3 endpoint", "metrics")
        ]
        assert [served_serial(port, ca_file) for port in ports] == [serial_of(cert)] * 2
        new_cert, new_key = issue(ca, tmp_path, "rotated")
        os.replace(new_cert, cert)
        os.replace(new_key, key)
        os.kill(ripple.process.pid, signal.SIGHUP)  # the process, not its group (Spark's JVM)
        wait_for(
            lambda: [served_serial(port, ca_file) for port in ports] == [serial_of(cert)] * 2,
            what="the rotated certificate on the S3 endpoint and the metrics",
        )
        # SIGTERM to the group also ends Spark's Python workers; still a clean stop
        code = ripple.interrupt(signum=signal.SIGTERM)
    assert code == 0, ripple.stderr[-3000:]
    assert "SIGTERM: stopping after the batch in flight" in ripple.stderr
    assert ripple.stdout.rstrip().endswith("pipeline stopped")
    rows = table_rows(ripple.stdout)
    assert rows["S3 endpoint"].startswith("https://127.0.0.1:")
    assert rows["metrics"].startswith("https://127.0.0.1:")
    database = sa.make_url(fresh_postgres_url).database
    assert rows["metabase"].startswith("postgresql+psycopg://")
    assert rows["metabase"].endswith(f"/{database}")
    assert rows["schema revision"] == str(head_revision())
    assert (rows["projects"], rows["buckets"], rows["objects"]) == ("0", "0", "0")
    assert not (data / "metabase.db").exists()

    with psycopg.connect(
        sa.make_url(fresh_postgres_url).set(drivername="postgresql").render_as_string(False)
    ) as conn:
        revision = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        offsets = conn.execute(
            "SELECT count(*) FROM change_offsets WHERE consumer = 'pipeline'"
        ).fetchone()
        mark = conn.execute(
            "SELECT position FROM change_offsets WHERE consumer = 'pipeline-leases'"
        ).fetchall()
    assert revision == (head_revision(),)
    assert offsets == (0,)  # no records yet: nothing delivered, nothing committed
    assert mark == [(-1,)]  # the first run's leases, closed when it stopped


def test_up_with_unreachable_database(tmp_path: Path) -> None:
    url = "postgresql://127.0.0.1:1/x"
    result = run_ripple(tmp_path, "up", RIPPLE_DATA_DIR=str(tmp_path), RIPPLE_DATABASE_URL=url)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "127.0.0.1:1/x" in lines[0]
    assert "cannot reach the metabase" in lines[0]
    assert "Traceback" not in result.stderr


def test_up_with_bad_config_file(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "ripple.toml").write_text('[s3]\nport = "9000"\n', encoding="utf-8")
    result = runner.invoke(cli, ["up"])
    assert result.exit_code != 0
    assert "'s3.port'" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not (tmp_path / ".ripple").exists()


def test_bad_config_variable(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["up"], env={"RIPPLE_MODE": "staging"})
    assert result.exit_code != 0
    assert "mode (RIPPLE_MODE) must be one of dev, production, got 'staging'" in result.output
    assert not (tmp_path / ".ripple").exists()


def test_bad_database_url(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["up"], env={"RIPPLE_DATABASE_URL": "mysql://u@h/d"})
    assert result.exit_code != 0
    assert "database.url" in result.output
    assert "'mysql://u@h/d'" in result.output


def test_missing_named_config_file(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["--config", str(tmp_path / "nope.toml"), "up"])
    assert result.exit_code != 0
    assert "nope.toml" in result.output
    assert "does not exist" in result.output


def test_named_config_file(runner: CliRunner, tmp_path: Path) -> None:
    config = tmp_path / "custom.toml"
    config.write_text(f'data-dir = "{tmp_path / "custom"}"\n', encoding="utf-8")
    result = runner.invoke(cli, ["--config", str(config), "db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "custom" / "metabase.db").is_file()


# --- ripple db ------------------------------------------------------------------------


def test_db_status_when_migrated(runner: CliRunner, tmp_path: Path) -> None:
    env = {"RIPPLE_DATA_DIR": str(tmp_path / "data")}
    assert runner.invoke(cli, ["db", "upgrade"], env=env).exit_code == 0
    result = runner.invoke(cli, ["db", "status"], env=env)
    assert result.exit_code == 0, result.output
    head = head_revision()
    assert f"revision {head}, newest {head}" in " ".join(result.output.split())


def test_db_status_when_not_migrated(runner: CliRunner, tmp_path: Path) -> None:
    env = {"RIPPLE_DATA_DIR": str(tmp_path / "data")}
    result = runner.invoke(cli, ["db", "status"], env=env)
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert f"revision None, newest {head_revision()}" in text
    assert "ripple db upgrade" in text


def test_db_upgrade_reports_revision(runner: CliRunner, tmp_path: Path) -> None:
    env = {"RIPPLE_DATA_DIR": str(tmp_path / "data")}
    result = runner.invoke(cli, ["db", "upgrade"], env=env)
    assert result.exit_code == 0, result.output
    assert f"is at revision {head_revision()}" in " ".join(result.output.split())
    assert (tmp_path / "data" / "metabase.db").is_file()
