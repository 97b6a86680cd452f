"""Bucket events: a second change stream, `project_eventing`, over the buckets table, so
CreateBucket and DeleteBucket make `BucketCreated:Put` and `BucketRemoved:Delete` events for
project-wide notifications (a topic's `project-events` argument).

    CREATE CHANGE STREAM project_eventing FOR buckets(versioning, object_lock_enabled,
                                                      created_at)
    OPTIONS (exclude_update = TRUE, value_capture_type = 'OLD_AND_NEW_VALUES')

One partition: bucket changes are rare, and one partition keeps them all in commit order.
It allows no transaction exclusion: every project's bucket changes are recorded, and the
pipeline sends them only where a project asked for them.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

from ripple.metabase.migrations.frozen.change_streams_0002 import (
    ColumnType,
    create_change_stream,
    drop_change_stream,
)

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

STREAM = "project_eventing"
# what the stream records of `buckets`: (column, Spanner type code, ordinal position)
BUCKETS_KEY = [ColumnType("project_id", "STRING", 1), ColumnType("name", "STRING", 2)]
WATCHED = [
    ColumnType("versioning", "INT64", 3),
    ColumnType("object_lock_enabled", "BOOL", 4),
    ColumnType("created_at", "TIMESTAMP", 8),
]


def upgrade() -> None:
    create_change_stream(
        op.get_bind(),
        STREAM,
        "buckets",
        BUCKETS_KEY,
        WATCHED,
        {"exclude_update": True},
        partitions=1,
    )


def downgrade() -> None:
    drop_change_stream(op.get_bind(), STREAM)
