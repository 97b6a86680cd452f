"""`bucket_eventing` also watches `stream_id`: an S3 version ID is the version number and
the first half of the stream id, so events of versioned buckets need both.

    ALTER CHANGE STREAM bucket_eventing SET FOR objects (status, total_plain_size, stream_id)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""

from __future__ import annotations

from alembic import op

from ripple.metabase.migrations.frozen.change_streams_0002 import ColumnType, alter_change_stream

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# what the stream watches in `objects`: (column, Spanner type code, ordinal position)
_BEFORE = [ColumnType("status", "INT64", 6), ColumnType("total_plain_size", "INT64", 9)]
_AFTER = [*_BEFORE, ColumnType("stream_id", "STRING", 5)]


def upgrade() -> None:
    alter_change_stream(op.get_bind(), "bucket_eventing", "objects", watched=_AFTER)


def downgrade() -> None:
    alter_change_stream(op.get_bind(), "bucket_eventing", "objects", watched=_BEFORE)
