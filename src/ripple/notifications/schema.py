"""The eventing configuration's tables in the metabase database (created by migrations 0008
and 0018).

- `topics`: one row a topic made through the topic API, owned by a project; `arn` is
  `arn:aws:sns:<region>:<project public id>:<name>` and names the topic everywhere else
  (bucket notifications, subscriptions, the pipeline's targets and retry queues).
  `arguments` is a JSON object of the destination arguments (`amqp-exchange`, …).
- `bucket_notifications`: one row a notification of a bucket (its `Id`), holding the
  notification as JSON (`ripple.notifications.configuration.notification_to_json`).
- `eventing_changes`: one row per change of either, in order: who changed what. Its newest
  id is the configuration's generation, which every process polls to know when to reload.
"""

from __future__ import annotations

import sqlalchemy as sa

from ripple.metabase.schema import projects

metadata = sa.MetaData()

ChangeId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

topics = sa.Table(
    "topics",
    metadata,
    sa.Column("project_id", sa.Uuid, primary_key=True),
    sa.Column("name", sa.String(256), primary_key=True),
    sa.Column("arn", sa.String(512), nullable=False, unique=True),
    sa.Column("push_endpoint", sa.Text, nullable=False),  # "" or "none": pull-only
    sa.Column("arguments", sa.Text, nullable=False),  # JSON object of strings
    sa.Column("created_at_ns", sa.BigInteger, nullable=False),
    sa.Column("updated_at_ns", sa.BigInteger, nullable=False),
    sa.ForeignKeyConstraint(["project_id"], [projects.c.id], name="topics_project_fkey"),
)

bucket_notifications = sa.Table(
    "bucket_notifications",
    metadata,
    sa.Column("project_id", sa.Uuid, primary_key=True),
    sa.Column("bucket_name", sa.String(63), primary_key=True),
    sa.Column("id", sa.String(255), primary_key=True),
    sa.Column("topic_arn", sa.String(512), nullable=False),
    sa.Column("notification", sa.Text, nullable=False),  # JSON
    sa.Column("created_at_ns", sa.BigInteger, nullable=False),
)
sa.Index("bucket_notifications_topic", bucket_notifications.c.topic_arn)

eventing_changes = sa.Table(
    "eventing_changes",
    metadata,
    sa.Column("id", ChangeId, primary_key=True, autoincrement=True),
    sa.Column("at_ns", sa.BigInteger, nullable=False),
    sa.Column("principal", sa.String(255), nullable=False),
    sa.Column("action", sa.String(64), nullable=False),
    sa.Column("subject", sa.Text, nullable=False),
    sqlite_autoincrement=True,
)

# A bucket's journal (docs/journal.md): the pipeline writes every event of the bucket's
# objects committed from `enabled_ns` until `disabled_ns` (null: while it is enabled) into
# the journal table; `expiration_days` (null: kept for ever) is how long its rows are kept.
# A disabled journal's row stays, so the events of its period the pipeline has not read yet
# are still journaled. Created by migration 0018.
bucket_journals = sa.Table(
    "bucket_journals",
    metadata,
    sa.Column("project_id", sa.Uuid, primary_key=True),
    sa.Column("bucket_name", sa.String(63), primary_key=True),
    sa.Column("enabled_ns", sa.BigInteger, nullable=False),
    sa.Column("disabled_ns", sa.BigInteger, nullable=True),
    sa.Column("expiration_days", sa.Integer, nullable=True),
)
