"""The snapshotter over TLS: publishing through gRPC with the test's own certificate
authority, a publisher trusting another authority refused, client certificates required
with `tls-client-ca`, health and metrics over HTTPS, a certificate rotated on disk served to
the next connection after a reload, and files that cannot be used named by their setting."""

from __future__ import annotations

import os
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from ripple.snapshotter.client import SnapshotterClient, SnapshotterClientError
from ripple.snapshotter.grpc_server import serve_grpc
from ripple.snapshotter.health import HealthServer
from ripple.snapshotter.service import Snapshotter
from ripple.snapshotter.settings import SnapshotterSettings, parse_snapshotter
from ripple.snapshotter.tls import GrpcTls, server_tls
from ripple.tls import TlsError
from tests.certificates import Pki, authority, issue, serial_of, served_serial


@pytest.fixture
def snapshotter(snapshot_settings: SnapshotterSettings) -> Iterator[Snapshotter]:
    with Snapshotter.open(snapshot_settings) as snapshotter:
        yield snapshotter


def settings(pki: Pki, **table: Any) -> SnapshotterSettings:
    """Snapshotter `default` with the server's certificate, and `table`'s other keys."""
    base = {"tls-cert": str(pki.cert), "tls-key": str(pki.key)}
    return parse_snapshotter("default", {**base, **table}, pki.directory)


def loaded(settings: SnapshotterSettings) -> GrpcTls:
    tls = server_tls(settings)
    assert tls is not None
    return tls


@contextmanager
def serving(snapshotter: Snapshotter, tls: GrpcTls) -> Iterator[int]:
    """A gRPC server for `snapshotter` with `tls` on 127.0.0.1; its port."""
    server, port = serve_grpc(snapshotter, "127.0.0.1:0", tls=tls)
    try:
        yield port
    finally:
        server.stop(None)


@pytest.fixture
def tls_port(snapshotter: Snapshotter, pki: Pki) -> Iterator[int]:
    """A gRPC server with the server's certificate, no client certificates asked for."""
    with serving(snapshotter, loaded(settings(pki))) as port:
        yield port


@pytest.fixture
def mutual_port(snapshotter: Snapshotter, pki: Pki) -> Iterator[int]:
    """A gRPC server that requires client certificates from the clients' authority."""
    tls = loaded(settings(pki, **{"tls-client-ca": str(pki.clients_file)}))
    with serving(snapshotter, tls) as port:
        yield port


def client(port: int, pki: Pki, **table: Any) -> SnapshotterClient:
    """A publisher whose settings are `table` (the server's certificate is not among them:
    a publisher elsewhere has its own)."""
    publisher = parse_snapshotter("default", table, pki.directory)
    return SnapshotterClient.of(publisher, f"127.0.0.1:{port}", timeout=30)


def test_publishing_over_tls(tls_port: int, pki: Pki, snapshotter: Snapshotter) -> None:
    with client(tls_port, pki, **{"tls-ca": str(pki.ca_file)}) as publisher:
        assert publisher.publish("w", b"one").message_id == "0-0"
        with publisher.session() as session:
            session.publish("s", b"two")
    assert session.event_count == 1
    assert snapshotter.buffers_health()["total_buffered_events"] == 1  # the session's flushed


def test_a_publisher_that_trusts_another_authority_is_refused(tls_port: int, pki: Pki) -> None:
    with (
        client(tls_port, pki, **{"tls-ca": str(pki.clients_file)}) as publisher,
        pytest.raises(SnapshotterClientError) as refused,
    ):
        publisher.publish("w", b"one")
    assert refused.value.code == "UNAVAILABLE"
    with (  # the system's roots do not know the test's authority either
        SnapshotterClient.of(settings(pki), f"127.0.0.1:{tls_port}", timeout=30) as publisher,
        pytest.raises(SnapshotterClientError, match=r"^UNAVAILABLE"),
    ):
        publisher.publish("w", b"one")
    with (  # plain text to the TLS port
        SnapshotterClient(f"127.0.0.1:{tls_port}", timeout=30) as publisher,
        pytest.raises(SnapshotterClientError, match=r"^UNAVAILABLE"),
    ):
        publisher.publish("w", b"one")


