"""The `ripple` command: run the main job, migrate the metabase, inspect what is there."""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import sqlalchemy as sa
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from ripple import __version__
from ripple.changestream.definition import ChangeStreamError
from ripple.changestream.reader import DEFAULT_STREAM, ChangeStreamReader
from ripple.changestream.tail import parse_since, transactions
from ripple.config import ConfigError, Settings, load_settings
from ripple.events import EventSettings, message, s3_events
from ripple.metabase import Metabase
from ripple.metabase.expire import expire_objects
from ripple.metabase.migrate import current_revision, head_revision, upgrade
from ripple.metabase.projects import ProjectOwners
from ripple.metabase.schema import buckets, objects, projects
from ripple.notifications import Registry
from ripple.subscriptions import (
    DEFAULT_MAX_ENTRIES,
    DEFAULT_RETENTION_DAYS,
    FORMATS,
    NoSuchSubscription,
    SubscriptionStore,
)

console = Console()
errors = Console(stderr=True)


def _settings(ctx: click.Context) -> Settings:
    settings = ctx.obj
    assert isinstance(settings, Settings)
    return settings


def _open(settings: Settings) -> Metabase:
    """The metabase, with eventing on for the buckets the registry names."""
    registry = Registry.from_settings(settings)
    try:
        return Metabase(settings.effective_database_url, eventing=registry.is_eventing)
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


@cli.group()
def changestream() -> None:
    """The change stream: read its records, prune old ones."""


@changestream.command("tail")
@click.option(
    "--since",
    default=None,
    help="Start at this time: ISO-8601 (2026-11-21T10:00:00Z) or a duration ago (15m, 2h, "
    "1d). Default: new records only when following, every retained record otherwise.",
)
@click.option(
    "--partition",
    "partitions",
    type=int,
    multiple=True,
    help="Read only this partition (repeatable). Default: all.",
)
@click.option("--events", is_flag=True, help="Print S3 event messages instead of records.")
@click.option(
    "--follow/--no-follow",
    default=True,
    help="Keep printing records as they commit (default), or stop at the end.",
)
@click.option(
    "--consumer",
    default=None,
    help="Resume after this consumer's saved positions and save them as records are printed.",
)
@click.option("--stream", default=DEFAULT_STREAM, show_default=True, help="Change stream name.")
@click.option(
    "--heartbeat",
    type=float,
    default=2.0,
    show_default=True,
    help="Seconds between heartbeat records of an idle partition (0: none).",
)
@click.pass_context
def changestream_tail(
    ctx: click.Context,
    since: str | None,
    partitions: tuple[int, ...],
    events: bool,
    follow: bool,
    consumer: str | None,
    stream: str,
    heartbeat: float,
) -> None:
    """Print change records as JSON lines, one per record (or event with --events).

    Records of a partition come in commit order; a heartbeat line
    {"heartbeat_record": {"timestamp": ...}} says an idle partition has nothing older.
    """
    settings = _settings(ctx)
    metabase = _open(settings)
    reader = ChangeStreamReader(metabase.engine, stream, write_engine=metabase.writer)
    try:
        _tail(metabase, reader, settings, since, partitions, events, follow, consumer, heartbeat)
    except ChangeStreamError as e:
        raise click.ClickException(str(e)) from e
    except sa.exc.OperationalError as e:
        raise click.ClickException(f"cannot read the metabase at {_safe_url(metabase)}") from e
    finally:
        metabase.dispose()


def _tail(
    metabase: Metabase,
    reader: ChangeStreamReader,
    settings: Settings,
    since: str | None,
    partitions: tuple[int, ...],
    events: bool,
    follow: bool,
    consumer: str | None,
    heartbeat: float,
) -> None:
    count = reader.partitions()
    chosen = list(partitions) or list(range(count))
    for p in chosen:
        if not 0 <= p < count:
            raise ChangeStreamError(f"--partition {p}: the stream has partitions 0 to {count - 1}")
    saved = reader.offsets(consumer) if consumer else {}
    since_ns = None if since is None else parse_since(since)
    after: dict[int, int] = {}
    for p in chosen:
        # where this partition starts: after --since, never before what the consumer saw
        if since_ns is not None:
            after[p] = max(reader.start_after(p, since_ns), saved.get(p, 0))
        elif p in saved:
            after[p] = saved[p]
        else:
            after[p] = reader.end(p) if follow else 0
    if follow:
        records: Iterable[dict[str, Any]] = reader.follow(
            chosen, after, heartbeat_seconds=heartbeat
        )
    else:
        records = itertools.chain.from_iterable(reader.drain(p, after[p]) for p in chosen)
    groups = transactions(records)
    owners = ProjectOwners(metabase)
    event_settings = EventSettings(region=settings.region)
    for group in groups:
        if events and "heartbeat_record" not in group[0]:
            lines = [
                message([e])
                for e in s3_events(group, owners=owners.public_id, settings=event_settings)
            ]
        else:
            lines = group
        for line in lines:
            click.echo(json.dumps(line, separators=(",", ":")))
        sys.stdout.flush()
        last = group[-1]
        if consumer and "position" in last:
            reader.commit_offsets(consumer, {last["partition"]: last["position"]})


@changestream.command("prune")
@click.option("--stream", default=DEFAULT_STREAM, show_default=True, help="Change stream name.")
@click.pass_context
def changestream_prune(ctx: click.Context, stream: str) -> None:
    """Delete records older than the stream's retention period (1 to 30 days)."""
    metabase = _open(_settings(ctx))
    try:
        reader = ChangeStreamReader(metabase.engine, stream, write_engine=metabase.writer)
        deleted = reader.prune()
    except ChangeStreamError as e:
        raise click.ClickException(str(e)) from e
    finally:
        metabase.dispose()
    console.print(f"pruned {deleted} change records of {stream}")


