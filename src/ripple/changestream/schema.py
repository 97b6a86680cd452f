"""The change stream's tables, in SQLAlchemy Core (created by migration 0002).

- `change_streams`: every version of every stream definition;
- `change_partitions`: per stream and partition, the next position and the last commit
  timestamp; a committing transaction holds its partition's row while it takes positions,
  which makes positions dense and ordered as the commits are;
- `change_records`: the data change records, one per mod type per partition per transaction;
- `change_offsets`: how far each named consumer has read each partition.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

change_streams = sa.Table(
    "change_streams",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("table_name", sa.String(64), nullable=False),
    sa.Column("columns", sa.JSON, nullable=False),  # watched columns, in order
    sa.Column("column_types", sa.JSON, nullable=False),  # Spanner's column_types, keys first
    sa.Column("options", sa.JSON, nullable=False),
    sa.Column("partitions", sa.Integer, nullable=False),
    sa.Column("created_at_ns", sa.BigInteger, nullable=False),
)

change_partitions = sa.Table(
    "change_partitions",
    metadata,
    sa.Column("stream_name", sa.String(64), primary_key=True),
    sa.Column("partition", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("next_position", sa.BigInteger, nullable=False),  # the last position taken
    sa.Column("last_commit_ns", sa.BigInteger, nullable=False),
    sa.Column(
        "last_transaction", sa.String(32), nullable=True
    ),  # transaction_id of the last commit
)

change_records = sa.Table(
    "change_records",
    metadata,
    # A record is named by its place: stream, partition, position. Position and commit
    # timestamp are taken just before COMMIT, under the partition's row lock
    # (ripple.changestream.writer), and the record is inserted with them.
    sa.Column("stream_name", sa.String(64), primary_key=True),
    sa.Column("partition", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("position", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("stream_version", sa.Integer, nullable=False),
    sa.Column("commit_ns", sa.BigInteger, nullable=False),
    sa.Column("transaction_id", sa.String(32), nullable=False),
    sa.Column("record_sequence", sa.Integer, nullable=False),
    sa.Column("is_last_in_partition", sa.Boolean, nullable=False),
    sa.Column("records_in_transaction", sa.Integer, nullable=False),
    sa.Column("partitions_in_transaction", sa.Integer, nullable=False),
    sa.Column("mod_type", sa.SmallInteger, nullable=False),
    sa.Column("mods", sa.Text, nullable=False),  # JSON array of {keys, new_values, old_values}
    sa.Column("transaction_tag", sa.Text, nullable=False),
    sa.Column("is_system_transaction", sa.Boolean, nullable=False),
)
change_offsets = sa.Table(
    "change_offsets",
    metadata,
    sa.Column("stream_name", sa.String(64), primary_key=True),
    sa.Column("consumer", sa.String(128), primary_key=True),
    sa.Column("partition", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("position", sa.BigInteger, nullable=False),  # the last position consumed
    sa.Column("updated_at_ns", sa.BigInteger, nullable=False),
)
