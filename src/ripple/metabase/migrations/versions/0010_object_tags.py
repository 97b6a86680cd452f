"""Object tags: `objects.tags`, and `bucket_eventing` watches them and records their
changes, so PutObjectTagging and DeleteObjectTagging make `ObjectTagging:*` events.

    ALTER TABLE objects ADD COLUMN tags JSON
    ALTER CHANGE STREAM bucket_eventing SET FOR objects(status, total_plain_size, stream_id,
                                                        user_metadata, tags)
    ALTER CHANGE STREAM bucket_eventing SET OPTIONS (exclude_update = FALSE,
                                                     value_capture_type = 'NEW_ROW_AND_OLD_VALUES')

UPDATEs are recorded from now on, but only those of transactions that do not exclude
themselves (the tagging operations; lock settings still do) and only when a watched column
changed. `NEW_ROW_AND_OLD_VALUES` gives an UPDATE every watched column's new value (status,
size and stream id: what its event's `versionId` and `size` need) and the old values of the
changed ones; INSERT and DELETE records carry exactly what they did under
`OLD_AND_NEW_VALUES`.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from ripple.metabase.migrations.frozen.change_streams_0002 import ColumnType, alter_change_stream

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# what the stream watches in `objects`: (column, Spanner type code, ordinal position)
_BEFORE = [
    ColumnType("status", "INT64", 6),
    ColumnType("total_plain_size", "INT64", 9),
    ColumnType("stream_id", "STRING", 5),
    ColumnType("user_metadata", "JSON", 12),
]
_AFTER = [*_BEFORE, ColumnType("tags", "JSON", 17)]


def upgrade() -> None:
    op.add_column("objects", sa.Column("tags", sa.JSON, nullable=True))
    alter_change_stream(
        op.get_bind(),
        "bucket_eventing",
        "objects",
        watched=_AFTER,
        options={"exclude_update": False, "value_capture_type": "NEW_ROW_AND_OLD_VALUES"},
    )


def downgrade() -> None:
    alter_change_stream(
        op.get_bind(),
        "bucket_eventing",
        "objects",
        watched=_BEFORE,
        options={"exclude_update": True, "value_capture_type": "OLD_AND_NEW_VALUES"},
    )
    with op.batch_alter_table("objects") as batch:
        batch.drop_column("tags")
