"""Real S3 clients (aws-cli, rclone, s3cmd) run as subprocesses against the gateway: each
with its own configuration file pointing at one endpoint on 127.0.0.1, in an environment
stripped of the caller's AWS, proxy and CA-bundle variables and with HOME in the test's
temporary directory, so no client reads a user's configuration or reaches another address.
(An inherited AWS_CA_BUNDLE alone makes rclone refuse to start: LoadCustomCABundleError.)

The endpoint is the in-process `gateway` fixture (fast; on SQLite, see SQLITE_ONLY), or
`ripple serve` in its own process (`served`), with a user made by `ripple user create`.
rclone and s3cmd come from Debian (`.ci/install-clients`, which `make test` runs); without
them the tests skip, or fail under CI.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.conftest import Running, gateway, s3, services  # noqa: F401
from tests.ports import free_port
from tests.ripple_process import RippleProcess, credentials, ripple

TIMEOUT = 120  # seconds for one client command
MiB = 1024 * 1024

# The clients' tests run on SQLite alone: each client command is a process of its own
# (aws-cli's take a second to start), and the metabase's behaviour on both databases is
# tests/gateway's to check.
SQLITE_ONLY = pytest.mark.parametrize("db", ["sqlite"], indirect=True)

# The tree every sync test uploads: nested directories, and a name with spaces and
# non-ASCII letters (NFC, as typed).
TREE = {
    "top.txt": b"at the top\n",
    "docs/readme.md": b"# read me\n" * 20,
    "docs/deeper/deepest/leaf.bin": bytes(range(256)) * 400,
    "docs/deeper/r\u00e9sum\u00e9 f\u00fcr \u00c5sa.txt": "caf\u00e9 \u2615\n".encode(),
    "media/empty": b"",
}


@dataclass(frozen=True)
class Endpoint:
    """Where a client connects and the key it signs with."""

    url: str
    access_key: str
    secret: str
    ca_file: Path | None = None  # HTTPS: the authority that signed the gateway's certificate

    @property
    def hostport(self) -> str:
        return self.url.removeprefix("http://").removeprefix("https://")


@pytest.fixture
def endpoint(gateway: Running) -> Endpoint:  # noqa: F811
    return Endpoint(gateway.url, gateway.key.access_key_id, gateway.secret)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Endpoint]:
    """`ripple serve` in its own process on a free port, its user from `ripple user create`."""
    home = tmp_path / "ripple"
    home.mkdir()
    access, secret = credentials(ripple(home, "user", "create", "carol"))
    port = free_port()
    with RippleProcess(home, "serve", "--address", f"127.0.0.1:{port}") as server:
        server.wait_for_output("gateway running", timeout=60)
        yield Endpoint(f"http://127.0.0.1:{port}", access, secret)
        # Ctrl-C; its exit code is test_serve's business, not the clients'
        server.interrupt(timeout=30)


def program(name: str) -> str:
    """The installed client `name`; skips (fails under CI) when it is missing."""
    if name == "aws":
        found = str(Path(sys.executable).with_name("aws"))
        if not Path(found).exists():
            pytest.fail(f"{found} is missing: install the dev dependencies (make test)")
        return found
    located = shutil.which(name)
    if located is None:
        message = f"{name} is not installed: run .ci/install-clients (make test does)"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI is set, so this fails instead of skipping)")
        pytest.skip(message)
    return located


def client_environment(home: Path, **extra: str) -> dict[str, str]:
    """A bare environment: PATH, a UTF-8 locale, HOME in the test's directory, `extra`."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONUTF8": "1",
        "PYTHONIOENCODING": "utf-8",
        "TMPDIR": str(home),
    }
    env.update(extra)
    return env


