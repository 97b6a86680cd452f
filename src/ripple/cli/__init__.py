"""The `ripple` command: run the main job, migrate the metabase, inspect what is there.

One module per command group; this one holds the root group and wires them in.
"""

from __future__ import annotations

from pathlib import Path

import click

from ripple import __version__
from ripple.cli.changestream import changestream
from ripple.cli.data import data
from ripple.cli.db import db
from ripple.cli.deadletter import deadletter
from ripple.cli.key import key
from ripple.cli.lifecycle import lifecycle
from ripple.cli.metabase import metabase_group
from ripple.cli.pipeline import pipeline
from ripple.cli.serve import serve
from ripple.cli.snapshot import snapshot
from ripple.cli.subscription import subscription
from ripple.cli.up import up
from ripple.cli.user import user
from ripple.config import ConfigError, load_settings
from ripple.targets.guard import set_default_guard

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ripple")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Configuration file (default: ./ripple.toml if present). RIPPLE_* variables override it.",
)
@click.pass_context
def cli(ctx: click.Context, config_file: Path | None) -> None:
    """ripple: S3-compatible bucket event notifications.

    Objects written through ripple are recorded in its metabase (SQLite by default,
    PostgreSQL with RIPPLE_DATABASE_URL); every change in a bucket with eventing becomes
    an S3 event message delivered to the bucket's destinations.

    Start with `ripple up`, which needs no configuration.
    """
    try:
        ctx.obj = settings = load_settings(config_file)
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
    # Every command runs under the configured destination guard, installed here, before
    # any of them can build a target: none can forget it, nor reach a destination the
    # settings' mode refuses (`ripple snapshot replay --to`, as much as `ripple up`).
    set_default_guard(settings.guard)


for command in (
    up,
    serve,
    db,
    changestream,
    metabase_group,
    lifecycle,
    pipeline,
    subscription,
    deadletter,
    user,
    key,
    data,
    snapshot,
):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="ripple")
