"""`ripple serve`: the S3 gateway alone, on s3.address (RIPPLE_S3_ADDRESS)."""

from __future__ import annotations

import click
from rich.table import Table

from ripple.cli.common import console, migrate, open_metabase, safe_url, settings_of
from ripple.gateway.server import Gateway, GatewayError, bind, build_services
from ripple.notifications import Registry


@click.command()
@click.option(
    "--address",
    default=None,
    metavar="HOST:PORT",
    help="Where to listen (default: s3.address / RIPPLE_S3_ADDRESS, 127.0.0.1:9000).",
)
@click.pass_context
def serve(ctx: click.Context, address: str | None) -> None:
    """Serve the S3 API until Ctrl-C.

    Migrates the metabase first. Clients sign requests with a key from
    `ripple user create NAME`; path-style addressing always works, and virtual-hosted-style
    (BUCKET.DOMAIN) when s3.domain (RIPPLE_S3_DOMAIN) is set. Object data is kept under
    the data directory. Health: /_ripple/health; Prometheus metrics: /_ripple/metrics.
    """
    settings = settings_of(ctx)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    registry = Registry.from_settings(settings)  # kept current by the gateway
    db = open_metabase(settings, registry)
    migrate(db)
    try:
        gateway = Gateway(
            build_services(settings, db, registry), bind(address or settings.s3_address)
        )
    except GatewayError as e:
        db.dispose()
        raise click.ClickException(str(e)) from e
    table = Table(title="ripple serve", show_header=False, title_justify="left")
    table.add_row("S3 endpoint", gateway.url)
    table.add_row("metabase", safe_url(db))
    table.add_row("object data", str((settings.data_dir / "objects").resolve()))
    console.print(table)
    console.print("[green]gateway running[/green]; Ctrl-C stops it", highlight=False)
    try:
        gateway.run()
    except KeyboardInterrupt:
        # uvicorn shut down cleanly on SIGINT, then raised it again for us
        pass
    finally:
        db.dispose()
    console.print("gateway stopped", highlight=False)
