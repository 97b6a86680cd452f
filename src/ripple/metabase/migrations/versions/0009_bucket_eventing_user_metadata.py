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

from ripple.metabase.migrations.frozen.change_streams_0002 import ColumnType, alter_change_stream

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# what the stream watches in `objects`: (column, Spanner type code, ordinal position)
_BEFORE = [
    ColumnType("status", "INT64", 6),
    ColumnType("total_plain_size", "INT64", 9),
    ColumnType("stream_id", "STRING", 5),
]
_AFTER = [*_BEFORE, ColumnType("user_metadata", "JSON", 12)]


def upgrade() -> None:
    alter_change_stream(op.get_bind(), "bucket_eventing", "objects", watched=_AFTER)


def downgrade() -> None:
    alter_change_stream(op.get_bind(), "bucket_eventing", "objects", watched=_BEFORE)
