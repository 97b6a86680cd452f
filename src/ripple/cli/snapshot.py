"""`ripple snapshot …`: run a snapshotter, and read, repair and compact its archive.

One module per part: `snapshot_serve` (the gRPC publish service) and `snapshot_archive`
(replay, reconcile, compact); this one is the group that holds them.
"""

from __future__ import annotations

import click

from ripple.cli.snapshot_archive import commands as archive_commands
from ripple.cli.snapshot_serve import serve

__all__ = ["snapshot"]


@click.group()
def snapshot() -> None:
    """Snapshotters: event streams archived as compressed pages, with an index.

    A snapshotter buffers events per writer (a bucket, a topic, a session), acknowledges
    each once it is in its write-ahead log, writes pages to storage (the filesystem, or
    any S3 endpoint) and lists them in an index (SQLite, Redis or PostgreSQL). Configure
    them as [snapshotters.NAME] tables in ripple.toml; `default` needs no configuration
    and keeps everything under <data-dir>/snapshots/default. Bucket notifications reach
    one through a topic whose push endpoint is snapshot://NAME.
    """


snapshot.add_command(serve)
for command in archive_commands:
    snapshot.add_command(command)
