"""`ripple snapshot serve`: a snapshotter's gRPC publish service and its health checks,
until Ctrl-C or SIGTERM, then a graceful shutdown that stores every buffered event; over
TLS when the snapshotter has a certificate (reloaded on SIGHUP)."""

from __future__ import annotations

import logging
import re
import signal
import threading
from types import FrameType

import click
from prometheus_client import REGISTRY
from rich.table import Table

from ripple.cli.common import console, settings_of
from ripple.config import ConfigError
from ripple.snapshotter.grpc_server import GrpcServerError, serve_grpc
from ripple.snapshotter.health import HealthServer, HealthServerError
from ripple.snapshotter.index import IndexError_
from ripple.snapshotter.service import Snapshotter
from ripple.snapshotter.settings import SnapshotterSettings, plain_text_refusal
from ripple.snapshotter.storage import StorageError
from ripple.snapshotter.tls import GrpcTls, server_tls
from ripple.snapshotter.wal import WalError
from ripple.tls import TlsError

__all__ = ["serve"]

GRACE_SECONDS = 10.0  # for open calls and streams to finish once the signal came


def _masked(url: str) -> str:
    """`url` with the password of its user, if any, hidden."""
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)


def _storage_location(settings: SnapshotterSettings) -> str:
    if settings.storage == "s3":
        where = f"s3://{settings.s3_bucket}/{settings.s3_prefix}"
        return f"{where} at {settings.s3_endpoint}" if settings.s3_endpoint else where
    return str(settings.pages_path.resolve())


def _tls_row(settings: SnapshotterSettings, tls: GrpcTls | None) -> str:
    if tls is None:
        return "off (plain text)"
    clients = f"; client certificates from {settings.tls_client_ca}" if tls.client_ca else ""
    return f"{tls.certificate.cert} (SIGHUP reloads){clients}"


def _page_writes(name: str) -> float:
    return REGISTRY.get_sample_value("snapshotter_page_writes_total", {"snapshotter": name}) or 0.0


@click.command()
@click.option(
    "--name",
    default="default",
    show_default=True,
    metavar="NAME",
    help="The snapshotter: a [snapshotters.NAME] table of ripple.toml, or the embedded default.",
)
@click.option(
    "--address",
    default=None,
    metavar="HOST:PORT",
    help="Where to listen for gRPC (default: the snapshotter's address, 127.0.0.1:50051).",
)
@click.option(
    "--health-address",
    default=None,
    metavar="HOST:PORT",
    help="Where to serve /health and /metrics (default: its health-address, 127.0.0.1:9102).",
)
@click.pass_context
def serve(ctx: click.Context, name: str, address: str | None, health_address: str | None) -> None:
    """Serve a snapshotter's gRPC publish API until Ctrl-C or SIGTERM.

    Clients call ripple.snapshotter.v1.PubSubBasicInterface: Publish (one event, answered
    once it is in the write-ahead log) or PublishStream (a session: its end stores the
    pages of every writer it published to). Events are buffered per writer (the topic)
    and written as pages to the snapshotter's storage, then listed in its index.

    Health checks answer on the health address: /health, /health/buffers,
    /health/storage and /health/index (503 when unhealthy); Prometheus metrics on
    /metrics. On shutdown every buffered event is written as a page; what storage does not
    take in time stays in the write-ahead log and is written at the next start.

    With the snapshotter's tls-cert and tls-key both listeners serve TLS (SIGHUP reloads
    the files); in production mode, plain text off loopback is refused.
    """
    try:
        everything = settings_of(ctx)
        settings = everything.snapshotter(name)
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    address = address or settings.address
    health_address = health_address or settings.health_address
    refused = plain_text_refusal(
        settings,
        production=everything.mode == "production",
        address=address,
        health_address=health_address,
    )
    if refused is not None:
        raise click.ClickException(refused)
    try:
        tls = server_tls(settings)
    except TlsError as e:
        raise click.ClickException(str(e)) from e
    try:
        snapshotter = Snapshotter.open(settings)
    except (WalError, IndexError_, StorageError, ValueError, OSError) as e:
        raise click.ClickException(f"cannot open snapshotter {name!r}: {e}") from e
    try:
        grpc_server, port = serve_grpc(snapshotter, address, tls=tls)
    except GrpcServerError as e:
        snapshotter.close()
        raise click.ClickException(str(e)) from e
    try:
        health = HealthServer(
            snapshotter, health_address, tls=None if tls is None else tls.certificate
        )
    except HealthServerError as e:
        grpc_server.stop(None)
        snapshotter.close()
        raise click.ClickException(str(e)) from e
    health.start()

    host = address.rpartition(":")[0]
    table = Table(title="ripple snapshot serve", show_header=False, title_justify="left")
    table.add_row("snapshotter", name)
    table.add_row("gRPC", f"{host}:{port}")
    table.add_row("health", f"{health.url}/health")
    table.add_row("metrics", f"{health.url}/metrics")
    table.add_row("TLS", _tls_row(settings, tls))
    table.add_row("storage", f"{snapshotter.storage.backend} {_storage_location(settings)}")
    table.add_row("index", f"{snapshotter.index.backend} {_masked(settings.index_location)}")
    table.add_row("write-ahead log", str(settings.wal_path.resolve()))
    table.add_row("pages", f"{settings.format}, {settings.compression}")
    table.add_row(
        "page limits",
        f"{settings.max_events} events, {settings.max_size_bytes} bytes, "
        f"{settings.max_age_seconds:g} s",
    )
    console.print(table)

    stop = threading.Event()

    def stop_on(signum: int, _: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, stop_on) for sig in (signal.SIGINT, signal.SIGTERM)}
    if tls is not None:
        reload = tls.reload
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, lambda _signum, _frame: reload())
    console.print("[green]snapshotter running[/green]; Ctrl-C stops it", highlight=False)
    try:
        while not stop.wait(1.0):
            pass
        console.print("stopping: finishing open calls and streams…", highlight=False)
        grpc_server.stop(GRACE_SECONDS).wait()
        health.stop()
        before = _page_writes(name)
        snapshotter.close()
        written = round(_page_writes(name) - before)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        grpc_server.stop(None)
        health.stop()
        snapshotter.close()  # again only when the shutdown above failed part way
    pages = "page" if written == 1 else "pages"
    console.print(f"snapshotter stopped: {written} {pages} written on shutdown", highlight=False)
