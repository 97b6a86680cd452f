"""`ripple changestream`: print change records (or their S3 events) and prune old ones."""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Iterable
from typing import Any

import click
import sqlalchemy as sa

from ripple.changestream.definition import ChangeStreamError
from ripple.changestream.reader import DEFAULT_STREAM, ChangeStreamReader
from ripple.changestream.tail import parse_since, transactions
from ripple.cli.common import console, open_metabase, safe_url, settings_of
from ripple.config import Settings
from ripple.events import message, s3_events
from ripple.metabase import Metabase
from ripple.metabase.projects import ProjectOwners


@click.group()
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
    settings = settings_of(ctx)
    metabase = open_metabase(settings)
    reader = ChangeStreamReader(metabase.engine, stream, write_engine=metabase.writer)
    try:
        _tail(metabase, reader, settings, since, partitions, events, follow, consumer, heartbeat)
    except ChangeStreamError as e:
        raise click.ClickException(str(e)) from e
    except sa.exc.OperationalError as e:
        raise click.ClickException(f"cannot read the metabase at {safe_url(metabase)}") from e
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
    event_settings = settings.event_settings
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
    metabase = open_metabase(settings_of(ctx))
    try:
        reader = ChangeStreamReader(metabase.engine, stream, write_engine=metabase.writer)
        deleted = reader.prune()
    except ChangeStreamError as e:
        raise click.ClickException(str(e)) from e
    finally:
        metabase.dispose()
    console.print(f"pruned {deleted} change records of {stream}")
