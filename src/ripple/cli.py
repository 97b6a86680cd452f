"""The `ripple` command: run the main job, migrate the metabase, inspect what is there."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import sqlalchemy as sa
from rich.console import Console
from rich.table import Table

from ripple import __version__
from ripple.config import ConfigError, Settings, load_settings
from ripple.metabase import Metabase
from ripple.metabase.migrate import current_revision, head_revision, upgrade
from ripple.metabase.schema import buckets, objects, projects

console = Console()
errors = Console(stderr=True)


def _settings(ctx: click.Context) -> Settings:
    settings = ctx.obj
    assert isinstance(settings, Settings)
    return settings


def _open(settings: Settings) -> Metabase:
    try:
        return Metabase(settings.effective_database_url)
    except ValueError as e:
        raise click.ClickException(f"{e} (set database.url or RIPPLE_DATABASE_URL)") from e


def _safe_url(db: Metabase) -> str:
    return db.url.render_as_string(hide_password=True)


def _migrate(db: Metabase) -> str | None:
    try:
        upgrade(db)
    except sa.exc.OperationalError as e:
        reason = str(e.orig).strip().splitlines()[0] if e.orig else str(e)
        raise click.ClickException(
            f"cannot reach the metabase at {_safe_url(db)}: {reason}. "
            "Check RIPPLE_DATABASE_URL and that the database server is running."
        ) from e
    return current_revision(db)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ripple")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Configuration file (default: ./ripple.toml if present). RIPPLE_* variables override it.",
)
@click.pass_context
def cli(ctx: click.Context, config_file: Path | None) -> None:
    """ripple: S3-compatible bucket event notifications.

    Objects written through ripple are recorded in its metabase (SQLite by default,
    PostgreSQL with RIPPLE_DATABASE_URL); every change in a bucket with eventing becomes
    an S3 event message delivered to the bucket's destinations.

    Start with `ripple up`, which needs no configuration.
    """
    try:
        ctx.obj = load_settings(config_file)
    except ConfigError as e:
        raise click.ClickException(str(e)) from e


@cli.command()
@click.pass_context
def up(ctx: click.Context) -> None:
    """Run ripple's main job on the embedded defaults.

    Creates the data directory, migrates the metabase to the newest schema and reports
    what it holds. Safe to run again: migrations that already ran are skipped.
    """
    settings = _settings(ctx)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    db = _open(settings)
    try:
        revision = _migrate(db)
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
    table.add_row("metabase", _safe_url(db))
    table.add_row("schema revision", str(revision))
    for name, count in counts.items():
        table.add_row(name, str(count))
    console.print(table)
    console.print("[green]metabase ready[/green]")


@cli.group()
def db() -> None:
    """The metabase schema: migrate it and see its revision."""


@db.command("upgrade")
@click.pass_context
def db_upgrade(ctx: click.Context) -> None:
    """Migrate the metabase to the newest schema revision (Alembic)."""
    settings = _settings(ctx)
    if not settings.database_url:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    metabase = _open(settings)
    try:
        revision = _migrate(metabase)
    finally:
        metabase.dispose()
    console.print(f"metabase {_safe_url(metabase)} is at revision {revision}")


@db.command("status")
@click.pass_context
def db_status(ctx: click.Context) -> None:
    """Show the metabase's schema revision and the newest one this ripple knows."""
    metabase = _open(_settings(ctx))
    try:
        current = current_revision(metabase)
    except sa.exc.OperationalError as e:
        raise click.ClickException(f"cannot reach the metabase at {_safe_url(metabase)}") from e
    finally:
        metabase.dispose()
    head = head_revision()
    console.print(f"metabase {_safe_url(metabase)}: revision {current}, newest {head}")
    if current != head:
        errors.print("run `ripple db upgrade` to migrate it")
        sys.exit(1)


def main() -> None:
    cli(prog_name="ripple")
