"""`ripple serve` as operators run it: the installed command in its own process, a user
made with `ripple user create`, a crash in the middle of an upload, and `ripple data gc`."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.gateway.conftest import wait_for
from tests.gateway.helpers import client
from tests.ports import free_port
from tests.ripple_process import RIPPLE, RippleProcess, credentials, environment, ripple


def test_serve_user_create_and_a_crash_mid_upload(tmp_path: Path) -> None:
    access, secret = credentials(ripple(tmp_path, "user", "create", "alice"))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with RippleProcess(tmp_path, "serve", "--address", f"127.0.0.1:{port}") as server:
        server.wait_for_output("gateway running", timeout=60)
        s3 = client(url, access, secret)
        s3.create_bucket(Bucket="photos")
        s3.put_object(Bucket="photos", Key="kept", Body=b"k" * 5000)
        # an upload that never finishes: headers and half the body, then the server dies
        sock = socket.create_connection(("127.0.0.1", port))
        signed = client(url, access, secret, signature_version="s3v4").generate_presigned_url(
            "put_object", Params={"Bucket": "photos", "Key": "torn"}, ExpiresIn=60
        )
        path = signed.split(str(port), 1)[1]
        sock.sendall(
            f"PUT {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Length: 4000000\r\n\r\n".encode()
            + b"t" * 2_000_000  # past the first batch the gateway writes out (1 MiB)
        )
        tmp = tmp_path / ".ripple" / "objects" / "tmp"
        wait_for(lambda: any(tmp.iterdir()), what="the upload's temporary file")
        server.kill()
        sock.close()
    assert list(tmp.iterdir()), "the crash left the temporary file behind"

    with RippleProcess(tmp_path, "serve", "--address", f"127.0.0.1:{port}") as server:
        server.wait_for_output("gateway running", timeout=60)
        s3 = client(url, access, secret)
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket="photos").get("Contents", [])]
        assert keys == ["kept"]
        assert httpx.get(f"{url}/_ripple/health").status_code == 200
        for leftover in tmp.iterdir():  # as old as gc's shortest grace period allows
            past = time.time() - 120
            os.utime(leftover, (past, past))
        report = ripple(tmp_path, "data", "gc", "--older-than", "60")
        assert "removed 1 temporary files, 0 orphaned data files" in report
        assert list(tmp.iterdir()) == []
        assert s3.get_object(Bucket="photos", Key="kept")["Body"].read() == b"k" * 5000
        assert server.interrupt(timeout=30) == 0, server.stderr
    assert server.stdout.rstrip().endswith("gateway stopped")


def test_serve_refuses_a_taken_port(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [str(RIPPLE), "serve", "--address", f"127.0.0.1:{port}"],
            cwd=tmp_path,
            env=environment(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr


@pytest.mark.parametrize("address", ["nowhere", "127.0.0.1:http", "127.0.0.1:70000"])
def test_serve_refuses_a_bad_address(tmp_path: Path, address: str) -> None:
    done = subprocess.run(
        [str(RIPPLE), "serve", "--address", address],
        cwd=tmp_path,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "must be HOST:PORT" in done.stderr
