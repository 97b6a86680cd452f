"""Each journaled bucket: when its events go to the journal (from enabled_ns, until
disabled_ns), and how long its rows are kept (ripple.notifications.journal).

    CREATE TABLE bucket_journals (project_id UUID, bucket_name VARCHAR(63), enabled_ns BIGINT
        NOT NULL, disabled_ns BIGINT, expiration_days INTEGER,
        PRIMARY KEY (project_id, bucket_name))

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bucket_journals",
        sa.Column("project_id", sa.Uuid, primary_key=True),
        sa.Column("bucket_name", sa.String(63), primary_key=True),
        sa.Column("enabled_ns", sa.BigInteger, nullable=False),
        sa.Column("disabled_ns", sa.BigInteger, nullable=True),
        sa.Column("expiration_days", sa.Integer, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("bucket_journals")
