"""The gateway over HTTPS: boto3 (an aws-chunked upload too) and presigned URLs with the
test's own certificate authority, a client that trusts another one refused at the handshake,
TLS 1.1 refused, a certificate rotated on disk served to the next connection after SIGHUP (in
one process and across `ripple serve --workers 2`), settings that name one file of the two
refused, and an idle keep-alive client that does not hold up the stop."""

from __future__ import annotations

import io
import os
import signal
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import httpx
import pytest
import trustme
from botocore.config import Config

from ripple.config import ConfigError, load_settings
from ripple.gateway.request import Services
from ripple.gateway.server import Gateway, GatewayError, bind, certificate, check_plain_http
from ripple.identity import create_user
from ripple.tls import Certificate
from tests.certificates import authority, issue, serial_of, served_serial, trusting
from tests.ports import free_port
from tests.ripple_process import RippleProcess, table_rows
from tests.waiting import wait_for


@pytest.fixture
def ca(tmp_path: Path) -> tuple[trustme.CA, Path]:
    return authority(tmp_path)


@pytest.fixture
def https(services: Services, tmp_path: Path, ca: tuple[trustme.CA, Path]) -> Iterator[Any]:
    authority, _ = ca
    cert, key = issue(authority, tmp_path)
    tls = Certificate(cert, key)
    gateway = Gateway(services, bind("127.0.0.1:0"), tls=tls)
    gateway.start()
    wait_for(lambda: gateway.started, what="the gateway to start")
    try:
        yield gateway
    finally:
        gateway.stop()


def client(url: str, key: str, secret: str, verify: Any) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        verify=verify,
        config=Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1},
            signature_version="s3v4",
        ),
    )


def test_boto3_and_presigned_urls_over_https(
    https: Gateway, services: Services, tmp_path: Path, ca: tuple[trustme.CA, Path]
) -> None:
    _, ca_file = ca
    assert https.url.startswith("https://127.0.0.1:")
    _, key, secret = create_user(services.db, tmp_path, "alice")
    s3 = client(https.url, key.access_key_id, secret, str(ca_file))
    s3.create_bucket(Bucket="photos")
    body = os.urandom(300_000)  # past the inline limit: a file, written through TLS
    sent: list[Any] = []
    s3.meta.events.register("before-send.s3.PutObject", lambda request, **_: sent.append(request))
    s3.put_object(Bucket="photos", Key="a.bin", Body=io.BytesIO(body))  # a stream: aws-chunked
    assert sent[0].headers["Content-Encoding"] == b"aws-chunked"
    assert sent[0].headers["x-amz-content-sha256"] == b"STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    assert s3.get_object(Bucket="photos", Key="a.bin")["Body"].read() == body
    url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": "photos", "Key": "a.bin"}, ExpiresIn=60
    )
    assert url.startswith("https://")
    assert httpx.get(url, verify=trusting(ca_file)).content == body
    put = s3.generate_presigned_url(
        "put_object", Params={"Bucket": "photos", "Key": "b.txt"}, ExpiresIn=60
    )
    assert httpx.put(put, content=b"presigned", verify=trusting(ca_file)).status_code == 200
    assert s3.get_object(Bucket="photos", Key="b.txt")["Body"].read() == b"presigned"


def test_a_client_that_trusts_another_authority_is_refused(
    https: Gateway, services: Services, tmp_path: Path
) -> None:
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    _, key, secret = create_user(services.db, tmp_path, "alice")
    s3 = client(https.url, key.access_key_id, secret, str(other))
    with pytest.raises(botocore.exceptions.SSLError):
        s3.list_buckets()
    with pytest.raises(httpx.RemoteProtocolError):  # plain HTTP on the HTTPS port: no answer
        httpx.get(https.url.replace("https://", "http://") + "/_ripple/health", timeout=5)


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
def test_tls_1_1_is_refused(https: Gateway, ca: tuple[trustme.CA, Path]) -> None:
    _, ca_file = ca
    port = https.socket.getsockname()[1]
    context = ssl.create_default_context(cafile=str(ca_file))
    context.minimum_version = ssl.TLSVersion.TLSv1
    context.maximum_version = ssl.TLSVersion.TLSv1_1
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        pytest.raises(ssl.SSLError),
    ):
        context.wrap_socket(raw, server_hostname="127.0.0.1").close()


