"""What every gateway over one metabase shares, so that several gateway processes (on one
machine or on several) hold one budget and remember one history:

    CREATE TABLE rate_limits (
        project_id UUID, name VARCHAR(32), tokens FLOAT, updated_s FLOAT,
        PRIMARY KEY (project_id, name))
    CREATE TABLE client_tokens (
        project_id UUID, bucket_name VARCHAR(63), token VARCHAR(64), request TEXT,
        done BOOLEAN, expires_ns BIGINT,
        PRIMARY KEY (project_id, bucket_name, token))

`rate_limits`: a token bucket per project and limit (`delete`), refilled by the database's
clock (`ripple.metabase.rate_limits`). `client_tokens`: RenameObject's `x-amz-client-token`
of renames made or in progress (`ripple.metabase.client_tokens`). Neither is in a change
stream.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rate_limits",
        sa.Column("project_id", sa.Uuid, primary_key=True),
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("tokens", sa.Float, nullable=False),
        sa.Column("updated_s", sa.Float, nullable=False),
    )
    op.create_table(
        "client_tokens",
        sa.Column("project_id", sa.Uuid, primary_key=True),
        sa.Column("bucket_name", sa.String(63), primary_key=True),
        sa.Column("token", sa.String(64), primary_key=True),
        sa.Column("request", sa.Text, nullable=False),
        sa.Column("done", sa.Boolean, nullable=False),
        sa.Column("expires_ns", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("client_tokens")
    op.drop_table("rate_limits")
