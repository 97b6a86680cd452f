"""Expirations are events: `bucket_eventing` stops excluding system (TTL and lifecycle)
transactions, so lifecycle rules and `ripple metabase expire` make
`LifecycleExpiration:Delete` and `LifecycleExpiration:DeleteMarkerCreated` events.

    ALTER CHANGE STREAM bucket_eventing SET OPTIONS (exclude_ttl_deletes = FALSE)

A stream that sets `exclude_ttl_deletes = TRUE` still leaves every system transaction out
(docs/changestream.md).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

from ripple.metabase.migrations.frozen.change_streams_0002 import alter_change_stream

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    alter_change_stream(
        op.get_bind(), "bucket_eventing", "objects", options={"exclude_ttl_deletes": False}
    )


def downgrade() -> None:
    alter_change_stream(
        op.get_bind(), "bucket_eventing", "objects", options={"exclude_ttl_deletes": True}
    )
