"""Applying lifecycle rules (`ripple lifecycle run`, and `ripple up` on a schedule).

Every enabled rule of every bucket (or of one) is applied, in configuration order, each by
`lifecycle_apply.RuleRun`; `cancelled` is asked before every page read, rule, bucket and
transaction. One tenant's rule never stops the others': a rule that fails is logged as one
warning line, counted, given to `rule_failed` with its reason (`FAILURE_REASONS`: `invalid`,
`bucket_deleted`, `error`), and the run goes on. What is no rule's fault ends the run: the
database away (`OperationalError`, `InterfaceError`, a connection invalidated), or
`cancelled`.

The reasons and what follows each: docs/lifecycle.md, "Running it".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from ripple.metabase.db import Metabase
from ripple.metabase.errors import BucketNotFound, MetabaseError
from ripple.metabase.lifecycle import read_rule, stored_id
from ripple.metabase.lifecycle_apply import Job, LifecycleResult, Removed, RuleRun
from ripple.metabase.lifecycle_scan import Cancelled
from ripple.metabase.rows import bucket_from_row
from ripple.metabase.schema import buckets
from ripple.metabase.types import Bucket, BucketLocation

__all__ = [
    "DEFAULT_BATCH",
    "FAILURE_REASONS",
    "LifecycleResult",
    "Removed",
    "RuleFailed",
    "run_lifecycle",
]

DEFAULT_BATCH = 1000
FAILURE_REASONS = ("invalid", "bucket_deleted", "error")

log = logging.getLogger("ripple.lifecycle")

RuleFailed = Callable[[str], None]  # told the reason of each failed rule


def run_lifecycle(
    db: Metabase,
    *,
    bucket: BucketLocation | None = None,
    now: datetime | None = None,
    batch: int = DEFAULT_BATCH,
    progress: Callable[[int], None] | None = None,
    removed: Removed | None = None,
    cancelled: Callable[[], bool] | None = None,
    rule_failed: RuleFailed | None = None,
) -> LifecycleResult:
    """Apply every enabled lifecycle rule of every bucket (or of `bucket`), judging ages at
    `now` (the metabase clock by default; object lock is always judged by the clock).
    `progress` gets the number of rows each batch changed; `cancelled` is asked before
    each page read, rule, bucket and batch, and a True ends the run there; `rule_failed`
    gets the reason (one of `FAILURE_REASONS`) of each rule that fails."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    job = Job(db, (now or db.now()).astimezone(UTC), batch, LifecycleResult(), progress, removed)
    if cancelled is not None:
        job.cancelled = cancelled
    try:
        for found in _buckets(db, bucket):
            _apply_bucket(job, found, rule_failed)
    except Cancelled:
        job.result.cancelled = True
    return job.result


def _apply_bucket(job: Job, bucket: Bucket, rule_failed: RuleFailed | None) -> None:
    """Every enabled rule of the bucket, each read again by today's checks; a rule that is
    refused or fails is logged, counted and skipped, and the next one tried."""
    job.check()
    failures = 0

    def failed(what: str, reason: str, why: str) -> None:
        nonlocal failures
        log.warning(
            "lifecycle: project %s, bucket %r: %s %s: %s",
            bucket.project_id,
            bucket.name,
            what,
            "skipped" if reason == "invalid" else "failed",
            why,
        )
        failures += 1
        job.result.rules_failed += 1
        if rule_failed is not None:
            rule_failed(reason)

    stored: Any = bucket.lifecycle  # JSON: whatever was written
    if not isinstance(stored, list):
        failed("its configuration", "invalid", "it is not a list of rules")
        job.result.failed += 1
        return
    for number, raw in enumerate(stored, 1):
        if isinstance(raw, Mapping) and raw.get("Status") == "Disabled":
            continue  # does nothing, so cannot fail, whatever else it holds
        found_id = stored_id(raw)
        label = f"rule {found_id!r}" if found_id is not None else f"rule #{number} (no ID)"
        try:
            rule = read_rule(raw)
        except MetabaseError as e:
            failed(label, "invalid", f"today's checks refuse it: {e.message}")
            continue
        if not rule.enabled:
            continue
        job.check()
        try:
            RuleRun(job, bucket, rule).apply()
        except BucketNotFound as e:
            failed(label, "bucket_deleted", e.message)
            break
        except MetabaseError as e:
            failed(label, "error", e.message)
        except Exception as e:
            if _ends_the_run(e):
                raise
            log.debug("lifecycle: %s of bucket %r failed", label, bucket.name, exc_info=True)
            failed(label, "error", _one_line(e))
    job.result.failed += int(failures > 0)


def _ends_the_run(e: Exception) -> bool:
    """No rule's fault: the run was cancelled, or the database is away."""
    if isinstance(e, Cancelled | MemoryError | sa.exc.OperationalError | sa.exc.InterfaceError):
        return True
    return isinstance(e, sa.exc.DBAPIError) and e.connection_invalidated


def _one_line(e: Exception) -> str:
    """The error's name and first line (a database error's SQL and parameters left out)."""
    lines = str(getattr(e, "orig", None) or e).strip().splitlines()
    first = lines[0] if lines else ""
    text = f"{type(e).__name__}: {first}" if first else type(e).__name__
    return text if len(text) <= 300 else text[:300] + "…"


def _buckets(db: Metabase, only: BucketLocation | None) -> list[Bucket]:
    query = sa.select(buckets).order_by(buckets.c.project_id, buckets.c.name)
    if only is not None:
        query = query.where(
            buckets.c.project_id == only.project_id, buckets.c.name == only.bucket_name
        )
    with db.read() as conn:
        return [b for b in (bucket_from_row(r) for r in conn.execute(query)) if b.lifecycle]
