"""The `ripple` command: run the main job, migrate the metabase, inspect what is there.

One module per command group; this one holds the root group and wires them in. A group's
module is imported only when it runs (or `--help` lists it): `ripple serve` never loads
Spark, and neither do the gateway processes it starts, which import this module again.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from ripple import __version__
from ripple.config import ConfigError, load_settings
from ripple.targets.guard import set_default_guard

__all__ = ["cli", "main"]


# command name -> "module:attribute"
COMMANDS = {
    "up": "ripple.cli.up:up",
    "serve": "ripple.cli.serve:serve",
    "db": "ripple.cli.db:db",
    "changestream": "ripple.cli.changestream:changestream",
    "metabase": "ripple.cli.metabase:metabase_group",
    "lifecycle": "ripple.cli.lifecycle:lifecycle",
    "journal": "ripple.cli.journal:journal",
    "pipeline": "ripple.cli.pipeline:pipeline",
    "subscription": "ripple.cli.subscription:subscription",
    "deadletter": "ripple.cli.deadletter:deadletter",
    "user": "ripple.cli.user:user",
    "key": "ripple.cli.key:key",
    "data": "ripple.cli.data:data",
    "snapshot": "ripple.cli.snapshot:snapshot",
}


class LazyGroup(click.Group):
    """A group whose commands are imported when asked for (click's lazy-loading pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attribute = COMMANDS[cmd_name].split(":")
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{COMMANDS[cmd_name]} is not a click command")
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
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


def main() -> None:
    cli(prog_name="ripple")