@cli.group("metabase")
def metabase_group() -> None:
    """Jobs over the metabase's objects."""


@metabase_group.command("expire")
@click.option("--batch", type=click.IntRange(1, 10_000), default=1000, show_default=True)
@click.pass_context
def metabase_expire(ctx: click.Context, batch: int) -> None:
    """Delete objects whose expiry time (TTL) has passed.

    Runs as system transactions tagged ttl-delete: the bucket_eventing change stream
    leaves them out (exclude_ttl_deletes). Versions under object lock are kept.
    """
    metabase = _open(_settings(ctx))
    try:
        with Progress(console=errors, transient=True) as progress:
            task = progress.add_task("expiring objects", total=None)
            result = expire_objects(
                metabase, batch=batch, progress=lambda n: progress.advance(task, n)
            )
    finally:
        metabase.dispose()
    console.print(f"expired {result.deleted} objects; kept {result.kept_locked} under object lock")


@cli.group()
def subscription() -> None:
    """Pull subscriptions: create them, pull their events, acknowledge them."""


@contextmanager
def _subscriptions(ctx: click.Context) -> Iterator[SubscriptionStore]:
    """The subscription store of the configured metabase; its errors as one-line messages."""
    metabase = _open(_settings(ctx))
    try:
        yield SubscriptionStore(metabase)
    except (NoSuchSubscription, ValueError) as e:
        raise click.ClickException(str(e.args[0] if e.args else e)) from e
    except sa.exc.DBAPIError as e:
        reason = str(e.orig).strip().splitlines()[0] if e.orig else str(e)
        raise click.ClickException(
            f"cannot use the subscriptions in the metabase at {_safe_url(metabase)}: {reason}. "
            "Is it running, and migrated (`ripple db upgrade`)?"
        ) from e
    finally:
        metabase.dispose()


@subscription.command("create")
@click.argument("name")
@click.option("--topic", required=True, help="The topic whose events the subscription keeps.")
@click.option(
    "--format",
    "event_format",
    type=click.Choice(FORMATS),
    default="s3",
    show_default=True,
    help="Pull S3 event records, or the compact form (OBJECT_CREATE / OBJECT_DELETE).",
)
@click.option(
    "--retention-days",
    type=int,
    default=DEFAULT_RETENTION_DAYS,
    show_default=True,
    help="Days an event that was not acknowledged is kept.",
)
@click.pass_context
def subscription_create(
    ctx: click.Context, name: str, topic: str, event_format: str, retention_days: int
) -> None:
    """Create the subscription NAME to a topic (again: change its format and retention)."""
    with _subscriptions(ctx) as store:
        made = store.create(name, topic, format=event_format, events_retention_days=retention_days)
    console.print(
        f"subscription {made.name} to topic {made.topic}: format {made.format}, "
        f"events kept {made.events_retention_days} days",
        highlight=False,
    )


@subscription.command("list")
@click.option("--topic", default=None, help="Only the subscriptions of this topic.")
@click.pass_context
def subscription_list(ctx: click.Context, topic: str | None) -> None:
    """List the subscriptions, one JSON object a line."""
    with _subscriptions(ctx) as store:
        found = store.list(topic)
    for sub in found:
        click.echo(
            json.dumps(
                {
                    "name": sub.name,
                    "topic": sub.topic,
                    "format": sub.format,
                    "events_retention_days": sub.events_retention_days,
                },
                separators=(",", ":"),
            )
        )


@subscription.command("pull")
@click.argument("name")
@click.option("--marker", default=None, help="Start after this marker (a pull's next_marker).")
@click.option(
    "--max-entries",
    type=int,
    default=DEFAULT_MAX_ENTRIES,
    show_default=True,
    help="At most this many events (1 to 1000).",
)
@click.pass_context
def subscription_pull(ctx: click.Context, name: str, marker: str | None, max_entries: int) -> None:
    """Print the subscription's next unacknowledged events as one JSON object:
    {"next_marker", "is_truncated", "Records" (format s3) or "events" (format compact)}."""
    with _subscriptions(ctx) as store:
        page = store.pull(name, marker, max_entries)
    click.echo(json.dumps(page.to_dict(), separators=(",", ":"), ensure_ascii=False))


@subscription.command("ack")
@click.argument("name")
@click.argument("event_ids", metavar="EVENT_ID...", nargs=-1, required=True)
@click.pass_context
def subscription_ack(ctx: click.Context, name: str, event_ids: tuple[str, ...]) -> None:
    """Acknowledge events of the subscription by their ids, so they are not pulled again."""
    with _subscriptions(ctx) as store:
        unknown = [event_id for event_id in event_ids if not store.ack(name, event_id)]
    acked = len(event_ids) - len(unknown)
    if unknown:
        raise click.ClickException(
            f"acknowledged {acked} of {len(event_ids)} events; subscription {name} has no "
            f"unacknowledged event {', '.join(map(repr, unknown))}"
        )
    console.print(f"acknowledged {acked} events", highlight=False)


@subscription.command("delete")
@click.argument("name")
@click.pass_context
def subscription_delete(ctx: click.Context, name: str) -> None:
    """Delete the subscription and the events it holds."""
    with _subscriptions(ctx) as store:
        dropped = store.delete(name)
    console.print(f"deleted subscription {name} and its {dropped} events", highlight=False)


@subscription.command("expire")
@click.pass_context
def subscription_expire(ctx: click.Context) -> None:
    """Remove the events older than their subscription's retention."""
    with _subscriptions(ctx) as store:
        removed = store.expire()
    console.print(f"expired {removed} events", highlight=False)


def main() -> None:
    cli(prog_name="ripple")
