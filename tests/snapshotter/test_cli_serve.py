"""`ripple snapshot serve`: as a process that serves gRPC and health checks until SIGTERM
or Ctrl-C and stores what it was sent on the way out; its help; its one-line errors."""

from __future__ import annotations

import signal
import socket
import sys
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from ripple.cli.snapshot_serve import serve
from ripple.config import Settings
from ripple.snapshotter.client import SnapshotterClient
from ripple.snapshotter.pages import decode
from ripple.snapshotter.service import Snapshotter
from ripple.snapshotter.settings import SnapshotterSettings
from tests import ripple_process
from tests.ripple_process import RippleProcess, table_rows

# the command as `ripple snapshot serve` will run it, before it is mounted in `ripple`
SERVE = (
    "import sys; from ripple.config import load_settings; "
    "from ripple.cli.snapshot_serve import serve; "
    "serve.main(sys.argv[1:], obj=load_settings(None), prog_name='ripple snapshot serve')"
)


def stored_payloads(settings: SnapshotterSettings) -> dict[str, list[bytes]]:
    """writer id -> the payloads of its pages on disk, in page order."""
    pages = [
        decode(p.read_bytes())
        for p in settings.pages_path.rglob("*")
        if p.is_file() and not p.name.startswith(".tmp-")
    ]
    pages.sort(key=lambda p: (p.metadata.writer_id, p.metadata.page_sequence))
    stored: dict[str, list[bytes]] = {}
    for page in pages:
        stored.setdefault(page.metadata.writer_id, []).extend(e.payload for e in page.events)
    return stored


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serves_until_a_signal_then_stores_what_it_was_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signum: int
) -> None:
    monkeypatch.setattr(ripple_process, "RIPPLE", Path(sys.executable))
    data = tmp_path / "data"
    args = ("--address", "127.0.0.1:0", "--health-address", "127.0.0.1:0")
    with RippleProcess(tmp_path, "-c", SERVE, *args, RIPPLE_DATA_DIR=str(data)) as process:
        process.wait_for_output("snapshotter running")
        rows = table_rows(process.stdout)
        settings = SnapshotterSettings.embedded(data)
        assert rows["storage"] == f"filesystem {settings.pages_path.resolve()}"
        assert rows["write-ahead log"] == str(settings.wal_path.resolve())
        assert rows["pages"] == "protobuf, zstd"
        with SnapshotterClient(rows["gRPC"]) as client:
            assert client.publish("unary", b"one").message_id == "0-0"
            client.publish("unary", b"two")
            with client.session() as session:
                session.publish("streamed", b"three")
        assert stored_payloads(settings) == {"streamed": [b"three"]}  # the session's end
        health = httpx.get(rows["health"], timeout=30)
        assert health.status_code == 200
        assert health.json()["buffers"]["total_buffered_events"] == 2

        assert process.interrupt(signum=signum) == 0, process.stderr

    assert stored_payloads(settings) == {"unary": [b"one", b"two"], "streamed": [b"three"]}
    assert "snapshotter stopped: 1 page written on shutdown" in process.stdout


def test_help_says_what_it_serves(runner: CliRunner) -> None:
    result = runner.invoke(serve, ["--help"])
    assert result.exit_code == 0
    assert "gRPC" in result.output
    assert "/health" in result.output
    assert "--health-address" in result.output
    assert "--name" in result.output


def test_an_unknown_name_lists_the_configured_snapshotters(
    runner: CliRunner, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path, snapshotter_tables={"archive": {}})
    result = runner.invoke(serve, ["--name", "nope"], obj=settings)
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("Error: no snapshotter 'nope'; configured: archive, default")
    assert not (tmp_path / "snapshots").exists()  # nothing was opened


def test_a_port_in_use_is_a_one_line_error_and_releases_the_snapshotter(
    runner: CliRunner, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner.invoke(
            serve, ["--address", f"127.0.0.1:{port}", "--health-address", "127.0.0.1:0"],
            obj=settings,
        )  # fmt: skip
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"Error: cannot listen for gRPC on 127.0.0.1:{port}")
    # closed on the way out: its write-ahead log is not locked any more
    Snapshotter.open(settings.snapshotter("default")).close()


def test_a_snapshotter_in_use_is_a_one_line_error(runner: CliRunner, tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    with Snapshotter.open(settings.snapshotter("default")):  # holds the write-ahead log
        result = runner.invoke(serve, ["--address", "127.0.0.1:0"], obj=settings)
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("Error: cannot open snapshotter 'default': write-ahead log")
    assert "in use by another process" in lines[0]
