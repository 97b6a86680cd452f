"""The gateway in processes of its own (`ripple.gateway.processes`): several processes serve
one socket, one that dies is replaced, a start that cannot work says why, and
`ripple serve --workers 2` stops all of them at Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from ripple.config import Settings
from ripple.gateway.processes import WATCH_INTERVAL_S, GatewayProcesses
from ripple.gateway.server import GatewayError, bind
from tests.gateway.conftest import wait_for
from tests.gateway.helpers import client
from tests.ports import free_port
from tests.ripple_process import RippleProcess, credentials, ripple


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0): one that ended and was not yet reaped
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_two_processes_serve_one_socket_and_a_killed_one_is_replaced(tmp_path: Path) -> None:
    access, secret = credentials(ripple(tmp_path, "user", "create", "alice"))
    settings = Settings(data_dir=tmp_path / ".ripple")
    with GatewayProcesses(settings, bind("127.0.0.1:0"), workers=2) as gateway:
        first = gateway.pids()
        assert len(set(first)) == 2
        assert os.getpid() not in first
        s3 = client(gateway.url, access, secret)
        s3.create_bucket(Bucket="photos")
        s3.put_object(Bucket="photos", Key="k", Body=b"v")

        os.kill(first[0], signal.SIGKILL)
        wait_for(lambda: gateway.restarts == 1, what="a replacement process")
        replacement = gateway.processes[0]  # where the killed one was
        wait_for(replacement.report.poll, what="the replacement serves")
        assert replacement.report.recv() == ("ready", replacement.process.pid)
        now = gateway.pids()
        assert len(now) == 2
        assert first[0] not in now
        assert first[1] in now
        # every connection is answered, whichever process the kernel gives it to
        for _ in range(20):
            with httpx.Client() as http:
                assert http.get(f"{gateway.url}/_ripple/health").status_code == 200
        assert client(gateway.url, access, secret).get_object(Bucket="photos", Key="k")[
            "Body"
        ].read() == (b"v")
        pids = gateway.pids()
    assert not any(alive(pid) for pid in pids)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{gateway.url}/_ripple/health", timeout=2)


def test_a_process_that_cannot_start_stops_the_start_with_its_reason(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / ".ripple", destinations_allow="not-a-network/99")
    gateway = GatewayProcesses(settings, bind("127.0.0.1:0"), workers=2)
    with pytest.raises(GatewayError, match="not-a-network/99"):
        gateway.start()
    assert gateway.socket.fileno() == -1  # closed
    assert not any(p.process.is_alive() for p in gateway.processes)


def test_a_metabase_not_migrated_stops_the_start_with_one_line(tmp_path: Path) -> None:
    gateway = GatewayProcesses(Settings(data_dir=tmp_path / ".ripple"), bind("127.0.0.1:0"), 1)
    with pytest.raises(GatewayError, match="no such table"):
        gateway.start()


def test_no_workers_is_refused() -> None:
    sock = bind("127.0.0.1:0")
    try:
        with pytest.raises(GatewayError, match="at least 1"):
            GatewayProcesses(Settings(), sock, workers=0)
    finally:
        sock.close()


def children_of(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]


def test_serve_workers_2_answers_and_stops_every_process_at_ctrl_c(tmp_path: Path) -> None:
    access, secret = credentials(ripple(tmp_path, "user", "create", "alice"))
    port = free_port()
    with RippleProcess(tmp_path, "serve", "--workers", "2", "--address", f"127.0.0.1:{port}") as (
        server
    ):
        server.wait_for_output("gateway running", timeout=120)
        assert "gateway processes │ 2" in server.stdout.replace("  ", " ").replace("  ", " ")
        gateways = gateway_children(server)
        for pid in gateways:  # a gateway process loads no Spark: pyarrow's library is unmapped
            with open(f"/proc/{pid}/maps") as maps:
                assert "libarrow" not in maps.read()
        s3 = client(f"http://127.0.0.1:{port}", access, secret)
        s3.create_bucket(Bucket="photos")
        for i in range(10):
            s3.put_object(Bucket="photos", Key=f"k{i}", Body=b"v")
        assert s3.list_objects_v2(Bucket="photos")["KeyCount"] == 10
        assert server.interrupt() == 0, server.stderr
    assert len(gateways) == 2
    assert "gateway stopped" in server.stdout
    assert "Traceback" not in server.stderr
    assert not any(alive(pid) for pid in gateways)


def gateway_children(server: RippleProcess) -> list[int]:
    return [
        pid
        for pid in children_of(server.process.pid)
        if "spawn_main" in Path(f"/proc/{pid}/cmdline").read_text()
    ]


def test_a_process_asked_to_stop_exits_0_and_is_not_replaced(tmp_path: Path) -> None:
    """SIGTERM (a service manager's stop, sent to the whole group) while the parent is
    still busy stopping something else, as `ripple up` is with its pipeline."""
    ripple(tmp_path, "user", "create", "alice")  # the metabase, migrated
    settings = Settings(data_dir=tmp_path / ".ripple")
    with GatewayProcesses(settings, bind("127.0.0.1:0"), workers=2) as gateway:
        asked = gateway.processes[0].process
        os.kill(asked.pid, signal.SIGTERM)
        asked.join(30)
        assert asked.exitcode == 0
        time.sleep(3 * WATCH_INTERVAL_S)  # the watcher's ticks: none may replace it
        assert gateway.restarts == 0
        assert gateway.alive()  # the other one serves on


def test_gateway_processes_stop_when_their_parent_is_killed(tmp_path: Path) -> None:
    port = free_port()
    with RippleProcess(tmp_path, "serve", "--workers", "2", "--address", f"127.0.0.1:{port}") as (
        server
    ):
        server.wait_for_output("gateway running", timeout=120)
        gateways = gateway_children(server)
        os.kill(server.process.pid, signal.SIGKILL)  # the parent only, not its group
        server.finish(30)
        wait_for(lambda: not any(alive(pid) for pid in gateways), what="the orphans' end")
    assert len(gateways) == 2


def test_serve_workers_0_is_refused_by_the_command_line(tmp_path: Path) -> None:
    with RippleProcess(tmp_path, "serve", "--workers", "0") as server:
        assert server.finish(60) == 2
    assert "--workers" in server.stderr
    assert "Traceback" not in server.stderr
