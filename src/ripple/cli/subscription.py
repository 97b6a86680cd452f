"""`ripple subscription`: create pull subscriptions, pull and acknowledge their events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import click
import sqlalchemy as sa

from ripple.cli.common import console, open_metabase, reason_of, safe_url, settings_of
from ripple.subscriptions import (
    DEFAULT_MAX_ENTRIES,
    DEFAULT_RETENTION_DAYS,
    FORMATS,
    NoSuchSubscription,
    SubscriptionStore,
)


@click.group()
def subscription() -> None:
    """Pull subscriptions: create them, pull their events, acknowledge them."""


@contextmanager
def _subscriptions(ctx: click.Context) -> Iterator[SubscriptionStore]:
    """The subscription store of the configured metabase; its errors as one-line messages."""
    metabase = open_metabase(settings_of(ctx))
    try:
        yield SubscriptionStore(metabase)
    except (NoSuchSubscription, ValueError) as e:
        raise click.ClickException(str(e.args[0] if e.args else e)) from e
    except sa.exc.DBAPIError as e:
        reason = reason_of(e)
        raise click.ClickException(
            f"cannot use the subscriptions in the metabase at {safe_url(metabase)}: {reason}. "
            "Is it running, and migrated (`ripple db upgrade`)?"
        ) from e
    finally:
        metabase.dispose()


@subscription.command("create")
@click.argument("name")
@click.option("--topic", required=True, help="The topic whose events the subscription keeps.")
@click.option(
    "--format",
    "event_format",
    type=click.Choice(FORMATS),
    default="s3",
    show_default=True,
    help="Pull S3 event records, or the compact form (OBJECT_CREATE / OBJECT_DELETE).",
)
@click.option(
    "--retention-days",
    type=int,
    default=DEFAULT_RETENTION_DAYS,
    show_default=True,
    help="Days an event that was not acknowledged is kept.",
)
@click.pass_context
def subscription_create(
    ctx: click.Context, name: str, topic: str, event_format: str, retention_days: int
) -> None:
    """Create the subscription NAME to a topic (again: change its format and retention)."""
    with _subscriptions(ctx) as store:
        made = store.create(name, topic, format=event_format, events_retention_days=retention_days)
    console.print(
        f"subscription {made.name} to topic {made.topic}: format {made.format}, "
        f"events kept {made.events_retention_days} days",
        highlight=False,
    )


@subscription.command("list")
@click.option("--topic", default=None, help="Only the subscriptions of this topic.")
@click.pass_context
def subscription_list(ctx: click.Context, topic: str | None) -> None:
    """List the subscriptions, one JSON object a line."""
    with _subscriptions(ctx) as store:
        found = store.list(topic)
    for sub in found:
        click.echo(
            json.dumps(
                {
                    "name": sub.name,
                    "topic": sub.topic,
                    "format": sub.format,
                    "events_retention_days": sub.events_retention_days,
                },
                separators=(",", ":"),
            )
        )


@subscription.command("pull")
@click.argument("name")
@click.option("--marker", default=None, help="Start after this marker (a pull's next_marker).")
@click.option(
    "--max-entries",
    type=int,
    default=DEFAULT_MAX_ENTRIES,
    show_default=True,
    help="At most this many events (1 to 1000).",
)
@click.pass_context
def subscription_pull(ctx: click.Context, name: str, marker: str | None, max_entries: int) -> None:
    """Print the subscription's next unacknowledged events as one JSON object:
    {"next_marker", "is_truncated", "Records" (format s3) or "events" (format compact)}."""
    with _subscriptions(ctx) as store:
        page = store.pull(name, marker, max_entries)
    click.echo(json.dumps(page.to_dict(), separators=(",", ":"), ensure_ascii=False))


@subscription.command("ack")
@click.argument("name")
@click.argument("event_ids", metavar="EVENT_ID...", nargs=-1, required=True)
@click.pass_context
def subscription_ack(ctx: click.Context, name: str, event_ids: tuple[str, ...]) -> None:
    """Acknowledge events of the subscription by their ids, so they are not pulled again."""
    with _subscriptions(ctx) as store:
        unknown = [event_id for event_id in event_ids if not store.ack(name, event_id)]
    acked = len(event_ids) - len(unknown)
    if unknown:
        raise click.ClickException(
            f"acknowledged {acked} of {len(event_ids)} events; subscription {name} has no "
            f"unacknowledged event {', '.join(map(repr, unknown))}"
        )
    console.print(f"acknowledged {acked} events", highlight=False)


@subscription.command("delete")
@click.argument("name")
@click.pass_context
def subscription_delete(ctx: click.Context, name: str) -> None:
    """Delete the subscription and the events it holds."""
    with _subscriptions(ctx) as store:
        dropped = store.delete(name)
    console.print(f"deleted subscription {name} and its {dropped} events", highlight=False)


@subscription.command("expire")
@click.pass_context
def subscription_expire(ctx: click.Context) -> None:
    """Remove the events older than their subscription's retention."""
    with _subscriptions(ctx) as store:
        removed = store.expire()
    console.print(f"expired {removed} events", highlight=False)
