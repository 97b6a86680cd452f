"""`ripple metabase`: jobs over the metabase's objects."""

from __future__ import annotations

import click
from rich.progress import Progress

from ripple.cli.common import console, errors, open_metabase, settings_of
from ripple.metabase.expire import expire_objects


@click.group("metabase")
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
    metabase = open_metabase(settings_of(ctx))
    try:
        with Progress(console=errors, transient=True) as progress:
            task = progress.add_task("expiring objects", total=None)
            result = expire_objects(
                metabase, batch=batch, progress=lambda n: progress.advance(task, n)
            )
    finally:
        metabase.dispose()
    console.print(f"expired {result.deleted} objects; kept {result.kept_locked} under object lock")
