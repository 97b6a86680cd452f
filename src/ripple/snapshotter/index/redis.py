"""The Redis index (backend `redis`): one key per page, expiring, and per-writer sorted sets.

Entries are `{prefix}{writer_id}:{start_time}:{page_sequence}` strings holding the entry's
JSON, listed in two sorted sets per writer (by start_time, by page_sequence) and a set of
writers; nothing is ever parsed out of a key, so a writer id may hold `:`. Writes are
MULTI/EXEC transactions under WATCH, and a query reads the sorted set and the entries in
one WATCHed transaction, so a reader sees the old entries or the new one, never both and
never neither. Every error is `IndexError_`, without the password.

The keys, expiry and how a time range is queried: docs/snapshotter.md, "The Redis index".
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import redis
import redis.exceptions as rx
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from ripple.snapshotter.index.base import IndexEntry, IndexError_
from ripple.snapshotter.index.sql import one_line

__all__ = ["DEFAULT_PREFIX", "RedisIndex"]

DEFAULT_PREFIX = "snapshot:"
TIMEOUT_S = 5.0  # to connect, and for each reply
_CHUNK = 1000  # keys per MGET
_ATTEMPTS = 100  # WATCHed transactions tried before giving up (the keys kept changing)


class RedisIndex:
    """The index in the Redis database at `url`; see the module docstring."""

    backend = "redis"

    def __init__(self, url: str, ttl_days: int = 90, key_prefix: str = DEFAULT_PREFIX) -> None:
        scheme = url.partition("://")[0] if "://" in url else "redis"
        if ttl_days < 0:
            raise IndexError_(f"redis index: open: ttl_days must be 0 or more, not {ttl_days}")
        if len(key_prefix) < 2 or not key_prefix.endswith(":"):
            raise IndexError_(
                f"redis index: open: key_prefix {key_prefix!r} must end with ':', e.g. snapshot:"
            )
        try:
            client: redis.Redis = redis.Redis.from_url(
                url,
                decode_responses=True,
                socket_timeout=TIMEOUT_S,
                socket_connect_timeout=TIMEOUT_S,
                retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2),
            )
        except ValueError as e:
            raise IndexError_(f"redis index: open: {scheme}:// URL: {one_line(e)}") from None
        kwargs = client.connection_pool.connection_kwargs
        db = kwargs.get("db", 0)
        if "path" in kwargs:
            self.where = f"unix://{kwargs['path']}?db={db}"
        else:
            self.where = f"{scheme}://{kwargs.get('host', 'localhost')}:{kwargs.get('port')}/{db}"
        self._secret: str | None = kwargs.get("password") or None
        # typed Any: redis-py types each command's reply as "Awaitable[T] | T" (async or not)
        self._client: Any = client
        self.ttl_seconds = ttl_days * 86_400
        self.key_prefix = key_prefix
        self._base = key_prefix[:-1]
        try:
            with self._guard("connect"):
                client.ping()
        except IndexError_:
            client.close()
            raise

    # --- key names ------------------------------------------------------------------------

    def entry_key(self, entry: IndexEntry) -> str:
        return f"{self.key_prefix}{entry.writer_id}:{entry.start_time}:{entry.page_sequence}"

    def pages_key(self, writer_id: str) -> str:
        """The writer's entry keys, scored by start_time."""
        return f"{self._base}-pages:{writer_id}"

    def sequences_key(self, writer_id: str) -> str:
        """The writer's entry keys, scored by page_sequence."""
        return f"{self._base}-seqs:{writer_id}"

    @property
    def writers_key(self) -> str:
        return f"{self._base}-writers"

    # --- the Index protocol ---------------------------------------------------------------

    def publish(self, entry: IndexEntry) -> None:
        with self._guard("publish"):
            self._write((), entry)

    def replace(self, old: Sequence[IndexEntry], new: IndexEntry) -> None:
        with self._guard("replace"):
            self._write(old, new)

    def query(
        self, writer_id: str, since: int | None = None, until: int | None = None
    ) -> list[IndexEntry]:
        with self._guard("query"):
            entries = self._entries(writer_id, until)
        found = [e for e in entries if e.overlaps(since, until)]
        found.sort(key=lambda e: (e.start_time, e.page_sequence))
        return found

    def writers(self) -> list[str]:
        with self._guard("writers"):
            members = sorted(self._client.smembers(self.writers_key))
            with self._client.pipeline(transaction=False) as pipe:
                for writer in members:
                    pipe.exists(self.pages_key(writer))
                present = pipe.execute()
            gone = [w for w, there in zip(members, present, strict=True) if not there]
            if gone:
                self._forget_writers(gone)
        return [w for w, there in zip(members, present, strict=True) if there]

    def keys(self) -> set[str]:
        writers = self.writers()
        with self._guard("keys"):
            return {e.page_key for writer in writers for e in self._entries(writer, None)}

    def count(self) -> int:
        writers = self.writers()
        with self._guard("count"):
            return sum(len(self._entries(writer, None)) for writer in writers)

    def last_sequence(self, writer_id: str) -> int:
        sequences = self.sequences_key(writer_id)
        with self._guard("last sequence"):
            for _ in range(_ATTEMPTS):
                top: list[tuple[str, float]] = self._client.zrevrange(
                    sequences, 0, 99, withscores=True
                )
                if not top:
                    return -1
                values = self._client.mget([key for key, _ in top])
                for (_key, score), value in zip(top, values, strict=True):
                    if value is not None:
                        return int(score)
                self._forget(writer_id, [key for key, _ in top])
        raise self._gave_up("last sequence")

    def close(self) -> None:
        self._client.close()

    # --- helpers --------------------------------------------------------------------------

    def _write(self, old: Sequence[IndexEntry], new: IndexEntry) -> None:
        """Delete `old`, and any other entry of new's (writer, page_sequence); add `new`."""
        key = self.entry_key(new)
        pages, sequences = self.pages_key(new.writer_id), self.sequences_key(new.writer_id)
        with self._client.pipeline(transaction=True) as pipe:
            for _ in range(_ATTEMPTS):
                try:
                    pipe.watch(sequences)
                    seq = new.page_sequence
                    same: list[str] = pipe.zrangebyscore(sequences, seq, seq)
                    pipe.multi()
                    for entry in old:
                        self._queue_drop(pipe, entry.writer_id, [self.entry_key(entry)])
                    self._queue_drop(pipe, new.writer_id, [k for k in same if k != key])
                    pipe.set(key, new.to_json(), ex=self.ttl_seconds or None)
                    pipe.zadd(pages, {key: new.start_time})
                    pipe.zadd(sequences, {key: seq})
                    for renewed in (pages, sequences):
                        if self.ttl_seconds:
                            pipe.expire(renewed, self.ttl_seconds)
                        else:
                            pipe.persist(renewed)
                    pipe.sadd(self.writers_key, new.writer_id)
                    pipe.execute()
                    return
                except rx.WatchError:
                    continue
        raise self._gave_up("write")

    def _queue_drop(self, pipe: Any, writer_id: str, keys: list[str]) -> None:
        if keys:
            pipe.delete(*keys)
            pipe.zrem(self.pages_key(writer_id), *keys)
            pipe.zrem(self.sequences_key(writer_id), *keys)

    def _entries(self, writer_id: str, until: int | None) -> list[IndexEntry]:
        """The writer's live entries with start_time <= until, read in one snapshot."""
        pages = self.pages_key(writer_id)
        with self._client.pipeline(transaction=True) as pipe:
            for _ in range(_ATTEMPTS):
                try:
                    pipe.watch(pages)
                    keys: list[str] = pipe.zrangebyscore(
                        pages, "-inf", "+inf" if until is None else until
                    )
                    if not keys:
                        return []
                    pipe.multi()
                    for start in range(0, len(keys), _CHUNK):
                        pipe.mget(keys[start : start + _CHUNK])
                    values = [value for chunk in pipe.execute() for value in chunk]
                    break
                except rx.WatchError:
                    continue
            else:
                raise self._gave_up("read")
        stale = [key for key, value in zip(keys, values, strict=True) if value is None]
        if stale:
            self._forget(writer_id, stale)
        entries = []
        for key, value in zip(keys, values, strict=True):
            if value is not None:
                try:
                    entries.append(IndexEntry.from_json(value))
                except (ValueError, TypeError) as e:  # not JSON, or not an entry's fields
                    raise IndexError_(
                        f"redis index {self.where}: read: {key} is not an index entry: "
                        f"{one_line(e)}"
                    ) from e
        return entries

    def _forget(self, writer_id: str, keys: list[str]) -> None:
        """Drop entry keys found expired from the writer's sorted sets, unless a write came
        in between (then the next reader does it)."""
        with self._client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(self.pages_key(writer_id), *keys)
                values = pipe.mget(keys)
                gone = [key for key, value in zip(keys, values, strict=True) if value is None]
                pipe.multi()
                self._queue_drop(pipe, writer_id, gone)
                pipe.execute()
            except rx.WatchError:
                pass

    def _forget_writers(self, writer_ids: list[str]) -> None:
        """Drop writers whose sorted set expired (or emptied), unless one was written since."""
        pages = [self.pages_key(writer) for writer in writer_ids]
        with self._client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(*pages)
                if pipe.exists(*pages):
                    return
                pipe.multi()
                pipe.srem(self.writers_key, *writer_ids)
                pipe.execute()
            except rx.WatchError:
                pass

    def _gave_up(self, operation: str) -> IndexError_:
        return IndexError_(
            f"redis index {self.where}: {operation}: gave up after {_ATTEMPTS} attempts, "
            "the keys kept changing"
        )

    @contextmanager
    def _guard(self, operation: str) -> Iterator[None]:
        try:
            yield
        except (rx.RedisError, OSError) as e:
            raise IndexError_(
                f"redis index {self.where}: {operation}: {one_line(e, self._secret)}"
            ) from e
