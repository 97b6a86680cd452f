"""`ripple snapshot replay | reconcile | compact`: reading a snapshotter's archive back,
rebuilding its index from storage, merging a writer's small pages.

Each command works on the storage and index of one snapshotter (`--name`, the embedded
`default` unless given), directly: the snapshotter's server may run meanwhile. The
commands are `replay`, `reconcile` and `compact`, mounted in the `snapshot` group.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ripple.cli.common import console, errors, settings_of
from ripple.config import ConfigError
from ripple.notifications.topics import Topic
from ripple.snapshotter.compact import CompactError, CompactReport, parse_size
from ripple.snapshotter.compact import compact as compact_pages
from ripple.snapshotter.index import Index, IndexError_, open_index
from ripple.snapshotter.reconcile import reconcile as reconcile_index
from ripple.snapshotter.replay import Replay, ReplayError, event_json, parse_time
from ripple.snapshotter.settings import SnapshotterSettings
from ripple.snapshotter.storage import Storage, StorageError, open_storage
from ripple.targets.base import Delivery, Outcome, Result, Target
from ripple.targets.destinations import push_target

__all__ = ["commands", "compact", "reconcile", "replay"]

BATCH = 100  # deliveries per publish with --to
RETRY_DELAY_S = 0.2  # before the first retry of a batch's retryable failures; doubles
SHOWN_FAILURES = 10

NAME_OPTION = click.option(
    "--name",
    default="default",
    show_default=True,
    help="The snapshotter: a [snapshotters.NAME] table of ripple.toml, or the embedded default.",
)


class Parsed(click.ParamType[int]):
    """A value `parse` turns into a number; its `ValueError` is the usage error."""

    def __init__(self, name: str, parse: Callable[[str], int]) -> None:
        self.name = name
        self.parse = parse

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int):
            return value
        try:
            return self.parse(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)


TIME = Parsed("TIME", parse_time)
SIZE = Parsed("SIZE", parse_size)


def say(text: str, *, error: bool = False) -> None:
    """One line as it is (no markup, no wrapping): to stdout, or stderr with `error`."""
    (errors if error else console).print(text, highlight=False, markup=False, soft_wrap=True)


@dataclass
class Archive:
    settings: SnapshotterSettings
    storage: Storage
    index: Index


@contextmanager
def opened(ctx: click.Context, name: str) -> Iterator[Archive]:
    """The snapshotter's storage and index, closed at the end; errors as ClickException."""
    try:
        settings = settings_of(ctx).snapshotter(name)
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
    try:
        storage = open_storage(settings)
    except (StorageError, ValueError) as e:
        raise click.ClickException(
            f"cannot open the storage of snapshotter {name!r}: {e} "
            f"(check the storage and s3-* keys of [snapshotters.{name}])"
        ) from e
    try:
        index = open_index(settings)
    except IndexError_ as e:
        storage.close()
        raise click.ClickException(
            f"cannot open the index of snapshotter {name!r}: {e} "
            f"(check index and index-url of [snapshotters.{name}], and that its server runs)"
        ) from e
    try:
        yield Archive(settings, storage, index)
    except (StorageError, IndexError_) as e:
        raise click.ClickException(f"snapshotter {name!r}: {e}") from e
    finally:
        index.close()
        storage.close()


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=errors,
        transient=True,
    )