def test_a_rotated_certificate_reaches_the_next_connection(
    https: Gateway, tmp_path: Path, ca: tuple[trustme.CA, Path]
) -> None:
    authority, ca_file = ca
    port = https.socket.getsockname()[1]
    tls = https.tls
    assert tls is not None
    first = serial_of(tls.cert)
    assert served_serial(port, ca_file) == first
    with httpx.Client(verify=trusting(ca_file)) as kept:  # a connection open across the reload
        assert kept.get(f"{https.url}/_ripple/health").text == "ok\n"
        new_cert, new_key = issue(authority, tmp_path, "rotated")
        os.replace(new_cert, tls.cert)
        os.replace(new_key, tls.key)
        assert tls.reload()
        assert served_serial(port, ca_file) == serial_of(tls.cert) != first
        assert kept.get(f"{https.url}/_ripple/health").text == "ok\n"


def test_a_broken_certificate_on_reload_keeps_the_one_served(
    https: Gateway, ca: tuple[trustme.CA, Path]
) -> None:
    _, ca_file = ca
    port = https.socket.getsockname()[1]
    tls = https.tls
    assert tls is not None
    served = serial_of(tls.cert)
    tls.key.write_text("not a key\n")
    assert not tls.reload()
    assert served_serial(port, ca_file) == served


def test_one_file_of_two_is_refused(tmp_path: Path, ca: tuple[trustme.CA, Path]) -> None:
    cert, key = issue(ca[0], tmp_path)
    with pytest.raises(ConfigError, match=r"^s3\.tls-cert is set but s3\.tls-key is not"):
        load_settings(environ={"RIPPLE_S3_TLS_CERT": str(cert)})
    with pytest.raises(ConfigError, match=r"^s3\.tls-key is set but s3\.tls-cert is not"):
        load_settings(environ={"RIPPLE_S3_TLS_KEY": str(key)})
    settings = load_settings(
        environ={"RIPPLE_S3_TLS_CERT": str(cert), "RIPPLE_S3_TLS_KEY": str(tmp_path / "gone")}
    )
    with pytest.raises(GatewayError, match=r"^s3\.tls-key '.*gone' is not a readable file$"):
        certificate(settings)
    settings = load_settings(
        environ={"RIPPLE_S3_TLS_CERT": str(key), "RIPPLE_S3_TLS_KEY": str(cert)}
    )
    with pytest.raises(GatewayError, match=r"^cannot serve TLS with s3\.tls-cert"):
        certificate(settings)


def test_ripple_serve_with_workers_reloads_on_sighup(
    tmp_path: Path, ca: tuple[trustme.CA, Path]
) -> None:
    authority, ca_file = ca
    cert, key = issue(authority, tmp_path)
    port = free_port()
    env = {"RIPPLE_S3_TLS_CERT": str(cert), "RIPPLE_S3_TLS_KEY": str(key)}
    args = ("serve", "--address", f"127.0.0.1:{port}", "--workers", "2")
    with RippleProcess(tmp_path, *args, **env) as server:
        server.wait_for_output("gateway running", timeout=120)
        assert table_rows(server.stdout)["S3 endpoint"] == f"https://127.0.0.1:{port}"
        first = serial_of(cert)
        assert served_serial(port, ca_file) == first
        new_cert, new_key = issue(authority, tmp_path, "rotated")
        os.replace(new_cert, cert)
        os.replace(new_key, key)
        os.kill(server.process.pid, signal.SIGHUP)
        # each of the two processes reloads: every new connection, whichever serves it, is
        # shown the new certificate
        wait_for(
            lambda: all(served_serial(port, ca_file) == serial_of(cert) for _ in range(8)),
            what="the rotated certificate on every gateway process",
        )
        assert server.interrupt(timeout=60) == 0, server.stderr


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("0.0.0.0:9000", True),
        (":9000", True),
        ("192.0.2.10:9000", True),
        ("s3.example.test:9000", True),
        ("127.0.0.1:9000", False),
        ("127.8.9.10:9000", False),
        ("[::1]:9000", False),
        ("localhost:9000", False),
    ],
)
def test_production_refuses_plain_http_off_loopback(address: str, refused: bool) -> None:
    production = load_settings(environ={"RIPPLE_MODE": "production"})
    if refused:
        with pytest.raises(GatewayError, match=r"^mode is production and s3\.address .* set s3"):
            check_plain_http(production, address)
    else:
        check_plain_http(production, address)
    check_plain_http(load_settings(environ={}), address)  # dev mode serves plain HTTP anywhere


