"""aws-cli, rclone and s3cmd against `ripple serve` over HTTPS, each trusting the test's own
certificate authority: a bucket made, a file of several MiB put (in parts, past aws-cli's
and s3cmd's multipart thresholds) and read back; and each refusing the gateway when it
trusts another authority."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.certificates import authority, issue
from tests.clients.conftest import (
    Client,
    Endpoint,
    MiB,
    aws_client,
    random_file,
    rclone_client,
    s3cmd_client,
)
from tests.ports import free_port
from tests.ripple_process import RippleProcess, credentials, ripple

CLIENTS: dict[str, Callable[[Endpoint, Path], Client]] = {
    "aws": aws_client,
    "rclone": rclone_client,
    "s3cmd": s3cmd_client,
}


@pytest.fixture(scope="module")
def served_https(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    """`ripple serve` over HTTPS with a certificate for 127.0.0.1 from a fresh authority."""
    home = tmp_path_factory.mktemp("https")
    ca, ca_file = authority(home)
    cert, key = issue(ca, home)
    access, secret = credentials(ripple(home, "user", "create", "carol"))
    port = free_port()
    tls = {"RIPPLE_S3_TLS_CERT": str(cert), "RIPPLE_S3_TLS_KEY": str(key)}
    with RippleProcess(home, "serve", "--address", f"127.0.0.1:{port}", **tls) as server:
        server.wait_for_output("gateway running", timeout=60)
        assert f"https://127.0.0.1:{port}" in server.stdout
        yield Endpoint(f"https://127.0.0.1:{port}", access, secret, ca_file)
        server.interrupt(timeout=30)


def _commands(name: str, bucket: str, local: Path, back: Path) -> list[tuple[str, ...]]:
    if name == "aws":
        return [
            ("s3", "mb", f"s3://{bucket}"),
            ("s3", "cp", str(local), f"s3://{bucket}/big.bin"),
            ("s3", "cp", f"s3://{bucket}/big.bin", str(back)),
        ]
    if name == "rclone":
        return [
            ("mkdir", f"ripple:{bucket}"),
            ("copyto", str(local), f"ripple:{bucket}/big.bin"),
            ("copyto", f"ripple:{bucket}/big.bin", str(back)),
        ]
    return [
        ("mb", f"s3://{bucket}"),
        ("put", str(local), f"s3://{bucket}/big.bin"),
        ("get", f"s3://{bucket}/big.bin", str(back)),
    ]


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_a_client_over_https(name: str, served_https: Endpoint, tmp_path: Path) -> None:
    client = CLIENTS[name](served_https, tmp_path / "home")
    local, back = tmp_path / "big.bin", tmp_path / "back.bin"
    data = random_file(local, 9 * MiB)  # past aws-cli's and s3cmd's multipart thresholds
    for command in _commands(name, f"tls-{name}", local, back):
        client(*command)
    assert back.read_bytes() == data


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_a_client_trusting_another_authority_is_refused(
    name: str, served_https: Endpoint, tmp_path: Path
) -> None:
    _, other = authority(tmp_path, "other-ca")
    wrong = Endpoint(served_https.url, served_https.access_key, served_https.secret, other)
    client = CLIENTS[name](wrong, tmp_path / "home")
    done = client.run(*_commands(name, f"refused-{name}", tmp_path, tmp_path)[0])
    assert done.returncode != 0
    said = (done.stdout + done.stderr).lower()
    assert "certificate" in said or "ssl" in said, said