class Client:
    """One client program with its configuration; calling it runs a command."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.argv = argv
        self.env = env
        self.cwd = cwd

    def run(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.argv, *map(str, args)],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=TIMEOUT,
        )

    def __call__(self, *args: str | Path) -> str:
        """Run the command; its stdout; fail with its output unless it exits 0."""
        done = self.run(*args)
        assert done.returncode == 0, (
            f"{' '.join(map(str, args))} exited {done.returncode}\n"
            f"stdout:\n{done.stdout[-5000:]}\nstderr:\n{done.stderr[-5000:]}"
        )
        return done.stdout


def aws_client(endpoint: Endpoint, home: Path) -> Client:
    """aws-cli v1 with SigV4, path-style addressing and no retries to hide errors behind."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "aws-config"
    config.write_text(
        "[default]\n"
        "region = us-east-1\n"
        "max_attempts = 1\n"
        "s3 =\n"
        "  signature_version = s3v4\n"
        "  addressing_style = path\n"
    )
    env = client_environment(
        home,
        AWS_CONFIG_FILE=str(config),
        AWS_SHARED_CREDENTIALS_FILE=str(home / "no-credentials"),
        AWS_ACCESS_KEY_ID=endpoint.access_key,
        AWS_SECRET_ACCESS_KEY=endpoint.secret,
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    argv = [program("aws"), "--endpoint-url", endpoint.url]
    if endpoint.ca_file is not None:
        argv += ["--ca-bundle", str(endpoint.ca_file)]
    return Client(argv, env, home)


def rclone_client(endpoint: Endpoint, home: Path) -> Client:
    """rclone with one remote, `ripple:`, and no retries to hide errors behind.

    It needs no --s3-no-check-bucket: before its first upload to a bucket rclone sends
    CreateBucket, which ripple answers 409 BucketAlreadyOwnedByYou, and rclone takes that
    as "the bucket exists"."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "rclone.conf"
    config.write_text(
        "[ripple]\n"
        "type = s3\n"
        "provider = Other\n"
        "env_auth = false\n"
        f"endpoint = {endpoint.url}\n"
        f"access_key_id = {endpoint.access_key}\n"
        f"secret_access_key = {endpoint.secret}\n"
        "region = us-east-1\n"
        "force_path_style = true\n"
    )
    argv = [
        program("rclone"),
        "--config",
        str(config),
        "--retries",
        "1",
        "--low-level-retries",
        "1",
    ]
    if endpoint.ca_file is not None:
        argv += ["--ca-cert", str(endpoint.ca_file)]
    return Client(argv, client_environment(home), home)


def s3cmd_client(endpoint: Endpoint, home: Path) -> Client:
    """s3cmd with SigV4 and path-style addressing (host_bucket without %(bucket)s)."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "s3cfg"
    config.write_text(
        "[default]\n"
        f"access_key = {endpoint.access_key}\n"
        f"secret_key = {endpoint.secret}\n"
        f"host_base = {endpoint.hostport}\n"
        f"host_bucket = {endpoint.hostport}\n"
        "bucket_location = us-east-1\n"
        f"use_https = {endpoint.ca_file is not None}\n"
        f"ca_certs_file = {endpoint.ca_file or ''}\n"
        "check_ssl_certificate = True\n"
        "signature_v2 = False\n"
        "proxy_host =\n"
        "proxy_port = 0\n"
        "progress_meter = False\n"
    )
    return Client([program("s3cmd"), "-c", str(config)], client_environment(home), home)


def write_tree(root: Path, files: dict[str, bytes] = TREE) -> dict[str, bytes]:
    """`files` (relative path -> bytes) written under root; `files`."""
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return dict(files)


def read_tree(root: Path) -> dict[str, bytes]:
    """Every file under root: relative path (with /) -> bytes."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def random_file(path: Path, size: int, seed: int = 0) -> bytes:
    """`size` reproducible pseudo-random bytes (no two parts alike), written to path."""
    data = random.Random(seed).randbytes(size)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def keys_and_sizes(s3_client: Any, bucket: str) -> dict[str, int]:
    """The bucket's objects as boto3 lists them: key -> size."""
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {o["Key"]: o["Size"] for page in pages for o in page.get("Contents", [])}


def multipart_etag(data: bytes, part_size: int) -> str:
    """S3's ETag for `data` uploaded in parts of part_size: the MD5 of the parts' MD5s."""
    parts = [data[i : i + part_size] for i in range(0, len(data), part_size)]
    digests = b"".join(hashlib.md5(part).digest() for part in parts)
    return f'"{hashlib.md5(digests).hexdigest()}-{len(parts)}"'
