"""The metabase tables, in SQLAlchemy Core. Alembic migrations create and change them.

Object keys are stored as UTF-8 bytes so both databases order them bytewise, as S3 lists
them. Times are stored in UTC and always read back timezone-aware.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

metadata = sa.MetaData()


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """A timestamp stored in UTC and read back timezone-aware on SQLite and PostgreSQL."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: ripple stores only aware UTC times")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"the database returned a {type(value).__name__}, not a datetime")
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


projects = sa.Table(
    "projects",
    metadata,
    sa.Column("id", sa.Uuid, primary_key=True),  # private: never leaves ripple
    sa.Column("public_id", sa.Uuid, nullable=False, unique=True),  # bucket owner in events
    sa.Column("name", sa.String(255), nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
)

buckets = sa.Table(
    "buckets",
    metadata,
    sa.Column("project_id", sa.Uuid, sa.ForeignKey("projects.id"), primary_key=True),
    sa.Column("name", sa.String(63), primary_key=True),
    sa.Column("versioning", sa.SmallInteger, nullable=False),
    sa.Column("object_lock_enabled", sa.Boolean, nullable=False),
    sa.Column("default_retention_mode", sa.SmallInteger, nullable=True),
    sa.Column("default_retention_days", sa.Integer, nullable=True),
    sa.Column("default_retention_years", sa.Integer, nullable=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    # the bucket ACL's grants, {"grants": [...]}; NULL: private (migration 0011)
    sa.Column("acl", sa.JSON, nullable=True),
    # the bucket's lifecycle rules as parsed; NULL: none (migration 0011)
    sa.Column("lifecycle", sa.JSON, nullable=True),
    sa.UniqueConstraint("name", name="buckets_name_key"),  # S3 bucket names are global
)

objects = sa.Table(
    "objects",
    metadata,
    sa.Column("project_id", sa.Uuid, primary_key=True),
    sa.Column("bucket_name", sa.String(63), primary_key=True),
    # UTF-8 bytes; change records carry them as the strings they are
    sa.Column("object_key", sa.LargeBinary, primary_key=True, info={"changestream_type": "STRING"}),
    sa.Column("version", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("stream_id", sa.Uuid, nullable=False),  # addresses the object's data
    sa.Column("status", sa.SmallInteger, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("expires_at", UTCDateTime, nullable=True),
    sa.Column("total_plain_size", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("etag", sa.String(255), nullable=False, server_default=""),
    sa.Column("content_type", sa.String(255), nullable=False, server_default=""),
    sa.Column("user_metadata", sa.JSON, nullable=True),
    sa.Column("retention_mode", sa.SmallInteger, nullable=True),
    sa.Column("retain_until", UTCDateTime, nullable=True),
    sa.Column("legal_hold", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("inline_data", sa.LargeBinary, nullable=True),
    # object tags, {key: value} in the order they were set; NULL: none (migration 0010)
    sa.Column("tags", sa.JSON, nullable=True),
    # the object ACL's grants, {"grants": [...]}; NULL: private (migration 0011)
    sa.Column("acl", sa.JSON, nullable=True),
    # the sizes of the parts of an object completed from a multipart upload, in order;
    # NULL: written in one piece (migration 0014)
    sa.Column("part_sizes", sa.JSON, nullable=True),
    # the version's additional checksum, {"algorithm", "type", "value", "parts"}; on a
    # pending upload the algorithm and type it declared; NULL: none (migration 0015)
    sa.Column("checksum", sa.JSON, nullable=True),
    sa.ForeignKeyConstraint(
        ["project_id", "bucket_name"],
        ["buckets.project_id", "buckets.name"],
        name="objects_bucket_fkey",
    ),
)

# At most one `null` version per key (statuses 3 and 6). Concurrent writers that both
# replace the null version collide here, and the loser retries (Metabase.run_write).
sa.Index(
    "objects_null_version_key",
    objects.c.project_id,
    objects.c.bucket_name,
    objects.c.object_key,
    unique=True,
    postgresql_where=objects.c.status.in_([3, 6]),
    sqlite_where=objects.c.status.in_([3, 6]),
)


# What the gateways over one metabase share (migration 0016), none of it in a change stream:
# a token bucket per project and limit, refilled by the database's clock
# (`ripple.metabase.rate_limits`) ...
rate_limits = sa.Table(
    "rate_limits",
    metadata,
    sa.Column("project_id", sa.Uuid, primary_key=True),
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("tokens", sa.Float, nullable=False),
    sa.Column("updated_s", sa.Float, nullable=False),  # seconds since the epoch
)

# ... and the idempotency tokens of RenameObject (`ripple.metabase.client_tokens`)
client_tokens = sa.Table(
    "client_tokens",
    metadata,
    sa.Column("project_id", sa.Uuid, primary_key=True),
    sa.Column("bucket_name", sa.String(63), primary_key=True),
    sa.Column("token", sa.String(64), primary_key=True),
    sa.Column("request", sa.Text, nullable=False),  # what the request asked, to compare
    sa.Column("done", sa.Boolean, nullable=False),  # False: in progress
    sa.Column("expires_ns", sa.BigInteger, nullable=False),
)
