"""What ListObjects and ListObjectVersions share: an ordered scan of committed rows (key
ascending, version descending) from a position, and S3's delimiter roll-up into common
prefixes. Keys are UTF-8, which never holds the byte 0xFF, so `p + b"\\xff"` sorts after
every key that starts with `p` and before every greater key that does not."""

from __future__ import annotations

from collections.abc import Collection

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ripple.metabase.errors import InvalidArgument
from ripple.metabase.rows import METADATA_COLUMNS, at_bucket, object_from_row
from ripple.metabase.schema import objects
from ripple.metabase.types import COMMITTED_STATUSES, BucketLocation, Object

MAX_KEYS = 1000
BATCH = 500
_PAST = b"\xff"


def check_max_keys(max_keys: int) -> int:
    if max_keys < 0:
        raise InvalidArgument(f"max-keys must be 0 or more, got {max_keys}")
    return min(max_keys, MAX_KEYS)


def past(prefix: bytes) -> bytes:
    """A position after every key that starts with `prefix`."""
    return prefix + _PAST


def common_prefix(key: str, prefix: str, delimiter: str) -> str | None:
    """The common prefix `key` rolls up into under `delimiter`, if it does."""
    if not delimiter:
        return None
    at = key.find(delimiter, len(prefix))
    return None if at < 0 else key[: at + len(delimiter)]


def start_position(marker: str, prefix: str, delimiter: str) -> bytes | None:
    """The key to list after for a marker; a marker that is a common prefix skips all of it."""
    if not marker:
        return None
    raw = marker.encode("utf-8")
    return past(raw) if common_prefix(marker, prefix, delimiter) == marker else raw


def scan(
    conn: Connection,
    loc: BucketLocation,
    prefix: bytes,
    after_key: bytes | None,
    after_version: int | None = None,
    limit: int = BATCH,
    *,
    statuses: Collection[int] = COMMITTED_STATUSES,
    newest_first: bool = True,
) -> list[Object]:
    """Rows of `statuses` (committed ones unless told) under `prefix` after the position
    (`after_key`, `after_version`), in key order and within a key newest first (or oldest
    first): with a version, that key's next versions come first; without, the next key."""
    where = [at_bucket(loc), objects.c.status.in_(statuses)]
    if prefix:
        where += [objects.c.object_key >= prefix, objects.c.object_key < past(prefix)]
    if after_key is not None:
        if after_version is None:
            where.append(objects.c.object_key > after_key)
        else:
            next_version = (
                objects.c.version < after_version
                if newest_first
                else objects.c.version > after_version
            )
            where.append(
                sa.or_(
                    objects.c.object_key > after_key,
                    sa.and_(objects.c.object_key == after_key, next_version),
                )
            )
            # the same bound the index can start from: under the OR alone, PostgreSQL read
            # the bucket's keys from its first one at every page (a walk of N keys in N²/page)
            where.append(objects.c.object_key >= after_key)
    version_order = objects.c.version.desc() if newest_first else objects.c.version
    query = (
        sa.select(*METADATA_COLUMNS)
        .where(*where)
        .order_by(objects.c.object_key, version_order)
        .limit(limit)
    )
    return [object_from_row(r) for r in conn.execute(query)]
