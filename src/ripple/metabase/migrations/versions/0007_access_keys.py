"""Access keys of the users, their secrets sealed (ripple.identity.schema).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# the models' UTCDateTime as the database stores it: a timestamp with time zone
_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "access_keys",
        sa.Column("access_key_id", sa.String(128), primary_key=True),
        sa.Column("project_id", sa.Uuid, nullable=False),
        sa.Column("sealed_secret", sa.LargeBinary, nullable=False),
        sa.Column("bucket", sa.String(63), nullable=True),
        sa.Column("prefix", sa.String(1024), nullable=True),
        sa.Column("denied", sa.String(64), nullable=False, server_default=""),
        sa.Column("allow_bypass_governance", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", _TIMESTAMP, nullable=False),
        sa.Column("revoked_at", _TIMESTAMP, nullable=True),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"], name="access_keys_project_fkey"),
    )
    op.create_index("access_keys_project", "access_keys", ["project_id"])


def downgrade() -> None:
    op.drop_table("access_keys")
