"""Running the gateway: its services built from settings, and a uvicorn server on the
configured address, in the foreground (`ripple serve`) or on a thread beside the pipeline
(`ripple up`)."""

from __future__ import annotations

import signal
import socket
import threading

import uvicorn

from ripple.config import Settings
from ripple.gateway.app import create_app
from ripple.gateway.data import ObjectData
from ripple.gateway.protocol import HttpLimits, protocol_class
from ripple.gateway.ratelimit import RateLimit
from ripple.gateway.request import Services
from ripple.identity import Keyring
from ripple.metabase import Metabase
from ripple.notifications.registry import Registry
from ripple.snapshotter import shared as shared_snapshotters
from ripple.targets.guard import set_default_guard
from ripple.tls import Certificate, TlsError, plain_text_problem


class GatewayError(Exception):
    """The gateway cannot start: a bad address, the port is taken, a certificate that
    cannot be served."""


def parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise GatewayError(f"s3.address {address!r} must be HOST:PORT, e.g. 127.0.0.1:9000")
    return host or "127.0.0.1", int(port)


def build_services(settings: Settings, db: Metabase, registry: Registry | None = None) -> Services:
    """The gateway's services. `registry` is the one `db` asks which buckets have eventing
    (`open_metabase` makes both); without it, a registry of the static list is made."""
    try:  # the topic API checks destinations with it, and snapshot:// names with these
        set_default_guard(settings.guard)
        shared_snapshotters.configure(settings.snapshotters)
    except ValueError as e:
        raise GatewayError(str(e)) from e
    data_dir = settings.data_dir
    return Services(
        db=db,
        data=ObjectData(data_dir / "objects"),
        keyring=Keyring(db, data_dir),
        deletes=RateLimit(db, "delete", settings.delete_rate, settings.delete_burst),
        region=settings.effective_region,
        enforce_region=bool(settings.region),
        domain=settings.s3_domain,
        registry=registry or Registry(settings.eventing_buckets),
        allow_secrets_in_cleartext=settings.topics_allow_secrets_in_cleartext,
        max_rename_keys=settings.max_rename_keys,
    )


def bind(address: str) -> socket.socket:
    """A listening socket on `address` (port 0: any free port), or `GatewayError`."""
    host, port = parse_address(address)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted connections only for a
    # listening socket that says so; without it Nagle holds each body back ~40 ms
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise GatewayError(
            f"cannot listen on {address}: {e.strerror}; set s3.address (RIPPLE_S3_ADDRESS) "
            "to a free HOST:PORT"
        ) from e
    sock.listen(1024)
    return sock


def url_of(sock: socket.socket, *, tls: bool = False) -> str:
    """The http:// (with `tls`, https://) URL a bound socket serves at."""
    host, port = sock.getsockname()[:2]
    scheme = "https" if tls else "http"
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


def certificate(settings: Settings) -> Certificate | None:
    """The certificate `s3.tls-cert` and `s3.tls-key` name, loaded; None for plain HTTP;
    `GatewayError` with the reason it cannot be served."""
    try:
        files = settings.s3_tls
        return None if files is None else Certificate(*files)
    except (TlsError, ValueError) as e:
        raise GatewayError(str(e)) from e


def check_plain_http(settings: Settings, address: str) -> None:
    """`GatewayError` when the gateway would serve plain HTTP on `address` where production
    mode forbids it (off loopback, no certificate, no `s3.allow-plain-http`)."""
    if settings.s3_tls is not None:
        return
    production = settings.mode == "production"
    problem = plain_text_problem(
        "s3.address",
        address,
        production=production,
        allowed_by="s3.allow-plain-http" if settings.s3_allow_plain_http else "",
        remedy="set s3.tls-cert and s3.tls-key (RIPPLE_S3_TLS_CERT, RIPPLE_S3_TLS_KEY) to serve "
        "HTTPS, or s3.allow-plain-http = true behind a proxy that terminates TLS",
    )
    if problem is not None:
        raise GatewayError(problem)


class Gateway:
    """A uvicorn server for the gateway app on an already bound socket; `limits`: what a
    connection may take (timeouts, header sizes), `ripple.gateway.protocol`; with `tls`,
    HTTPS with that certificate, reloaded on SIGHUP when served in the foreground (`run`)."""

    def __init__(
        self,
        services: Services,
        sock: socket.socket,
        limits: HttpLimits | None = None,
        tls: Certificate | None = None,
    ) -> None:
        self.services = services
        self.socket = sock
        self.tls = tls
        self.url = url_of(sock, tls=tls is not None)
        app = create_app(services)
        config = uvicorn.Config(
            app,
            http=protocol_class(limits or HttpLimits(), app.state.metrics),
            # libuv's event loop: asyncio's own costs a small request noticeably more CPU
            # (BENCHMARKS.md, "Issue 26, fifth session")
            loop="uvloop",
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=5,
            ssl_context_factory=None if tls is None else lambda _config, _default: tls.context,
        )
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        """Serve until SIGINT or SIGTERM (uvicorn's handlers, on the main thread); SIGHUP
        reloads the certificate."""
        tls = self.tls
        if tls is not None:
            signal.signal(signal.SIGHUP, lambda _signum, _frame: tls.reload())
        self.services.watcher.start()
        try:
            self.server.run(sockets=[self.socket])
        finally:
            self.services.watcher.stop()

    def start(self) -> None:
        """Serve on a thread; `stop` ends it."""
        self.services.watcher.start()
        self._thread = threading.Thread(
            target=self.server.run,
            kwargs={"sockets": [self.socket]},
            name="s3-gateway",
            daemon=True,
        )
        self._thread.start()

    @property
    def started(self) -> bool:
        return self.server.started

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        self.services.watcher.stop()
        self.socket.close()
