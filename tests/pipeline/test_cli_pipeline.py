"""`ripple pipeline run` refuses to start, with one line and before Spark starts, when its
configuration is wrong or the metabase is not migrated; its help explains the options."""

from __future__ import annotations

import socket
from pathlib import Path

from click.testing import CliRunner

from ripple.cli import cli


def test_help_explains_the_job_and_its_options(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["pipeline", "run", "--help"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for phrase in (
        "Run the eventing job until Ctrl-C",
        "at least once",
        "--metrics-port",
        "--max-records-per-batch",
        "--checkpoint",
        '[topics."NAME"]',
    ):
        assert phrase in text


def test_an_unmigrated_metabase_stops_it(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["pipeline", "run"])
    assert result.exit_code == 1
    assert "schema revision None, not" in result.output
    assert "run `ripple db upgrade` first" in result.output
    assert not (tmp_path / ".ripple" / "checkpoint").exists()


def test_a_wrong_topic_argument_stops_it(runner: CliRunner, tmp_path: Path) -> None:
    assert runner.invoke(cli, ["db", "upgrade"]).exit_code == 0
    (tmp_path / "ripple.toml").write_text(
        '[topics.hooks]\npush-endpoint = "http://127.0.0.1:1/x"\nmax-retries = "lots"\n',
        encoding="utf-8",
    )
    result = runner.invoke(cli, ["pipeline", "run"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines == [
        "Error: topic 'hooks': argument 'max-retries' must be a whole number above zero, not 'lots'"
    ]
    assert not (tmp_path / ".ripple" / "checkpoint").exists()


def test_a_metrics_port_in_use_stops_it(runner: CliRunner, tmp_path: Path) -> None:
    assert runner.invoke(cli, ["db", "upgrade"]).exit_code == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner.invoke(cli, ["pipeline", "run", "--metrics-port", str(port)])
    assert result.exit_code == 1
    assert f"cannot serve metrics on 127.0.0.1:{port}" in result.output
    assert "choose another port with --metrics-port or metrics.address" in result.output


def test_a_cluster_master_with_a_sqlite_metabase_stops_it(
    runner: CliRunner, tmp_path: Path
) -> None:
    """Executors on other machines cannot open this machine's SQLite file: one line naming
    PostgreSQL, before Spark starts."""
    assert runner.invoke(cli, ["db", "upgrade"]).exit_code == 0
    result = runner.invoke(
        cli, ["pipeline", "run"], env={"RIPPLE_SPARK_MASTER": "spark://127.0.0.1:7077"}
    )
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("Error: spark.master spark://127.0.0.1:7077 runs the pipeline")
    assert "set RIPPLE_DATABASE_URL to a PostgreSQL database" in lines[0]
    assert not (tmp_path / ".ripple" / "checkpoint").exists()
