"""`ripple db`: migrate the metabase schema and show its revision."""

from __future__ import annotations

import sys

import click
import sqlalchemy as sa

from ripple.cli.common import console, errors, migrate, open_metabase, safe_url, settings_of
from ripple.metabase.migrate import current_revision, head_revision


@click.group()
def db() -> None:
    """The metabase schema: migrate it and see its revision."""


@db.command("upgrade")
@click.pass_context
def db_upgrade(ctx: click.Context) -> None:
    """Migrate the metabase to the newest schema revision (Alembic)."""
    settings = settings_of(ctx)
    if not settings.database_url:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    metabase = open_metabase(settings)
    try:
        revision = migrate(metabase)
    finally:
        metabase.dispose()
    console.print(f"metabase {safe_url(metabase)} is at revision {revision}")


@db.command("status")
@click.pass_context
def db_status(ctx: click.Context) -> None:
    """Show the metabase's schema revision and the newest one this ripple knows."""
    metabase = open_metabase(settings_of(ctx))
    try:
        current = current_revision(metabase)
    except sa.exc.OperationalError as e:
        raise click.ClickException(f"cannot reach the metabase at {safe_url(metabase)}") from e
    finally:
        metabase.dispose()
    head = head_revision()
    console.print(f"metabase {safe_url(metabase)}: revision {current}, newest {head}")
    if current != head:
        errors.print("run `ripple db upgrade` to migrate it")
        sys.exit(1)
