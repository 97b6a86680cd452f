"""`ripple data gc`: remove object data that no metabase row names (what a crash leaves)."""

from __future__ import annotations

import click

from ripple.cli.common import console, open_metabase, settings_of
from ripple.gateway.data import ObjectData
from ripple.gateway.gc import DEFAULT_GRACE_SECONDS, MIN_GRACE_SECONDS, collect


@click.group()
def data() -> None:
    """Object data kept under the data directory."""


@data.command()
@click.option(
    "--older-than",
    "grace",
    type=click.FloatRange(min=MIN_GRACE_SECONDS),
    default=DEFAULT_GRACE_SECONDS,
    show_default=True,
    metavar="SECONDS",
    help="Only data at least this old (uploads in flight are younger); at least 60.",
)
@click.option("--dry-run", is_flag=True, help="Report what would be removed; remove nothing.")
@click.pass_context
def gc(ctx: click.Context, grace: float, dry_run: bool) -> None:
    """Remove upload leftovers and data files no object version names.

    A crash mid-upload can leave a temporary file, a data file whose commit never
    happened, or the parts of an upload that is gone; never a visible object without data.
    """
    settings = settings_of(ctx)
    db = open_metabase(settings)
    try:
        found = collect(
            db,
            ObjectData(settings.data_dir / "objects"),
            grace_seconds=grace,
            dry_run=dry_run,
        )
    finally:
        db.dispose()
    verb = "would remove" if dry_run else "removed"
    console.print(
        f"{verb} {len(found.temporaries)} temporary files, {len(found.orphans)} orphaned data "
        f"files and {len(found.uploads)} abandoned uploads ({found.bytes} bytes)",
        highlight=False,
    )
