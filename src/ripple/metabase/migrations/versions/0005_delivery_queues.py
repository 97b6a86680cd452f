"""The pipeline's durable retry queue and dead-letter table (ripple.pipeline.schema).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "delivery_retries",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("destination", sa.String(255), nullable=False),
        sa.Column("event_id", sa.String(64), nullable=False),
        sa.Column("event", sa.Text, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("first_failed_ns", sa.BigInteger, nullable=False),
        sa.Column("next_attempt_ns", sa.BigInteger, nullable=False),
        sa.Column("last_error", sa.Text, nullable=False),
    )
    op.create_index("delivery_retries_due", "delivery_retries", ["destination", "next_attempt_ns"])
    op.create_index(
        "delivery_retries_event", "delivery_retries", ["destination", "event_id"], unique=True
    )
    op.create_table(
        "dead_letters",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("destination", sa.String(255), nullable=False),
        sa.Column("event_id", sa.String(64), nullable=False),
        sa.Column("event", sa.Text, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("first_failed_ns", sa.BigInteger, nullable=False),
        sa.Column("dead_at_ns", sa.BigInteger, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
    )
    op.create_index("dead_letters_destination", "dead_letters", ["destination", "id"])


def downgrade() -> None:
    op.drop_table("dead_letters")
    op.drop_table("delivery_retries")
