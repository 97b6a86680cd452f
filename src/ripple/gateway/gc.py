"""Garbage collection of object data: files no metabase row names.

A crash can leave data behind, never a row without data (see `data.py`): an upload's
temporary file, a data file placed under a new stream id whose commit never happened, or
the parts of an upload whose pending row is gone. `collect` finds them (only those older
than a grace period, so uploads in flight are left alone) and removes them unless asked
only to report.
"""

from __future__ import annotations

import contextlib
import shutil
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from ripple.gateway.data import COMMIT_WINDOW_S, ObjectData
from ripple.metabase import Metabase
from ripple.metabase.schema import objects
from ripple.metabase.types import Status

PENDING = int(Status.PENDING)

DEFAULT_GRACE_SECONDS = 3600.0
# a file placed for a commit still in flight is younger than this, whatever the option says:
# no gateway commits data later than COMMIT_WINDOW_S after its last write
MIN_GRACE_SECONDS = 2 * COMMIT_WINDOW_S


@dataclass
class Collected:
    temporaries: list[Path] = field(default_factory=list)
    orphans: list[Path] = field(default_factory=list)
    uploads: list[Path] = field(default_factory=list)
    bytes: int = 0

    @property
    def paths(self) -> list[Path]:
        return [*self.temporaries, *self.orphans, *self.uploads]


def referenced_stream_ids(db: Metabase) -> tuple[set[uuid.UUID], set[uuid.UUID]]:
    """Stream ids rows name: all of them (versions, delete markers, uploads), and those of
    uploads in progress (whose parts are still needed)."""
    with db.read() as conn:
        rows = conn.execute(sa.select(objects.c.stream_id, objects.c.status)).all()
    return {r.stream_id for r in rows}, {r.stream_id for r in rows if r.status == PENDING}


def _older(found: Iterable[tuple[uuid.UUID, Path]], cutoff: float) -> list[tuple[uuid.UUID, Path]]:
    old = []
    for stream_id, path in found:
        with contextlib.suppress(FileNotFoundError):  # removed meanwhile by the gateway
            if path.stat().st_mtime < cutoff:
                old.append((stream_id, path))
    return old


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def collect(
    db: Metabase,
    data: ObjectData,
    *,
    grace_seconds: float = DEFAULT_GRACE_SECONDS,
    dry_run: bool = False,
    progress: Callable[[Path], None] | None = None,
) -> Collected:
    """Find (and unless `dry_run`, remove) data older than the grace period that no row names.

    Files are listed before the rows are read: a file placed after the listing is not
    looked at, and one committed before the read is found referenced. A file older than
    the grace period by the filesystem's own clock (`ObjectData.clock`, so that gateways
    and this command may run on machines whose clocks disagree) has no commit to come: a
    gateway commits within `COMMIT_WINDOW_S` of a file's last write or not at all.
    """
    grace_seconds = max(grace_seconds, MIN_GRACE_SECONDS)
    cutoff = data.clock() - grace_seconds
    stored = _older(data.stored(), cutoff)
    uploads = _older(data.uploads(), cutoff)
    found = Collected(temporaries=list(data.stale_temporaries(cutoff)))
    referenced, pending = referenced_stream_ids(db)
    found.orphans = [p for sid, p in stored if sid not in referenced]
    # a completed upload's object keeps its stream id: its parts are needed no more
    found.uploads = [p for sid, p in uploads if sid not in pending]
    for path in found.paths:
        found.bytes += _size(path)
        if progress is not None:
            progress(path)
        if dry_run:
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return found