def test_client_certificates_are_required_with_tls_client_ca(mutual_port: int, pki: Pki) -> None:
    trusting = {"tls-ca": str(pki.ca_file)}
    with (
        client(mutual_port, pki, **trusting) as anonymous,
        pytest.raises(SnapshotterClientError, match=r"^UNAVAILABLE"),
    ):
        anonymous.publish("w", b"no certificate")
    stranger_ca, _ = authority(pki.directory, "stranger-ca")
    stranger_cert, stranger_key = issue(stranger_ca, pki.directory, "stranger")
    stranger = {"tls-client-cert": str(stranger_cert), "tls-client-key": str(stranger_key)}
    with (
        client(mutual_port, pki, **trusting, **stranger) as unknown,
        pytest.raises(SnapshotterClientError, match=r"^UNAVAILABLE"),
    ):
        unknown.publish("w", b"a certificate of another authority")
    cert, key = issue(pki.clients, pki.directory, "publisher")
    known = {"tls-client-cert": str(cert), "tls-client-key": str(key)}
    with client(mutual_port, pki, **trusting, **known) as publisher:
        assert publisher.publish("w", b"signed").message_id == "0-0"


def test_health_and_metrics_over_https(snapshotter: Snapshotter, pki: Pki) -> None:
    tls = loaded(settings(pki))
    with HealthServer(snapshotter, "127.0.0.1:0", tls=tls.certificate) as health:
        assert health.url.startswith("https://127.0.0.1:")
        verify = ssl.create_default_context(cafile=str(pki.ca_file))
        answer = httpx.get(f"{health.url}/health", verify=verify, timeout=30)
        assert answer.status_code == 200
        assert answer.json()["snapshotter"] == "default"
        assert httpx.get(f"{health.url}/metrics", verify=verify, timeout=30).status_code == 200
        with pytest.raises(httpx.RemoteProtocolError):  # plain HTTP on the HTTPS port
            httpx.get(health.url.replace("https://", "http://") + "/health", timeout=30)


def test_a_rotated_certificate_reaches_the_next_connection(
    snapshotter: Snapshotter, pki: Pki
) -> None:
    tls = loaded(settings(pki))
    with serving(snapshotter, tls) as port:
        first = serial_of(pki.cert)
        assert served_serial(port, pki.ca_file, alpn="h2") == first
        with client(port, pki, **{"tls-ca": str(pki.ca_file)}) as kept:  # open across it
            kept.publish("w", b"before")
            new_cert, new_key = issue(pki.ca, pki.directory, "rotated")
            os.replace(new_cert, pki.cert)
            os.replace(new_key, pki.key)
            assert (
                served_serial(port, pki.ca_file, alpn="h2") == first
            )  # nothing read before a reload
            assert tls.reload()
            assert served_serial(port, pki.ca_file, alpn="h2") == serial_of(pki.cert) != first
            kept.publish("w", b"after")


def test_a_broken_certificate_on_reload_keeps_the_one_served(
    snapshotter: Snapshotter, pki: Pki
) -> None:
    tls = loaded(settings(pki))
    with serving(snapshotter, tls) as port:
        served = serial_of(pki.cert)
        new_cert, _ = issue(pki.ca, pki.directory, "rotated")
        os.replace(new_cert, pki.cert)  # its key not yet
        assert not tls.reload()
        assert served_serial(port, pki.ca_file, alpn="h2") == served


def test_files_that_cannot_be_used_name_their_setting(pki: Pki) -> None:
    gone = str(pki.directory / "gone.pem")
    with pytest.raises(TlsError, match=r"^snapshotters\.default\.tls-key '.*gone\.pem' is not"):
        server_tls(settings(pki, **{"tls-key": gone}))
    with pytest.raises(TlsError, match=r"^cannot serve TLS with snapshotters\.default\.tls-cert"):
        server_tls(settings(pki, **{"tls-cert": str(pki.key), "tls-key": str(pki.cert)}))
    with pytest.raises(TlsError, match=r"^snapshotters\.default\.tls-client-ca '.*' is not a bun"):
        server_tls(settings(pki, **{"tls-client-ca": str(pki.key)}))
    with pytest.raises(TlsError, match=r"^snapshotters\.default\.tls-ca '.*gone\.pem' is not"):
        client(1, pki, **{"tls-ca": gone})
    mismatched = {"tls-client-cert": str(pki.cert), "tls-client-key": str(pki.clients_file)}
    with pytest.raises(TlsError, match=r"^cannot use snapshotters\.default\.tls-client-cert"):
        client(1, pki, **mismatched)
