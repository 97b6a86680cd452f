"""Change records get their position as they are inserted, not from a deferred trigger.

On PostgreSQL, 0002 (as first released) inserted every record with no position and had a
deferred constraint trigger set position and commit timestamp at COMMIT: each record was
written twice, and the second write (an index key changes) could not be a HOT update. The
writer now moves the partition row on and inserts the record with its position in one
statement, just before COMMIT. The trigger goes, and so does the `id` column it needed: a
record is named by (stream_name, partition, position), now the primary key, so `position`
is NOT NULL (a record without one is refused by the database) and each record has one index
entry instead of two.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from ripple.metabase.migrations.frozen.commit_trigger_0002 import (
    SQLITE_TRIGGER,
    install_commit_trigger,
)

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        bind.exec_driver_sql("DROP FUNCTION IF EXISTS ripple_change_record_commit() CASCADE")
    with op.batch_alter_table("change_records", recreate="auto") as batch:
        batch.drop_index("change_records_position_key")
        batch.drop_column("id")
        batch.alter_column("position", existing_type=sa.BigInteger, nullable=False)
        batch.create_primary_key("change_records_pkey", ["stream_name", "partition", "position"])
    if bind.dialect.name == "sqlite":  # the batch rebuilt the table, and dropped its trigger
        bind.exec_driver_sql(SQLITE_TRIGGER)


def downgrade() -> None:
    bind = op.get_bind()
    with op.batch_alter_table("change_records", recreate="auto") as batch:
        batch.drop_constraint("change_records_pkey", type_="primary")
        batch.alter_column("position", existing_type=sa.BigInteger, nullable=True)
        batch.create_index(
            "change_records_position_key", ["stream_name", "partition", "position"], unique=True
        )
    if bind.dialect.name == "postgresql":
        bind.exec_driver_sql("ALTER TABLE change_records ADD COLUMN id BIGSERIAL PRIMARY KEY")
    else:
        with op.batch_alter_table("change_records", recreate="always") as batch:
            batch.add_column(sa.Column("id", sa.Integer, primary_key=True, autoincrement=True))
    install_commit_trigger(bind)  # the trigger 0002 installed
