"""The change stream: its tables, the commit trigger (PostgreSQL), and `bucket_eventing`.

    CREATE CHANGE STREAM bucket_eventing FOR objects (status, total_plain_size)
    OPTIONS (exclude_ttl_deletes = TRUE, exclude_update = TRUE, allow_txn_exclusion = TRUE)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from ripple.changestream.ddl import create_change_stream, install_commit_trigger
from ripple.metabase.schema import objects

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


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
        objects,
        ["status", "total_plain_size"],
        {"exclude_ttl_deletes": True, "exclude_update": True, "allow_txn_exclusion": True},
    )


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        bind.exec_driver_sql("DROP FUNCTION IF EXISTS ripple_change_record_commit() CASCADE")
    for table in ("change_offsets", "change_records", "change_partitions", "change_streams"):
        op.drop_table(table)
