"""Where pages are listed for discovery and replay: SQLite, Redis or PostgreSQL.

`open_index` opens the backend a snapshotter's settings name (`index`, `index-url`,
`index-ttl-days`); the backends are `sqlite.SqliteIndex`, `redis.RedisIndex` and
`postgresql.PostgresIndex`, the SQL two sharing `sql.SqlIndex`.
"""

from ripple.snapshotter.index.base import Index, IndexEntry, IndexError_
from ripple.snapshotter.settings import SnapshotterSettings

__all__ = ["Index", "IndexEntry", "IndexError_", "open_index"]


def open_index(settings: SnapshotterSettings) -> Index:
    """The index of `settings`, open (its table made); `IndexError_` if it cannot be."""
    # imported here: a process needs only its own backend's client library
    if settings.index == "sqlite":
        from ripple.snapshotter.index.sqlite import SqliteIndex

        return SqliteIndex(settings.index_location)
    if settings.index == "redis":
        from ripple.snapshotter.index.redis import RedisIndex

        return RedisIndex(settings.index_url, settings.index_ttl_days)
    if settings.index == "postgresql":
        from ripple.snapshotter.index.postgresql import PostgresIndex

        return PostgresIndex(settings.index_url)
    raise IndexError_(f"unknown index backend {settings.index!r}: use sqlite, redis or postgresql")