@click.command("replay")
@NAME_OPTION
@click.option("--writer", required=True, help="The writer (publish topic) whose events to replay.")
@click.option("--since", type=TIME, default=None, help="First time included (formats above).")
@click.option("--until", type=TIME, default=None, help="Last time included (formats above).")
@click.option(
    "--to",
    "destination",
    default=None,
    metavar="DESTINATION",
    help="Deliver the events to this push endpoint instead of printing them: "
    "http(s)://…, redis://…, amqp://…, nats://…, mqtt://…, pubsub://projects/P/topics/T.",
)
@click.option(
    "--format",
    "output",
    type=click.Choice(["json", "raw"]),
    default=None,
    help="How to print: json (default: one JSON object per line) or raw (each payload as "
    "it is, then a newline). Not with --to.",
)
@click.option(
    "--retries",
    type=click.IntRange(0, 100),
    default=3,
    show_default=True,
    help="With --to: times a delivery that failed for a passing reason is tried again.",
)
@click.pass_context
def replay(
    ctx: click.Context,
    name: str,
    writer: str,
    since: int | None,
    until: int | None,
    destination: str | None,
    output: str | None,
    retries: int,
) -> None:
    """Replay a writer's archived events, in the order they were archived.

    Times (--since, --until; both included, both optional) are ISO-8601
    (2025-10-09T12:00:00Z; UTC if no zone), a date (2025-10-09, its midnight UTC), Unix
    milliseconds (1696800000000), now, or a duration ago (-30m, -1h, -2d).

    Without --to each event is printed as a JSON line: event_id, timestamp (Unix ms),
    attributes, and payload (text), or payload_base64 if it is not UTF-8.

    With --to the events are delivered as the pipeline delivers S3 events: each payload
    is sent as one record of {"Records": [payload]}, so payloads should be S3 event records
    (JSON). Deliveries that fail are listed, and the command exits with status 1.

    \b
    Examples:
      ripple snapshot replay --writer orders --since 2025-10-09 --until 2025-10-10
      ripple snapshot replay --writer orders --since -1h --format raw > payloads.txt
      ripple snapshot replay --writer photos --to http://127.0.0.1:8080/hook
    """
    if since is not None and until is not None and since > until:
        raise click.BadParameter("--since is after --until", param_hint="--since")
    if destination is not None and output is not None:
        raise click.UsageError("--format is for printing; it does nothing with --to")
    target = _target(destination) if destination is not None else None
    with opened(ctx, name) as archive:
        try:
            events = Replay(archive.index, archive.storage, writer, since, until)
            if not events.entries and writer not in archive.index.writers():
                known = archive.index.writers()
                listed = ", ".join(map(repr, known[:20])) + (" …" if len(known) > 20 else "")
                raise click.ClickException(
                    f"writer {writer!r} has no pages in snapshotter {name!r}; "
                    f"writers: {listed or 'none yet'}"
                )
            if target is None:
                _print(events, output or "json")
            else:
                _deliver(events, target, destination or "", retries)
        except ReplayError as e:
            raise click.ClickException(str(e)) from e


def _target(destination: str) -> Target:
    try:
        target = push_target(Topic("replay", destination, {}))
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--to") from e
    if target is None:
        raise click.BadParameter(
            f"{destination!r} is not a push endpoint (use http://…, redis://…, amqp://…, "
            "nats://…, mqtt://… or pubsub://projects/P/topics/T)",
            param_hint="--to",
        )
    return target


def _print(events: Replay, output: str) -> None:
    out = sys.stdout.buffer
    with _progress() as progress:
        task = progress.add_task(f"replaying {events.writer_id}", total=events.total_events)
        for event in events:
            out.write(event_json(event) if output == "json" else event.payload + b"\n")
            progress.update(task, completed=events.events_seen)
        progress.update(task, completed=events.events_seen)
    out.flush()


def _deliver(events: Replay, target: Target, destination: str, retries: int) -> None:
    try:
        target.open()
    except Exception as e:
        raise click.ClickException(f"cannot open {destination}: {e}") from e
    delivered = 0
    failed: list[tuple[str, str]] = []
    try:
        with _progress() as progress:
            task = progress.add_task(f"to {destination}", total=events.total_events)
            batch: list[Delivery] = []
            for event in events:
                batch.append(
                    Delivery(
                        event_id=event.event_id,
                        message=event.payload,
                        attributes=dict(event.attributes),
                    )
                )
                if len(batch) >= BATCH:
                    delivered += _send(target, batch, retries, failed)
                    batch = []
                    progress.update(task, completed=events.events_seen)
            if batch:
                delivered += _send(target, batch, retries, failed)
            progress.update(task, completed=events.events_seen)
    finally:
        target.close()
    say(f"{delivered} events delivered to {destination}")
    if failed:
        for event_id, error in failed[:SHOWN_FAILURES]:
            say(f"not delivered: {event_id}: {error}", error=True)
        if len(failed) > SHOWN_FAILURES:
            say(f"… and {len(failed) - SHOWN_FAILURES} more", error=True)
        raise click.ClickException(
            f"{len(failed)} of {delivered + len(failed)} events not delivered"
        )


