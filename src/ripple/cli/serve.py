"""`ripple serve`: the S3 gateway alone, on s3.address (RIPPLE_S3_ADDRESS), in this process
or in `--workers` processes of its own."""

from __future__ import annotations

import signal
import time

import click
from rich.table import Table

from ripple.cli.common import console, migrate, open_metabase, safe_url, settings_of
from ripple.config import Settings
from ripple.gateway.processes import GatewayProcesses
from ripple.gateway.server import (
    Gateway,
    GatewayError,
    bind,
    build_services,
    certificate,
    check_plain_http,
)
from ripple.notifications import Registry


@click.command()
@click.option(
    "--address",
    default=None,
    metavar="HOST:PORT",
    help="Where to listen (default: s3.address / RIPPLE_S3_ADDRESS, 127.0.0.1:9000).",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 1024),
    default=None,
    help="Gateway processes on the address (default: s3.workers / RIPPLE_S3_WORKERS, "
    "or 1 when that is unset). "
    "With more than 1 each is a process of its own, and one that dies is replaced.",
)
@click.pass_context
def serve(ctx: click.Context, address: str | None, workers: int | None) -> None:
    """Serve the S3 API until Ctrl-C.

    Migrates the metabase first. Clients sign requests with a key from
    `ripple user create NAME`; path-style addressing always works, and virtual-hosted-style
    (BUCKET.DOMAIN) when s3.domain (RIPPLE_S3_DOMAIN) is set. Object data is kept under
    the data directory. Health: /_ripple/health; Prometheus metrics: /_ripple/metrics.
    With s3.tls-cert and s3.tls-key (RIPPLE_S3_TLS_CERT, RIPPLE_S3_TLS_KEY) it serves
    HTTPS; SIGHUP to this process reloads the certificate.
    """
    settings = settings_of(ctx)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    registry = Registry(settings.eventing_buckets)  # kept current by the gateway
    db = open_metabase(settings, registry)
    migrate(db)
    workers = workers or settings.gateway_workers(default=1)
    try:
        check_plain_http(settings, address or settings.s3_address)
        sock = bind(address or settings.s3_address)
        if workers > 1:
            db.dispose()  # each process opens its own
            serve_in_processes(settings, GatewayProcesses(settings, sock, workers), safe_url(db))
            return
        gateway = Gateway(build_services(settings, db, registry), sock, tls=certificate(settings))
    except GatewayError as e:
        db.dispose()
        raise click.ClickException(str(e)) from e
    print_table(settings, gateway.url, safe_url(db))
    try:
        gateway.run()
    except KeyboardInterrupt:
        # uvicorn shut down cleanly on SIGINT, then raised it again for us
        pass
    finally:
        db.dispose()
    console.print("gateway stopped", highlight=False)


def print_table(settings: Settings, url: str, metabase: str, workers: int = 1) -> None:
    table = Table(title="ripple serve", show_header=False, title_justify="left")
    table.add_row("S3 endpoint", url)
    table.add_row("metabase", metabase)
    table.add_row("object data", str((settings.data_dir / "objects").resolve()))
    if workers > 1:
        table.add_row("gateway processes", str(workers))
    console.print(table)
    console.print("[green]gateway running[/green]; Ctrl-C stops it", highlight=False)


def serve_in_processes(settings: Settings, processes: GatewayProcesses, metabase: str) -> None:
    """Run the gateway processes until Ctrl-C or SIGTERM (to this process: a service
    manager's stop), then stop them all."""
    stop = False

    def stopping(_signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    previous = signal.signal(signal.SIGTERM, stopping)
    hangup = signal.signal(signal.SIGHUP, lambda _signum, _frame: processes.reload())
    try:
        processes.start()
    except GatewayError as e:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGHUP, hangup)
        raise click.ClickException(str(e)) from e
    try:
        print_table(settings, processes.url, metabase, processes.workers)
        while not stop and processes.alive():
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass  # Ctrl-C reached the processes too: they are ending
    finally:
        processes.stop()
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGHUP, hangup)
    console.print("gateway stopped", highlight=False)
