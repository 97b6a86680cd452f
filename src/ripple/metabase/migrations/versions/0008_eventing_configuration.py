"""Topics, bucket notifications and their change log (ripple.notifications.schema); pull
subscriptions get an owner and room for a topic ARN.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "topics",
        sa.Column("project_id", sa.Uuid, primary_key=True),
        sa.Column("name", sa.String(256), primary_key=True),
        sa.Column("arn", sa.String(512), nullable=False, unique=True),
        sa.Column("push_endpoint", sa.Text, nullable=False),
        sa.Column("arguments", sa.Text, nullable=False),
        sa.Column("created_at_ns", sa.BigInteger, nullable=False),
        sa.Column("updated_at_ns", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"], name="topics_project_fkey"),
    )
    op.create_table(
        "bucket_notifications",
        sa.Column("project_id", sa.Uuid, primary_key=True),
        sa.Column("bucket_name", sa.String(63), primary_key=True),
        sa.Column("id", sa.String(255), primary_key=True),
        sa.Column("topic_arn", sa.String(512), nullable=False),
        sa.Column("notification", sa.Text, nullable=False),
        sa.Column("created_at_ns", sa.BigInteger, nullable=False),
    )
    op.create_index("bucket_notifications_topic", "bucket_notifications", ["topic_arn"])
    op.create_table(
        "eventing_changes",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("at_ns", sa.BigInteger, nullable=False),
        sa.Column("principal", sa.String(255), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("subject", sa.Text, nullable=False),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("subscriptions") as batch:
        batch.alter_column("topic", type_=sa.String(512), existing_nullable=False)
        batch.add_column(sa.Column("owner", sa.Uuid, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("subscriptions") as batch:
        batch.drop_column("owner")
        batch.alter_column("topic", type_=sa.String(255), existing_nullable=False)
    op.drop_table("eventing_changes")
    op.drop_table("bucket_notifications")
    op.drop_table("topics")
