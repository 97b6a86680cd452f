"""`ripple up`: the main job on the embedded defaults."""

from __future__ import annotations

import click
import sqlalchemy as sa
from rich.table import Table

from ripple.cli.common import console, migrate, open_metabase, safe_url, settings_of
from ripple.metabase.schema import buckets, objects, projects


@click.command()
@click.pass_context
def up(ctx: click.Context) -> None:
    """Run ripple's main job on the embedded defaults.

    Creates the data directory, migrates the metabase to the newest schema and reports
    what it holds. Safe to run again: migrations that already ran are skipped.
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
    table.add_row("metabase", safe_url(db))
    table.add_row("schema revision", str(revision))
    for name, count in counts.items():
        table.add_row(name, str(count))
    console.print(table)
    console.print("[green]metabase ready[/green]")
