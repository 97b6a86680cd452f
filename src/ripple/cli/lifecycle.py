"""`ripple lifecycle run`: apply the buckets' lifecycle rules now; and the schedule that
`ripple up` keeps (every `lifecycle.interval` seconds, on a thread).

Both free the object data of what they delete (data files of deleted versions, parts of
aborted uploads) under the data directory, after each batch commits, as the gateway does;
what a crash leaves behind is `ripple data gc`'s. Both count the rules a run skips because
they fail (or no longer read) in `ripple_lifecycle_rule_failures_total{reason}`, which
`ripple up` serves with the pipeline's metrics on metrics.address; the log names the bucket
and rule.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import click
from prometheus_client import Counter
from rich.progress import Progress

from ripple.cli.common import console, errors, open_metabase, settings_of
from ripple.cli.schedule import Schedule
from ripple.config import Settings
from ripple.gateway.data import ObjectData
from ripple.metabase import Metabase, Object, Status
from ripple.metabase.buckets import bucket_owner
from ripple.metabase.lifecycle_run import (
    DEFAULT_BATCH,
    FAILURE_REASONS,
    LifecycleResult,
    Removed,
    run_lifecycle,
)
from ripple.metabase.types import BucketLocation
from ripple.notifications import Registry
from ripple.notifications.store import EventingStore
from ripple.notifications.watcher import ConfigWatcher

log = logging.getLogger("ripple.lifecycle")

# in the default registry, which `ripple up` serves (the pipeline's metrics endpoint); a
# label per reason only: the bucket and rule are in the log, not in a series of their own
RULE_FAILURES = Counter(
    "ripple_lifecycle_rule_failures",
    "Lifecycle rules a run skipped because they failed or no longer read, by reason "
    "(invalid, bucket_deleted, error); the log names the bucket and rule",
    ["reason"],
)
for _reason in FAILURE_REASONS:
    RULE_FAILURES.labels(_reason)  # each series at 0 from the start


def count_failure(reason: str) -> None:
    RULE_FAILURES.labels(reason).inc()


def free_data(data: ObjectData) -> Removed:
    """What frees the data of rows a lifecycle batch deleted."""

    def free(rows: list[Object]) -> None:
        data.remove(r.stream_id for r in rows if r.status is not Status.PENDING)
        for row in rows:
            if row.status is Status.PENDING:
                data.remove_parts(row.stream_id)

    return free


def summary(result: LifecycleResult) -> str:
    return (
        f"lifecycle: expired {result.expired} objects, created {result.delete_markers_created} "
        f"delete markers, deleted {result.noncurrent_deleted} noncurrent versions and "
        f"{result.delete_markers_removed} expired delete markers, aborted "
        f"{result.uploads_aborted} uploads; kept {result.kept_locked} under object lock "
        f"({result.transactions} transactions)"
        + (
            f"; {_many(result.rules_failed, 'rule')} failed in {_many(result.failed, 'bucket')}"
            ": see the warnings in the log"
            if result.rules_failed
            else ""
        )
        + ("; cancelled" if result.cancelled else "")
    )


def _many(count: int, thing: str) -> str:
    return f"{count} {thing}" if count == 1 else f"{count} {thing}s"


def _parse_now(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        # in UTC here: an offset past year 9999 (or before year 1) is refused, not a crash
        return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    except (ValueError, OverflowError) as e:
        raise click.BadParameter(
            f"{value!r} is not an ISO 8601 time from year 1 to 9999 (e.g. 2026-03-01T00:00:00Z)",
            param_hint="--now",
        ) from e


@click.group("lifecycle")
def lifecycle() -> None:
    """Bucket lifecycle rules (PutBucketLifecycleConfiguration)."""


@lifecycle.command("run")
@click.option("--bucket", "bucket_name", default=None, help="Only this bucket.")
@click.option(
    "--batch",
    type=click.IntRange(1, 10_000),
    default=DEFAULT_BATCH,
    show_default=True,
    help="Rows changed per transaction.",
)
@click.option(
    "--now",
    "now_text",
    default=None,
    metavar="ISO-TIME",
    help="Judge ages at this time instead of the clock (UTC when no offset is given); "
    "object lock is still judged by the clock.",
)
@click.pass_context
def lifecycle_run(
    ctx: click.Context, bucket_name: str | None, batch: int, now_text: str | None
) -> None:
    """Apply every enabled lifecycle rule of every bucket (or of --bucket) now.

    Expires current versions (a delete marker in versioned buckets), noncurrent versions
    and expired delete markers, and aborts old multipart uploads, in system transactions
    tagged lifecycle-expiration. Versions under object lock are kept. A rule that fails
    (its bucket deleted meanwhile, a stored rule that no longer reads) is logged with its
    bucket, counted in the summary and skipped; the others are applied, and the exit
    status is 0.
    """
    settings = settings_of(ctx)
    now = _parse_now(now_text)
    db = _open(settings)
    try:
        only = None
        if bucket_name is not None:
            owner = bucket_owner(db, bucket_name)
            if owner is None:
                raise click.ClickException(f"no bucket named {bucket_name!r}")
            only = BucketLocation(owner, bucket_name)
        with Progress(console=errors, transient=True) as progress:
            task = progress.add_task("applying lifecycle rules", total=None)
            result = run_lifecycle(
                db,
                bucket=only,
                now=now,
                batch=batch,
                progress=lambda n: progress.advance(task, n),
                removed=_data_remover(settings),
                rule_failed=count_failure,
            )
    finally:
        db.dispose()
    console.print(summary(result), highlight=False)


def _open(settings: Settings) -> Metabase:
    """The metabase, with eventing for the buckets the static list and the notification
    API name (loaded once), so lifecycle changes there are recorded."""
    registry = Registry(settings.eventing_buckets)
    db = open_metabase(settings, registry)
    try:
        ConfigWatcher.for_registry(EventingStore(db), registry).refresh(force=True)
    except BaseException:
        db.dispose()
        raise
    return db


def _data_remover(settings: Settings) -> Removed | None:
    root = settings.data_dir / "objects"
    return free_data(ObjectData(root)) if root.is_dir() else None


class LifecycleSchedule(Schedule):
    """Runs the lifecycle now and then every `interval` seconds on a daemon thread, until
    `stop`, which ends a run in progress at its next page read or batch (and warns if the
    thread has not ended within its timeout)."""

    what = "lifecycle run"

    def __init__(self, db: Metabase, interval: float, *, removed: Removed | None = None) -> None:
        super().__init__(interval)
        self.db = db
        self.removed = removed

    def run_once(self) -> LifecycleResult:
        result = run_lifecycle(
            self.db, removed=self.removed, cancelled=self.stopping, rule_failed=count_failure
        )
        if result.failed:
            log.warning("%s", summary(result))
        elif result.changed or result.kept_locked:
            log.info("%s", summary(result))
        return result
