"""A later migration step, for the tests only: change bucket_eventing's options.

    ALTER CHANGE STREAM bucket_eventing SET OPTIONS (value_capture_type = 'NEW_VALUES',
                                                     exclude_delete = TRUE)

Revision ID: 9001
Revises: 0018 (the newest real revision; move it along when a new one is added)
"""

from __future__ import annotations

from alembic import op

from ripple.changestream.ddl import alter_change_stream
from ripple.metabase.schema import objects

revision = "9001"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    alter_change_stream(
        op.get_bind(),
        "bucket_eventing",
        objects,
        options={"value_capture_type": "NEW_VALUES", "exclude_delete": True},
    )


def downgrade() -> None:
    alter_change_stream(
        op.get_bind(),
        "bucket_eventing",
        objects,
        options={"value_capture_type": "NEW_ROW_AND_OLD_VALUES", "exclude_delete": False},
    )
