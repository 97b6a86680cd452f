"""Record expiration of the journal table: the partitions (`record_date=D/bucket=B`) whose
every row is older than bucket B's record expiration are dropped (docs/journal.md).

Spark's readers of the table see the files its sink's log (`_spark_metadata`) lists, and
fail on a listed file that is gone. So a partition leaves in two steps, a run apart: first
its files leave the log (each log file rewritten without them, by an atomic rename: a
reader sees it whole, before or after), then, at a later run, the partition's directory is
deleted once no log file names it. A query that read the log before the first step keeps
its files until the next run. The journal's query may run meanwhile: it only adds log files,
and a compaction that read a log file before its rewrite brings the entries back, which the
next run drops again (so their files wait a run more).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from urllib.parse import unquote, urlsplit

import orjson

__all__ = ["Pruned", "expired", "journal_table", "local_directory", "prune_journal"]

LOG = "_spark_metadata"
_VERSION = "v1"  # the sink log's format version (its first line)
_LOG_FILE = re.compile(r"\d+(\.compact)?")
_PARTITION = re.compile(r"record_date=(\d{4}-\d{2}-\d{2})/bucket=([^/]+)/")


def journal_table(location: str) -> str:
    """Where the journal table is under the journal location."""
    return f"{location.rstrip('/')}/journal"


@dataclass
class Pruned:
    """What a run did: log entries (files) dropped from the log, partition directories
    deleted, and the expired partitions still named by the log until this run."""

    dropped: int = 0
    deleted: list[str] = field(default_factory=list)
    unlisted: set[str] = field(default_factory=set)


def expired(record_date: date, days: int, today: date) -> bool:
    """Whether every record of `record_date` (UTC) is older than `days` days on `today`."""
    return record_date + timedelta(days=days + 1) <= today


def _partition(path: str) -> tuple[str, date, str] | None:
    """(`record_date=D/bucket=B`, D, B) of a path under the table, if it is in one."""
    found = _PARTITION.search(path)
    if found is None:
        return None
    try:
        day = date.fromisoformat(found.group(1))
    except ValueError:
        return None
    name = unquote(found.group(2))
    return f"record_date={found.group(1)}/bucket={found.group(2)}", day, name


def local_directory(location: str) -> Path | None:
    """The local directory a journal location names (a path, or a `file:` URL); None for
    another scheme (`hdfs://`, `s3a://`)."""
    parts = urlsplit(location)
    if parts.scheme == "file":
        return Path(parts.path)
    if parts.scheme and len(parts.scheme) > 1:
        return None
    return Path(location)


def prune_journal(location: str, expirations: Mapping[str, int], today: date) -> Pruned | None:
    """Drop the expired partitions of the journal under `location`, given each bucket's
    record expiration in days (a bucket not named keeps its rows); None where the location
    is not a local directory (not pruned)."""
    local = local_directory(location)
    if local is None:
        return None
    table = Path(journal_table(str(local)))
    pruned = Pruned()
    if not expirations or not table.is_dir():
        return pruned

    def is_expired(partition: tuple[str, date, str] | None) -> bool:
        if partition is None:
            return False
        _, day, bucket = partition
        days = expirations.get(bucket)
        return days is not None and expired(day, days, today)

    listed: set[str] = set()  # partitions the log named before this run
    log = table / LOG
    for entry in sorted(log.iterdir()) if log.is_dir() else []:
        if not _LOG_FILE.fullmatch(entry.name):
            continue
        lines = entry.read_bytes().split(b"\n")
        if not lines or lines[0].decode(errors="replace") != _VERSION:
            continue  # a format this does not know: left alone
        kept = [lines[0]]
        for line in lines[1:]:
            partition = _partition(_path_of(line)) if line else None
            if partition is not None:
                listed.add(partition[0])
            if partition is not None and is_expired(partition):
                pruned.dropped += 1
                pruned.unlisted.add(partition[0])
            else:
                kept.append(line)
        if len(kept) < len(lines):
            _replace(entry, b"\n".join(kept))
    for day_directory in sorted(table.glob("record_date=*")):
        for directory in sorted(day_directory.glob("bucket=*")):
            name = f"{day_directory.name}/{directory.name}"
            if name not in listed and is_expired(_partition(name + "/")):
                shutil.rmtree(directory, ignore_errors=True)
                pruned.deleted.append(name)
        with contextlib.suppress(OSError):  # a day's directory goes once empty
            day_directory.rmdir()
    return pruned


def _path_of(line: bytes) -> str:
    """The file a log entry names; "" for a line that is no entry (left as it is)."""
    try:
        entry = orjson.loads(line)
    except orjson.JSONDecodeError:
        return ""
    path = entry.get("path") if isinstance(entry, dict) else None
    return path if isinstance(path, str) else ""


def _replace(path: Path, content: bytes) -> None:
    """`path` holding `content`, atomically (a temporary file beside it, renamed)."""
    staging = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(staging, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(staging, path)
    finally:
        staging.unlink(missing_ok=True)
