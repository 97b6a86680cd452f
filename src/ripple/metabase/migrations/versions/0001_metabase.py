"""The metabase: projects, buckets and objects.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# the models' UTCDateTime as the database stores it: a timestamp with time zone
_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "projects",
        sa.Column("id", sa.Uuid, primary_key=True),
        sa.Column("public_id", sa.Uuid, nullable=False, unique=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("created_at", _TIMESTAMP, nullable=False),
    )
    op.create_table(
        "buckets",
        sa.Column("project_id", sa.Uuid, sa.ForeignKey("projects.id"), primary_key=True),
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("versioning", sa.SmallInteger, nullable=False),
        sa.Column("object_lock_enabled", sa.Boolean, nullable=False),
        sa.Column("default_retention_mode", sa.SmallInteger, nullable=True),
        sa.Column("default_retention_days", sa.Integer, nullable=True),
        sa.Column("default_retention_years", sa.Integer, nullable=True),
        sa.Column("created_at", _TIMESTAMP, nullable=False),
        sa.UniqueConstraint("name", name="buckets_name_key"),
    )
    op.create_table(
        "objects",
        sa.Column("project_id", sa.Uuid, primary_key=True),
        sa.Column("bucket_name", sa.String(63), primary_key=True),
        sa.Column("object_key", sa.LargeBinary, primary_key=True),
        sa.Column("version", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("stream_id", sa.Uuid, nullable=False),
        sa.Column("status", sa.SmallInteger, nullable=False),
        sa.Column("created_at", _TIMESTAMP, nullable=False),
        sa.Column("expires_at", _TIMESTAMP, nullable=True),
        sa.Column("total_plain_size", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("etag", sa.String(255), nullable=False, server_default=""),
        sa.Column("content_type", sa.String(255), nullable=False, server_default=""),
        sa.Column("user_metadata", sa.JSON, nullable=True),
        sa.Column("retention_mode", sa.SmallInteger, nullable=True),
        sa.Column("retain_until", _TIMESTAMP, nullable=True),
        sa.Column("legal_hold", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("inline_data", sa.LargeBinary, nullable=True),
        sa.ForeignKeyConstraint(
            ["project_id", "bucket_name"],
            ["buckets.project_id", "buckets.name"],
            name="objects_bucket_fkey",
        ),
    )
    null_version = sa.column("status").in_([3, 6])
    op.create_index(
        "objects_null_version_key",
        "objects",
        ["project_id", "bucket_name", "object_key"],
        unique=True,
        postgresql_where=null_version,
        sqlite_where=null_version,
    )


def downgrade() -> None:
    op.drop_table("objects")
    op.drop_table("buckets")
    op.drop_table("projects")
