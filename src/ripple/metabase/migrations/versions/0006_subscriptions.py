"""Pull subscriptions and their stored events (ripple.subscriptions.schema).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "subscriptions",
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("topic", sa.String(255), nullable=False),
        sa.Column("format", sa.String(16), nullable=False),
        sa.Column("events_retention_days", sa.Integer, nullable=False, server_default="7"),
        sa.Column("created_at_ns", sa.BigInteger, nullable=False),
    )
    op.create_index("subscriptions_topic", "subscriptions", ["topic"])
    op.create_table(
        "subscription_events",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("subscription", sa.String(255), nullable=False),
        sa.Column("event_id", sa.String(64), nullable=False),
        sa.Column("event", sa.Text, nullable=False),
        sa.Column("created_at_ns", sa.BigInteger, nullable=False),
        sa.Column("batch_id", sa.BigInteger, nullable=False),
        sa.Column("acked_at_ns", sa.BigInteger, nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "subscription_events_event",
        "subscription_events",
        ["subscription", "event_id"],
        unique=True,
    )
    pending = sa.column("acked_at_ns").is_(None)
    op.create_index(
        "subscription_events_pending",
        "subscription_events",
        ["subscription", "id"],
        postgresql_where=pending,
        sqlite_where=pending,
    )
    op.create_index(
        "subscription_events_created",
        "subscription_events",
        ["subscription", "created_at_ns"],
    )


def downgrade() -> None:
    op.drop_table("subscription_events")
    op.drop_table("subscriptions")
