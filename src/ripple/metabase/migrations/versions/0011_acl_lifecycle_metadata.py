"""ACLs, lifecycle configurations, and the object columns metadata events need.

    ALTER TABLE objects ADD COLUMN acl JSON
    ALTER TABLE buckets ADD COLUMN acl JSON
    ALTER TABLE buckets ADD COLUMN lifecycle JSON
    ALTER CHANGE STREAM bucket_eventing SET FOR objects(status, total_plain_size, stream_id,
        user_metadata, tags, acl, retention_mode, retain_until, legal_hold, etag)

NULL is the canned `private` ACL, or no lifecycle rules. The ACL's JSON: docs/acl.md; why
each watched column: docs/changestream.md, "The `bucket_eventing` stream".

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from ripple.metabase.migrations.frozen.change_streams_0002 import ColumnType, alter_change_stream

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# what the stream watches in `objects`: (column, Spanner type code, ordinal position)
_BEFORE = [
    ColumnType("status", "INT64", 6),
    ColumnType("total_plain_size", "INT64", 9),
    ColumnType("stream_id", "STRING", 5),
    ColumnType("user_metadata", "JSON", 12),
    ColumnType("tags", "JSON", 17),
]
_AFTER = [
    *_BEFORE,
    ColumnType("acl", "JSON", 18),
    ColumnType("retention_mode", "INT64", 13),
    ColumnType("retain_until", "TIMESTAMP", 14),
    ColumnType("legal_hold", "BOOL", 15),
    ColumnType("etag", "STRING", 10),
]


def upgrade() -> None:
    op.add_column("objects", sa.Column("acl", sa.JSON, nullable=True))
    op.add_column("buckets", sa.Column("acl", sa.JSON, nullable=True))
    op.add_column("buckets", sa.Column("lifecycle", sa.JSON, nullable=True))
    alter_change_stream(op.get_bind(), "bucket_eventing", "objects", watched=_AFTER)


def downgrade() -> None:
    alter_change_stream(op.get_bind(), "bucket_eventing", "objects", watched=_BEFORE)
    # ALTER TABLE ... DROP COLUMN in place (SQLite ≥ 3.35): rebuilding `buckets` would drop
    # the table `objects` refers to, which SQLite's foreign keys refuse once it has rows
    with op.batch_alter_table("buckets", recreate="never") as batch:
        batch.drop_column("lifecycle")
        batch.drop_column("acl")
    with op.batch_alter_table("objects", recreate="never") as batch:
        batch.drop_column("acl")
