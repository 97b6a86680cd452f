"""`ripple user`: create users (a project and its first access key) and list them; and
what `ripple key` shares with it: opening the metabase for identity commands and printing
a new key's secret, once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import click
import sqlalchemy as sa

from ripple.cli.common import migrate, open_metabase, reason_of, safe_url, settings_of
from ripple.identity import AccessKey, IdentityError, create_user, list_users
from ripple.metabase import Metabase


@contextmanager
def identity_metabase(ctx: click.Context, *, upgrade: bool = False) -> Iterator[Metabase]:
    """The configured metabase (migrated first with `upgrade`); identity and database
    errors as one-line messages."""
    settings = settings_of(ctx)
    metabase = open_metabase(settings)
    try:
        if upgrade:
            migrate(metabase)
        yield metabase
    except IdentityError as e:
        raise click.ClickException(str(e)) from None
    except sa.exc.DBAPIError as e:
        reason = reason_of(e)
        raise click.ClickException(
            f"cannot use the access keys in the metabase at {safe_url(metabase)}: {reason}. "
            "Is it running, and migrated (`ripple db upgrade`)?"
        ) from None
    finally:
        metabase.dispose()


def print_new_key(key: AccessKey, secret: str) -> None:
    """The new key's id and secret, with the warning that the secret is shown only now."""
    click.echo(f"access key: {key.access_key_id}")
    click.echo(f"secret key: {secret}")
    click.echo("Save the secret key now: it is shown only this once and cannot be shown again.")


def describe(key: AccessKey) -> str:
    """What the key may reach, in words."""
    if key.bucket is None:
        scope = "every bucket"
    elif key.prefix is None:
        scope = f"bucket {key.bucket}"
    else:
        scope = f"bucket {key.bucket}, keys under {key.prefix!r}"
    parts = [scope]
    if key.denied:
        parts.append("denied " + ", ".join(sorted(key.denied)))
    if key.may_bypass_governance:
        parts.append("may bypass governance retention")
    return "; ".join(parts)


@click.group()
def user() -> None:
    """Users: projects with access keys; create and list them.

    A user is a project (the owner of its buckets) with its access keys; `ripple key`
    makes more keys for it."""


@user.command("create")
@click.argument("name")
@click.option(
    "--access-key",
    default=None,
    help="Use this access key id (16 to 128 letters and digits) instead of a new one; "
    "needs --secret-key.",
)
@click.option(
    "--secret-key",
    default=None,
    help="Use this secret key (16 to 128 printable characters) instead of a new one; needs "
    "--access-key. Command lines end up in shell history: prefer a generated secret.",
)
@click.pass_context
def user_create(
    ctx: click.Context, name: str, access_key: str | None, secret_key: str | None
) -> None:
    """Create the user NAME and its first access key.

    Makes a project and an access key that may do anything in the project's buckets.
    Prints the access key and its secret key, which is shown only this once, and the
    project's public id (the bucket owner in S3 events).

    Migrates the metabase first if it is not at the newest schema."""
    if (access_key is None) != (secret_key is None):
        raise click.ClickException("give both --access-key and --secret-key, or neither")
    data_dir = settings_of(ctx).data_dir
    with identity_metabase(ctx, upgrade=True) as db:
        project, key, secret = create_user(
            db, data_dir, name, access_key_id=access_key, secret_key=secret_key
        )
    click.echo(f"user {project.name}: project public id {project.public_id}")
    print_new_key(key, secret)


@user.command("list")
@click.pass_context
def user_list(ctx: click.Context) -> None:
    """List the users, as JSON lines.

    One object a line: name, project public id, how many keys are not revoked, and when
    the user was created."""
    with identity_metabase(ctx) as db:
        users = list_users(db)
    for found in users:
        click.echo(
            json.dumps(
                {
                    "name": found.name,
                    "project_public_id": str(found.project_public_id),
                    "active_keys": found.active_keys,
                    "created_at": found.created_at.isoformat(),
                },
                separators=(",", ":"),
            )
        )
