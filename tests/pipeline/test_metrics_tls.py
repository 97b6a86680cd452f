"""The pipeline's metrics endpoint over HTTPS (`metrics.tls-cert`, `metrics.tls-key`): served
with the certificate, refused to a client that trusts another authority or speaks plain
HTTP (and still served to the next), not held up by a client that stalls in its handshake, a
rotated certificate reaching the next connection; production mode's rule for plain HTTP off
loopback; `ripple pipeline run` refusing it in one line before Spark starts."""

from __future__ import annotations

import re
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trustme
from click.testing import CliRunner

from ripple.cli import cli
from ripple.config import ConfigError, load_settings
from ripple.pipeline.metrics_server import serve_metrics
from ripple.pipeline.service import PipelineError, metrics_certificate
from ripple.tls import Certificate
from tests.certificates import authority, issue, serial_of, served_serial

METRICS = ("metrics.tls-cert", "metrics.tls-key")


@pytest.fixture
def ca(tmp_path: Path) -> tuple[trustme.CA, Path]:
    return authority(tmp_path)


@pytest.fixture
def served(tmp_path: Path, ca: tuple[trustme.CA, Path]) -> Iterator[tuple[int, Certificate]]:
    cert, key = issue(ca[0], tmp_path)
    tls = Certificate(cert, key, settings=METRICS)
    server = serve_metrics("127.0.0.1", 0, tls)
    yield server.server_port, tls
    server.shutdown()
    server.server_close()


def scrape(port: int, verify: ssl.SSLContext | str | bool) -> httpx.Response:
    return httpx.get(f"https://127.0.0.1:{port}/metrics", verify=verify, timeout=10)


def test_metrics_are_served_over_https(
    served: tuple[int, Certificate], ca: tuple[trustme.CA, Path]
) -> None:
    port, _ = served
    answer = scrape(port, ssl.create_default_context(cafile=str(ca[1])))
    assert answer.status_code == 200
    assert "# TYPE" in answer.text  # Prometheus' text format


def test_a_client_of_another_authority_or_plain_http_is_refused_and_the_next_served(
    served: tuple[int, Certificate], ca: tuple[trustme.CA, Path], tmp_path: Path
) -> None:
    port, _ = served
    _, other = authority(tmp_path, "other")
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        scrape(port, ssl.create_default_context(cafile=str(other)))
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert scrape(port, ssl.create_default_context(cafile=str(ca[1]))).status_code == 200


def test_a_client_stalled_in_its_handshake_holds_up_no_other(
    served: tuple[int, Certificate], ca: tuple[trustme.CA, Path]
) -> None:
    port, _ = served
    with socket.create_connection(("127.0.0.1", port), timeout=10):  # connects, sends nothing
        answer = scrape(port, ssl.create_default_context(cafile=str(ca[1])))
    assert answer.status_code == 200


def test_a_rotated_certificate_reaches_the_next_connection(
    served: tuple[int, Certificate], ca: tuple[trustme.CA, Path], tmp_path: Path
) -> None:
    port, tls = served
    first = served_serial(port, ca[1])
    issue(ca[0], tmp_path)  # the same files, a new certificate
    assert tls.reload()
    assert served_serial(port, ca[1]) == serial_of(tmp_path / "server.pem") != first


def test_one_file_of_two_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=re.escape("metrics.tls-cert is set but metrics.tls-key is not")
    ):
        load_settings(environ={"RIPPLE_METRICS_TLS_CERT": str(tmp_path / "server.pem")})


def test_a_certificate_that_cannot_be_served_is_one_line(tmp_path: Path) -> None:
    settings = load_settings(
        environ={
            "RIPPLE_METRICS_TLS_CERT": str(tmp_path / "missing.pem"),
            "RIPPLE_METRICS_TLS_KEY": str(tmp_path / "missing.key"),
        }
    )
    with pytest.raises(
        PipelineError, match=r"metrics\.tls-cert '.*missing\.pem' is not a readable"
    ):
        metrics_certificate(settings, "127.0.0.1:9464")


@pytest.mark.parametrize(
    ("address", "refused"),
    [("0.0.0.0:9464", True), ("[::]:9464", True), ("127.0.0.1:9464", False), ("[::1]:0", False)],
)
def test_production_refuses_plain_http_off_loopback(address: str, refused: bool) -> None:
    production = load_settings(environ={"RIPPLE_MODE": "production"})
    if refused:
        with pytest.raises(
            PipelineError, match=re.escape("set metrics.tls-cert and metrics.tls-key")
        ):
            metrics_certificate(production, address)
    else:
        assert metrics_certificate(production, address) is None
    assert metrics_certificate(load_settings(environ={}), address) is None  # dev mode


def test_production_serves_plain_http_when_told(caplog: pytest.LogCaptureFixture) -> None:
    told = load_settings(
        environ={"RIPPLE_MODE": "production", "RIPPLE_METRICS_ALLOW_PLAIN_HTTP": "yes"}
    )
    assert metrics_certificate(told, "0.0.0.0:9464") is None
    assert "metrics.allow-plain-http says a proxy" in caplog.text


def test_production_serves_https_anywhere(tmp_path: Path, ca: tuple[trustme.CA, Path]) -> None:
    cert, key = issue(ca[0], tmp_path)
    settings = load_settings(
        environ={
            "RIPPLE_MODE": "production",
            "RIPPLE_METRICS_TLS_CERT": str(cert),
            "RIPPLE_METRICS_TLS_KEY": str(key),
        }
    )
    assert metrics_certificate(settings, "0.0.0.0:9464") is not None


def test_pipeline_run_in_production_refuses_plain_metrics_off_loopback(
    runner: CliRunner, tmp_path: Path
) -> None:
    assert runner.invoke(cli, ["db", "upgrade"]).exit_code == 0
    result = runner.invoke(
        cli,
        ["pipeline", "run"],
        env={"RIPPLE_MODE": "production", "RIPPLE_METRICS_ADDRESS": "0.0.0.0:0"},
    )
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("Error: mode is production and metrics.address 0.0.0.0:0")
    assert not (tmp_path / ".ripple" / "checkpoint").exists()
