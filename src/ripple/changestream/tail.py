"""What `ripple changestream tail` prints: records (or, with `--events`, the S3 event
messages made from them) of chosen partitions, from a time or a consumer's offsets."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from ripple.changestream.definition import ChangeStreamError, parse_duration
from ripple.changestream.values import datetime_ns


def parse_since(value: str, now: datetime | None = None) -> int:
    """`--since`: an ISO-8601 time (`2026-11-21T10:00:00Z`), or a duration ago (`15m`,
    `2h`, `1d`); UNIX nanoseconds."""
    now = now or datetime.now(UTC)
    ago = parse_duration(value)
    if ago is not None:
        return datetime_ns(now - ago)
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ChangeStreamError(
            f"--since {value!r} is neither a time (2026-11-21T10:00:00Z) nor a duration "
            "ago (15m, 2h, 1d)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return datetime_ns(when)


def transactions(
    records: Iterable[dict[str, Any]], *, strict: bool = False
) -> Iterator[list[dict[str, Any]]]:
    """Group records into whole transactions (heartbeats pass alone); each partition's
    records in position order, the partitions one after another or interleaved.

    A transaction's records in a partition are consecutive and the last says so. With
    `strict`, records that end inside a transaction are an error, not left out."""
    pending: dict[int, list[dict[str, Any]]] = {}
    for record in records:
        if "heartbeat_record" in record:
            yield [record]
            continue
        group = pending.setdefault(record["partition"], [])
        group.append(record)
        if record["is_last_record_in_transaction_in_partition"]:
            yield pending.pop(record["partition"])
    if strict and pending:
        partitions = ", ".join(str(p) for p in sorted(pending))
        raise RuntimeError(f"the records end inside a transaction (partitions {partitions})")


def deadline(seconds: float | None) -> Callable[[], bool]:
    """A predicate that turns true `seconds` from now (never, for None)."""
    if seconds is None:
        return lambda: False
    end = time.monotonic() + seconds
    return lambda: time.monotonic() >= end
