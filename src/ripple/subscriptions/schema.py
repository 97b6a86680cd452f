"""The pull subscriptions' tables in the metabase database (created by migration 0006;
0008 adds `owner`).

- `subscriptions`: one row a subscription: its topic, the format its events are pulled in
  (`s3` records or the `compact` form) and how many days unacknowledged events are kept.
- `subscription_events`: the events stored for each subscription, one row each. `id` orders
  them and is the pull marker; `(subscription, event_id)` is unique, so storing an event
  again (a redelivery, a Spark batch replayed after a crash) stores nothing. Acknowledging
  an event marks the row (`acked_at_ns`) instead of deleting it, so a redelivery after the
  acknowledgement is still recognised; expiry removes rows, acknowledged or not, once they
  are older than the subscription's retention.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

RowId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

subscriptions = sa.Table(
    "subscriptions",
    metadata,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("topic", sa.String(512), nullable=False),  # a configured name or a topic ARN
    sa.Column("format", sa.String(16), nullable=False),  # "s3" or "compact"
    sa.Column("events_retention_days", sa.Integer, nullable=False, server_default="7"),
    sa.Column("created_at_ns", sa.BigInteger, nullable=False),
    sa.Column("owner", sa.Uuid, nullable=True),  # the project that made it (API); None: CLI
)
sa.Index("subscriptions_topic", subscriptions.c.topic)

subscription_events = sa.Table(
    "subscription_events",
    metadata,
    # AUTOINCREMENT on SQLite: an id is never used twice, even after the newest rows are
    # deleted, so a consumer's marker never hides events stored later.
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    sa.Column("subscription", sa.String(255), nullable=False),
    sa.Column("event_id", sa.String(64), nullable=False),
    sa.Column("event", sa.Text, nullable=False),  # the S3 event record, JSON
    sa.Column("created_at_ns", sa.BigInteger, nullable=False),
    sa.Column("batch_id", sa.BigInteger, nullable=False),  # -1: a retry or a replay
    sa.Column("acked_at_ns", sa.BigInteger, nullable=True),
    sqlite_autoincrement=True,
)
sa.Index(
    "subscription_events_event",
    subscription_events.c.subscription,
    subscription_events.c.event_id,
    unique=True,
)
# What a pull reads: the subscription's unacknowledged events in id order.
sa.Index(
    "subscription_events_pending",
    subscription_events.c.subscription,
    subscription_events.c.id,
    postgresql_where=subscription_events.c.acked_at_ns.is_(None),
    sqlite_where=subscription_events.c.acked_at_ns.is_(None),
)
sa.Index(
    "subscription_events_created",
    subscription_events.c.subscription,
    subscription_events.c.created_at_ns,
)
