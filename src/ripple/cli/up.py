"""`ripple up`: the main job on the embedded defaults: migrate, then run the pipeline."""

from __future__ import annotations

import click
import sqlalchemy as sa
from rich.table import Table

from ripple.cli.common import migrate, open_metabase, settings_of
from ripple.cli.pipeline import run_pipeline
from ripple.metabase.schema import buckets, objects, projects

DEFAULT_METRICS_ADDRESS = "127.0.0.1:9464"


@click.command()
@click.pass_context
def up(ctx: click.Context) -> None:
    """Run ripple's main job on the embedded defaults, until Ctrl-C.

    Creates the data directory, migrates the metabase to the newest schema (migrations
    that already ran are skipped), prints where everything is, and runs the eventing
    pipeline. Prometheus metrics are served on metrics.address (RIPPLE_METRICS_ADDRESS),
    127.0.0.1:9464 by default.
    """
    settings = settings_of(ctx)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    db = open_metabase(settings)
    try:
        revision = migrate(db)
        with db.read() as conn:
            counts = {
                name: conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
                for name, table in (
                    ("projects", projects),
                    ("buckets", buckets),
                    ("objects", objects),
                )
            }
    finally:
        db.dispose()
    table = Table(title="ripple", show_header=False, title_justify="left")
    table.add_row("data directory", str(settings.data_dir.resolve()))
    table.add_row("schema revision", str(revision))
    for name, count in counts.items():
        table.add_row(name, str(count))
    run_pipeline(
        settings,
        metrics_address=settings.metrics_address or DEFAULT_METRICS_ADDRESS,
        table=table,
    )
