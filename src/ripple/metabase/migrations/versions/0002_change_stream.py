"""The change stream: its tables, their commit trigger, and `bucket_eventing`.

    CREATE CHANGE STREAM bucket_eventing FOR objects (status, total_plain_size)
    OPTIONS (exclude_ttl_deletes = TRUE, exclude_update = TRUE, allow_txn_exclusion = TRUE)

The trigger is the one this step installed when it was released (on PostgreSQL a deferred
one, which 0004 drops).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from ripple.metabase.migrations.frozen.change_streams_0002 import (
    ColumnType,
    create_change_stream,
)
from ripple.metabase.migrations.frozen.commit_trigger_0002 import install_commit_trigger

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# what the stream records of `objects`: (column, Spanner type code, ordinal position)
OBJECTS_KEY = [
    ColumnType("project_id", "STRING", 1),
    ColumnType("bucket_name", "STRING", 2),
    ColumnType("object_key", "STRING", 3),  # stored as bytes, a UTF-8 string
    ColumnType("version", "INT64", 4),
]
WATCHED = [ColumnType("status", "INT64", 6), ColumnType("total_plain_size", "INT64", 9)]


def upgrade() -> None:
    op.create_table(
        "change_streams",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("table_name", sa.String(64), nullable=False),
        sa.Column("columns", sa.JSON, nullable=False),
        sa.Column("column_types", sa.JSON, nullable=False),
        sa.Column("options", sa.JSON, nullable=False),
        sa.Column("partitions", sa.Integer, nullable=False),
        sa.Column("created_at_ns", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "change_partitions",
        sa.Column("stream_name", sa.String(64), primary_key=True),
        sa.Column("partition", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("next_position", sa.BigInteger, nullable=False),
        sa.Column("last_commit_ns", sa.BigInteger, nullable=False),
        sa.Column("last_transaction", sa.String(32), nullable=True),
    )
    op.create_table(
        "change_records",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("stream_name", sa.String(64), nullable=False),
        sa.Column("stream_version", sa.Integer, nullable=False),
        sa.Column("partition", sa.Integer, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=True),
        sa.Column("commit_ns", sa.BigInteger, nullable=False),
        sa.Column("transaction_id", sa.String(32), nullable=False),
        sa.Column("record_sequence", sa.Integer, nullable=False),
        sa.Column("is_last_in_partition", sa.Boolean, nullable=False),
        sa.Column("records_in_transaction", sa.Integer, nullable=False),
        sa.Column("partitions_in_transaction", sa.Integer, nullable=False),
        sa.Column("mod_type", sa.SmallInteger, nullable=False),
        sa.Column("mods", sa.Text, nullable=False),
        sa.Column("transaction_tag", sa.Text, nullable=False),
        sa.Column("is_system_transaction", sa.Boolean, nullable=False),
    )
    op.create_index(
        "change_records_position_key",
        "change_records",
        ["stream_name", "partition", "position"],
        unique=True,
    )
    op.create_table(
        "change_offsets",
        sa.Column("stream_name", sa.String(64), primary_key=True),
        sa.Column("consumer", sa.String(128), primary_key=True),
        sa.Column("partition", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("updated_at_ns", sa.BigInteger, nullable=False),
    )
    bind = op.get_bind()
    install_commit_trigger(bind)
    create_change_stream(
        bind,
        "bucket_eventing",
        "objects",
        OBJECTS_KEY,
        WATCHED,
        {"exclude_ttl_deletes": True, "exclude_update": True, "allow_txn_exclusion": True},
    )


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        bind.exec_driver_sql("DROP FUNCTION IF EXISTS ripple_change_record_commit() CASCADE")
    for table in ("change_offsets", "change_records", "change_partitions", "change_streams"):
        op.drop_table(table)
