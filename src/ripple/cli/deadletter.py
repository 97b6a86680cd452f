"""`ripple deadletter`: see the events no destination would take, and send them again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import click
import sqlalchemy as sa
from rich.table import Table

from ripple.cli.common import console, open_metabase, reason_of, safe_url, settings_of
from ripple.pipeline.queue import Queued, RetryQueue


@contextmanager
def _queue(ctx: click.Context) -> Iterator[RetryQueue]:
    metabase = open_metabase(settings_of(ctx))
    try:
        yield RetryQueue(metabase.writer)
    except sa.exc.DBAPIError as e:
        reason = reason_of(e)
        raise click.ClickException(
            f"cannot read the dead letters in the metabase at {safe_url(metabase)}: {reason}. "
            "Is it running, and migrated (`ripple db upgrade`)?"
        ) from e
    finally:
        metabase.dispose()


def _when(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _summary(entry: Queued) -> dict[str, object]:
    s3 = entry.event.get("s3", {})
    return {
        "id": entry.id,
        "destination": entry.destination,
        "event_id": entry.event_id,
        "event_name": entry.event.get("eventName"),
        "bucket": s3.get("bucket", {}).get("name"),
        "key": s3.get("object", {}).get("key"),
        "attempts": entry.attempts,
        "first_failed": _when(entry.first_failed_ns),
        "reason": entry.error,
    }


@click.group()
def deadletter() -> None:
    """Dead letters: events a destination refused for good, or that outlived its
    time-to-live or retry limit. List them, and replay them once the destination is fixed
    (or purge them)."""


@deadletter.command("list")
@click.option("--destination", default=None, help="Only this destination's dead letters.")
@click.option(
    "--limit", type=click.IntRange(1), default=100, show_default=True, help="Show at most this many"
)
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object a line, with the whole event."
)
@click.pass_context
def deadletter_list(ctx: click.Context, destination: str | None, limit: int, as_json: bool) -> None:
    """List dead letters, oldest first: destination, event, attempts and why they died."""
    with _queue(ctx) as queue:
        entries = queue.dead(destination, limit)
        total = queue.dead_count(destination)
    if as_json:
        for entry in entries:
            line = {**_summary(entry), "event": entry.event}
            click.echo(json.dumps(line, separators=(",", ":"), ensure_ascii=False))
        return
    where = f" of {destination}" if destination else ""
    if not entries:
        console.print(f"no dead letters{where}", highlight=False)
        return
    table = Table(title=f"{total} dead letters{where}", title_justify="left")
    for column in ("destination", "event", "object", "attempts", "first failed", "reason"):
        table.add_column(column, overflow="fold")
    for entry in entries:
        row = _summary(entry)
        table.add_row(
            entry.destination,
            f"{row['event_name']} {entry.event_id}",
            f"{row['bucket']}/{row['key']}",
            str(entry.attempts),
            str(row["first_failed"]),
            entry.error,
        )
    console.print(table)
    if total > len(entries):
        console.print(f"showing the oldest {len(entries)}; use --limit to see more")


@deadletter.command("replay")
@click.option("--destination", default=None, help="Only this destination's dead letters.")
@click.pass_context
def deadletter_replay(ctx: click.Context, destination: str | None) -> None:
    """Put dead letters back into their destinations' retry queues.

    A running pipeline delivers them on its next retry round (within a second), with a
    fresh time-to-live and retry count; events that fail again go back to the dead letters.
    """
    with _queue(ctx) as queue:
        replayed = queue.replay(destination)
    where = f" of {destination}" if destination else ""
    if replayed == 0:
        console.print(f"no dead letters{where} to replay", highlight=False)
    else:
        console.print(
            f"replayed {replayed} dead letters{where} into the retry queues", highlight=False
        )


@deadletter.command("purge")
@click.option("--destination", required=True, help="The destination whose dead letters to delete.")
@click.option(
    "--object",
    "object_path",
    default=None,
    metavar="BUCKET/KEY",
    help="Only the dead letters of this object (the key as written, not URL-encoded).",
)
@click.pass_context
def deadletter_purge(ctx: click.Context, destination: str, object_path: str | None) -> None:
    """Delete dead letters for good: they are not sent again.

    With `ordering = per-key` a dead letter holds its object's later events in the retry
    queue; purging it lets them go, in order.
    """
    with _queue(ctx) as queue:
        purged = queue.purge(destination, object_path)
    where = f" of {object_path}" if object_path else ""
    console.print(f"deleted {purged} dead letters of {destination}{where}", highlight=False)
