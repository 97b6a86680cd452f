"""`bucket_eventing` also watches `stream_id`: an S3 version ID is the version number and
the first half of the stream id, so events of versioned buckets need both.

    ALTER CHANGE STREAM bucket_eventing SET FOR objects (status, total_plain_size, stream_id)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from __future__ import annotations

from alembic import op

from ripple.changestream.ddl import alter_change_stream
from ripple.metabase.schema import objects

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    alter_change_stream(
        op.get_bind(),
        "bucket_eventing",
        objects,
        columns=["status", "total_plain_size", "stream_id"],
    )


def downgrade() -> None:
    alter_change_stream(
        op.get_bind(), "bucket_eventing", objects, columns=["status", "total_plain_size"]
    )
