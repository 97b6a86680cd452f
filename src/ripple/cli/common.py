"""What every `ripple` command shares: the consoles, the settings, the metabase opened with
the eventing registry, and database errors turned into one-line messages."""

from __future__ import annotations

import click
import sqlalchemy as sa
from rich.console import Console

from ripple.config import Settings
from ripple.metabase import Metabase
from ripple.metabase.migrate import current_revision, upgrade
from ripple.notifications import Registry

console = Console()
errors = Console(stderr=True)


def settings_of(ctx: click.Context) -> Settings:
    settings = ctx.obj
    if not isinstance(settings, Settings):
        raise RuntimeError("no settings: a command ran outside the ripple command group")
    return settings


def open_metabase(settings: Settings, registry: Registry | None = None) -> Metabase:
    """The metabase, with eventing on for the buckets the registry names (by default, the
    static list; the gateway passes the registry it keeps current)."""
    registry = registry or Registry(settings.eventing_buckets)
    try:
        return Metabase(settings.effective_database_url, eventing=registry.is_eventing)
    except ValueError as e:
        raise click.ClickException(f"{e} (set database.url or RIPPLE_DATABASE_URL)") from e


def safe_url(db: Metabase) -> str:
    return db.url.render_as_string(hide_password=True)


def reason_of(error: sa.exc.DBAPIError) -> str:
    """The first line of what the database driver said (its messages run on for lines)."""
    lines = str(error.orig or error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def migrate(db: Metabase) -> str | None:
    try:
        upgrade(db)
    except sa.exc.OperationalError as e:
        reason = reason_of(e)
        raise click.ClickException(
            f"cannot reach the metabase at {safe_url(db)}: {reason}. "
            "Check RIPPLE_DATABASE_URL and that the database server is running."
        ) from e
    return current_revision(db)
