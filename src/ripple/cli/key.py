"""`ripple key`: more access keys for a user, restricted to a bucket, a prefix or some
actions; list them (never their secrets) and revoke them."""

from __future__ import annotations

import json

import click

from ripple.cli.common import settings_of
from ripple.cli.user import describe, identity_metabase, print_new_key
from ripple.identity import ACTIONS, DEFAULT_TTL, create_key, list_keys, revoke_key


@click.group()
def key() -> None:
    """Access keys: create restricted ones, list, revoke."""


@key.command("create")
@click.argument("user")
@click.option("--bucket", default=None, help="Only in this bucket (ListBuckets shows it alone).")
@click.option(
    "--prefix", default=None, help="Only on the object keys under this prefix; needs --bucket."
)
@click.option(
    "--deny",
    type=click.Choice(ACTIONS),
    multiple=True,
    help="Refuse this action (repeat the option for more than one).",
)
@click.option(
    "--allow-bypass-governance",
    is_flag=True,
    help=(
        "May shorten or remove governance-mode retention (x-amz-bypass-governance-retention); "
        "a user's unrestricted keys always may, as the account owner."
    ),
)
@click.pass_context
def key_create(
    ctx: click.Context,
    user: str,
    bucket: str | None,
    prefix: str | None,
    deny: tuple[str, ...],
    allow_bypass_governance: bool,
) -> None:
    """Create another access key for USER.

    Restricted as the options say: to one bucket, to the keys under a prefix in it, and
    without the denied actions. Prints the access key and its secret key, which is shown
    only this once.

    Migrates the metabase first if it is not at the newest schema."""
    if prefix is not None and bucket is None:
        raise click.ClickException("--prefix needs --bucket: a prefix is within one bucket")
    data_dir = settings_of(ctx).data_dir
    with identity_metabase(ctx, upgrade=True) as db:
        made, secret = create_key(
            db,
            data_dir,
            user,
            bucket=bucket,
            prefix=prefix,
            denied=deny,
            allow_bypass_governance=allow_bypass_governance,
        )
    click.echo(f"user {made.user}: {describe(made)}")
    print_new_key(made, secret)


@key.command("list")
@click.argument("user")
@click.pass_context
def key_list(ctx: click.Context, user: str) -> None:
    """List USER's access keys, as JSON lines (no secrets).

    One object a line for each key that is not revoked: its id, bucket, prefix, denied
    actions and whether it may bypass governance retention."""
    with identity_metabase(ctx) as db:
        keys = list_keys(db, user)
    for found in keys:
        click.echo(
            json.dumps(
                {
                    "access_key_id": found.access_key_id,
                    "bucket": found.bucket,
                    "prefix": found.prefix,
                    "denied": sorted(found.denied),
                    "allow_bypass_governance": found.allow_bypass_governance,
                },
                separators=(",", ":"),
                ensure_ascii=False,
            )
        )


@key.command("revoke")
@click.argument("access_key")
@click.pass_context
def key_revoke(ctx: click.Context, access_key: str) -> None:
    """Revoke ACCESS_KEY for good.

    Running gateways stop accepting it within their key
    cache time (1 s)."""
    with identity_metabase(ctx) as db:
        revoke_key(db, access_key)
    click.echo(
        f"revoked access key {access_key}; gateways stop accepting it within {DEFAULT_TTL:g} s"
    )
