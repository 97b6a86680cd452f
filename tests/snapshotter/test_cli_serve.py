"""`ripple snapshot serve`: as a process that serves gRPC and health checks until SIGTERM
or Ctrl-C and stores what it was sent on the way out; over TLS, reloading its certificate
on SIGHUP; in production mode, refusing plain text off loopback unless told; its help; its
one-line errors."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import sys
import tomllib
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from ripple.cli.snapshot_serve import serve
from ripple.config import Settings
from ripple.snapshotter.client import SnapshotterClient
from ripple.snapshotter.pages import decode
from ripple.snapshotter.service import Snapshotter
from ripple.snapshotter.settings import SnapshotterSettings, parse_snapshotter
from tests import ripple_process
from tests.certificates import Pki, issue, serial_of, served_serial
from tests.ports import free_port
from tests.ripple_process import RippleProcess, table_rows
from tests.waiting import wait_for

# the command as `ripple snapshot serve` will run it, before it is mounted in `ripple`
SERVE = (
    "import sys; from ripple.config import load_settings; "
    "from ripple.cli.snapshot_serve import serve; "
    "serve.main(sys.argv[1:], obj=load_settings(None), prog_name='ripple snapshot serve')"
)


@pytest.fixture
def this_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ripple_process, "RIPPLE", Path(sys.executable))


def serve_process(directory: Path, config: str, *args: str, **env: str) -> RippleProcess:
    """`ripple snapshot serve ARGS…` in `directory`, with `config` as its ripple.toml."""
    (directory / "ripple.toml").write_text(config)
    return RippleProcess(
        directory, "-c", SERVE, *args, RIPPLE_DATA_DIR=str(directory / "data"), **env
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


@pytest.mark.usefixtures("this_python")
def test_serves_tls_and_reloads_its_certificate_on_sighup(tmp_path: Path, pki: Pki) -> None:
    client_cert, client_key = issue(pki.clients, pki.directory, "publisher")
    config = (
        "[snapshotters.default]\n"
        f'tls-cert = "{pki.cert}"\ntls-key = "{pki.key}"\n'
        f'tls-client-ca = "{pki.clients_file}"\n'
        f'tls-ca = "{pki.ca_file}"\n'
        f'tls-client-cert = "{client_cert}"\ntls-client-key = "{client_key}"\n'
    )
    port = free_port()
    args = ("--address", f"0.0.0.0:{port}", "--health-address", "0.0.0.0:0")
    with serve_process(tmp_path, config, *args, RIPPLE_MODE="production") as process:
        process.wait_for_output("snapshotter running")
        rows = table_rows(process.stdout)
        assert rows["TLS"] == (
            f"{pki.cert} (SIGHUP reloads); client certificates from {pki.clients_file}"
        )
        health = rows["health"].replace("0.0.0.0", "127.0.0.1")
        assert health.startswith("https://")
        health_port = int(health.rpartition(":")[2].partition("/")[0])
        verify = ssl.create_default_context(cafile=str(pki.ca_file))
        assert httpx.get(health, verify=verify, timeout=30).status_code == 200
        publisher = parse_snapshotter(
            "default", tomllib.loads(config)["snapshotters"]["default"], tmp_path
        )
        with SnapshotterClient.of(publisher, f"127.0.0.1:{port}") as kept:
            assert kept.publish("w", b"before").message_id == "0-0"
            mine = (client_cert, client_key)
            first = serial_of(pki.cert)
            assert served_serial(port, pki.ca_file, mine=mine, alpn="h2") == first
            new_cert, new_key = issue(pki.ca, pki.directory, "rotated")
            os.replace(new_cert, pki.cert)
            os.replace(new_key, pki.key)
            os.kill(process.process.pid, signal.SIGHUP)
            wait_for(
                lambda: (
                    served_serial(port, pki.ca_file, mine=mine, alpn="h2")
                    == serial_of(pki.cert)
                    != first
                ),
                what="the rotated certificate on gRPC",
            )
            assert served_serial(health_port, pki.ca_file) == serial_of(pki.cert)
            kept.publish("w", b"after")  # the connection open across the reload
        assert process.interrupt() == 0, process.stderr
    assert "snapshotter stopped: 1 page written on shutdown" in process.stdout


@pytest.mark.usefixtures("this_python")
@pytest.mark.parametrize(
    ("args", "listener"),
    [
        (("--address", "0.0.0.0:0", "--health-address", "127.0.0.1:0"), "address"),
        (("--address", "127.0.0.1:0", "--health-address", "0.0.0.0:0"), "health-address"),
    ],
)
def test_production_refuses_plain_text_off_loopback(
    tmp_path: Path, args: tuple[str, ...], listener: str
) -> None:
    with serve_process(tmp_path, "", *args, RIPPLE_MODE="production") as process:
        assert process.finish(60) == 1
    [line] = process.stderr.strip().splitlines()
    assert line.startswith(
        f"Error: mode is production and snapshotters.default.{listener} 0.0.0.0:0 is off "
        "loopback: set snapshotters.default.tls-cert and tls-key"
    )
    assert not (tmp_path / "data" / "snapshots").exists()  # nothing was opened


@pytest.mark.usefixtures("this_python")
def test_production_serves_plain_text_when_told_a_proxy_terminates_tls(tmp_path: Path) -> None:
    config = "[snapshotters.default]\nallow-plain-text = true\n"
    args = ("--address", "0.0.0.0:0", "--health-address", "127.0.0.1:0")
    with serve_process(tmp_path, config, *args, RIPPLE_MODE="production") as process:
        process.wait_for_output("snapshotter running")
        assert table_rows(process.stdout)["TLS"] == "off (plain text)"
        assert process.interrupt() == 0, process.stderr
    assert "serving plain text on 0.0.0.0:0 (snapshotters.default.address)" in process.stderr
    assert "snapshotters.default.allow-plain-text says a proxy" in process.stderr


def test_a_certificate_that_cannot_be_served_is_a_one_line_error(
    runner: CliRunner, tmp_path: Path, pki: Pki
) -> None:
    table = {"tls-cert": str(pki.key), "tls-key": str(pki.cert)}  # swapped
    settings = Settings(data_dir=tmp_path, snapshotter_tables={"default": table})
    result = runner.invoke(serve, ["--address", "127.0.0.1:0"], obj=settings)
    assert result.exit_code == 1
    [line] = result.output.strip().splitlines()
    assert line.startswith("Error: cannot serve TLS with snapshotters.default.tls-cert")
    assert not (tmp_path / "snapshots").exists()  # nothing was opened