def test_production_serves_plain_http_behind_a_proxy_when_told(
    caplog: pytest.LogCaptureFixture,
) -> None:
    told = load_settings(
        environ={"RIPPLE_MODE": "production", "RIPPLE_S3_ALLOW_PLAIN_HTTP": "true"}
    )
    check_plain_http(told, "0.0.0.0:9000")
    assert "serving plain text on 0.0.0.0:9000 (s3.address) in production" in caplog.text
    assert "s3.allow-plain-http says a proxy" in caplog.text


def test_production_serves_https_anywhere(tmp_path: Path, ca: tuple[trustme.CA, Path]) -> None:
    cert, key = issue(ca[0], tmp_path)
    env = {"RIPPLE_MODE": "production", "RIPPLE_S3_TLS_CERT": str(cert)}
    check_plain_http(load_settings(environ={**env, "RIPPLE_S3_TLS_KEY": str(key)}), ":9000")


def test_ripple_serve_in_production_refuses_plain_http_off_loopback(tmp_path: Path) -> None:
    port = free_port()
    with RippleProcess(
        tmp_path, "serve", "--address", f"0.0.0.0:{port}", RIPPLE_MODE="production"
    ) as server:
        assert server.finish(60) == 1
    assert "set s3.tls-cert and s3.tls-key" in server.stderr
    assert "Traceback" not in server.stderr


def test_an_idle_keep_alive_connection_does_not_hold_up_the_stop(
    services: Services,
    tmp_path: Path,
    ca: tuple[trustme.CA, Path],
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A client that made a request and keeps its connection open: the gateway's stop closes
    it at once over TLS too, as over plain HTTP, instead of waiting out its graceful timeout
    for a TLS goodbye the idle client never sends."""
    authority, ca_file = ca
    gateway = Gateway(services, bind("127.0.0.1:0"), tls=Certificate(*issue(authority, tmp_path)))
    gateway.start()
    wait_for(lambda: gateway.started, what="the gateway to start")
    port = int(gateway.url.rsplit(":", 1)[1])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=30) as raw,
        trusting(ca_file).wrap_socket(raw, server_hostname="127.0.0.1") as idle,
    ):
        idle.sendall(b"GET /_ripple/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = b""
        while not answer.endswith(b"ok\n"):  # the whole answer: the connection is idle
            answer += idle.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200")
        gateway.stop()
        assert idle.recv(65536) == b""  # closed by the server
    assert "graceful shutdown exceeded" not in capfd.readouterr().err  # uvicorn's own log


def test_virtual_hosted_style_with_a_wildcard_certificate(
    services: Services,
    tmp_path: Path,
    ca: tuple[trustme.CA, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`BUCKET.<s3.domain>` over HTTPS: a certificate for `*.<domain>` and `<domain>` passes
    boto3's host name check for every bucket (the names resolve to 127.0.0.1 here)."""
    domain = "s3.example.test"
    resolve = socket.getaddrinfo

    def loopback(host: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and (host == domain or host.endswith("." + domain)):
            host = "127.0.0.1"
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", loopback)
    authority, ca_file = ca
    cert, key = issue(authority, tmp_path, hosts=(f"*.{domain}", domain))
    services.domain = domain
    gateway = Gateway(services, bind("127.0.0.1:0"), tls=Certificate(cert, key))
    gateway.start()
    try:
        wait_for(lambda: gateway.started, what="the gateway to start")
        port = gateway.url.rsplit(":", 1)[1]
        _, access, secret = create_user(services.db, tmp_path, "alice")
        sent: list[str] = []
        s3 = boto3.client(
            "s3",
            endpoint_url=f"https://{domain}:{port}",
            region_name="us-east-1",
            aws_access_key_id=access.access_key_id,
            aws_secret_access_key=secret,
            verify=str(ca_file),
            config=Config(s3={"addressing_style": "virtual"}, retries={"max_attempts": 1}),
        )
        s3.meta.events.register("before-send", lambda request, **_: sent.append(request.url))
        s3.create_bucket(Bucket="photos")
        s3.put_object(Bucket="photos", Key="a.txt", Body=b"hello")
        assert s3.get_object(Bucket="photos", Key="a.txt")["Body"].read() == b"hello"
        assert sent[-1] == f"https://photos.{domain}:{port}/a.txt"
    finally:
        gateway.stop()
