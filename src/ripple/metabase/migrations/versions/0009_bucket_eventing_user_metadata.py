"""bucket_eventing also watches objects.user_metadata, so an event knows its object's user
metadata (S3Metadata filter rules of bucket notifications).

    ALTER CHANGE STREAM bucket_eventing SET FOR objects(status, total_plain_size, stream_id,
                                                        user_metadata)

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-21
"""

from __future__ import annotations

from alembic import op

from ripple.changestream.ddl import alter_change_stream
from ripple.metabase.schema import objects

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    alter_change_stream(
        op.get_bind(),
        "bucket_eventing",
        objects,
        columns=["status", "total_plain_size", "stream_id", "user_metadata"],
    )


def downgrade() -> None:
    alter_change_stream(
        op.get_bind(),
        "bucket_eventing",
        objects,
        columns=["status", "total_plain_size", "stream_id"],
    )