def _send(
    target: Target, batch: Sequence[Delivery], retries: int, failed: list[tuple[str, str]]
) -> int:
    """Publish a batch, retrying what failed for a passing reason; how many went."""
    before = len(failed)
    pending = list(batch)
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(RETRY_DELAY_S * 2 ** (attempt - 1))
        results: list[Result] = target.publish(pending)
        last = attempt == retries
        again = []
        for delivery, result in zip(pending, results, strict=True):
            if result.outcome is Outcome.RETRY and not last:
                again.append(delivery)
            elif not result.ok:
                failed.append((delivery.event_id, result.error or result.outcome.value))
        if not again:
            break
        pending = again
    return len(batch) - (len(failed) - before)


@click.command("reconcile")
@NAME_OPTION
@click.option("--prefix", default="", help="Only objects whose key starts with this.")
@click.pass_context
def reconcile(ctx: click.Context, name: str, prefix: str) -> None:
    """Add to the index every page in storage it does not list.

    For an index that was down while pages were written, or was lost. Each object the
    index lacks is read and listed from its own metadata; objects that are not pages are
    reported and left alone, and so are pages whose events a listed (compacted) page
    already holds. Running it again adds nothing.

    \b
    Examples:
      ripple snapshot reconcile
      ripple snapshot reconcile --name audit --prefix orders/
    """
    with opened(ctx, name) as archive:
        report = reconcile_index(archive.storage, archive.index, prefix)
    say(
        f"scanned {report.scanned} objects: {report.added} added to the index, "
        f"{report.already} already listed, {len(report.superseded)} superseded by compacted "
        f"pages, {len(report.unreadable)} unreadable"
    )
    for key in report.added_keys:
        say(f"added: {key}")
    for key in report.superseded:
        say(f"superseded (not listed): {key}")
    for key in report.unreadable:
        say(f"unreadable: {key}: {report.reasons[key]}")


@click.command("compact")
@NAME_OPTION
@click.option("--writer", required=True, help="The writer whose pages to merge.")
@click.option(
    "--below",
    type=SIZE,
    required=True,
    help="Merge pages stored in fewer bytes than this (1MiB, 512KiB, 10MB, 1000).",
)
@click.option(
    "--target",
    type=SIZE,
    default=None,
    help="Largest merged page, uncompressed (default: the snapshotter's max-size-bytes).",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds between swapping the index entries and deleting the old pages, for "
    "replays that listed them just before.",
)
@click.pass_context
def compact(
    ctx: click.Context, name: str, writer: str, below: int, target: int | None, grace: float
) -> None:
    """Merge a writer's small pages into fewer, larger ones.

    Runs of consecutive pages (in replay order) stored in fewer than --below bytes become
    pages of up to --target bytes, uncompressed; a large page ends a run. Replay returns
    the same events in the same order afterwards. Each merged page is stored, then swapped
    for its pages in the index at once; the old pages are deleted --grace seconds later.
    Run one compaction per writer at a time.

    \b
    Examples:
      ripple snapshot compact --writer orders --below 1MiB
      ripple snapshot compact --writer orders --below 64KiB --target 4MiB --grace 60
    """
    with opened(ctx, name) as archive:
        if grace > 0:
            say(f"old pages are deleted {grace:g} s after the swap", error=True)
        try:
            settings, storage, index = archive.settings, archive.storage, archive.index
            report = compact_pages(settings, storage, index, writer, below, target, grace)
        except CompactError as e:
            _print_compaction(writer, e.report)
            raise click.ClickException(str(e)) from e
    _print_compaction(writer, report)


def _print_compaction(writer: str, report: CompactReport) -> None:
    say(
        f"writer {writer}: {report.pages_merged} pages merged into {report.pages_written} "
        f"({report.groups} groups), {report.bytes_before} bytes before, "
        f"{report.bytes_after} after; {report.deleted} old pages deleted"
    )
    for key in report.left_behind:
        say(f"not deleted (superseded, safe to delete): {key}", error=True)


commands = (replay, reconcile, compact)
