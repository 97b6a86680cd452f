"""Rename an object (S3 RenameObject), or every key under a prefix, without copying data.

A rename is one write transaction that deletes the source's row and inserts a row at the
destination carrying the same stream id (so the data file, or the inline data, moves with
the row), ETag, size, content type, user metadata, tags, ACL and `created_at`; the change
stream sees a DELETE and an INSERT in one transaction tagged `rename` or `rename-prefix`.
Only unversioned buckets (as S3: directory buckets), never a locked source. One key: an
existing destination is replaced as an overwrite replaces it (the caller frees `removed`
once committed), under S3's conditions on both keys. A prefix: every committed key under it
moves, all or none, to a destination prefix that holds no key, at most `max_keys`.

Conditions, refusals and their errors: docs/gateway.md, "Rename".
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

import sqlalchemy as sa

from ripple.changestream.capture import capture_of
from ripple.changestream.tag import Operation, TransactionTag
from ripple.metabase.db import Metabase
from ripple.metabase.errors import (
    DestinationPrefixNotEmpty,
    InvalidRenameRequest,
    ObjectNotFound,
    PreconditionFailed,
    TooManyKeysToRename,
)
from ripple.metabase.listing import past
from ripple.metabase.objectlock import check_deletable
from ripple.metabase.rows import (
    at_bucket,
    delete_rows,
    get_bucket,
    insert_rows,
    key_bytes,
    latest_committed,
    lock_keys,
    next_version,
    note_bucket,
    object_from_row,
    remove_null_version,
    require_aware,
)
from ripple.metabase.schema import objects
from ripple.metabase.types import (
    COMMITTED_STATUSES,
    Bucket,
    BucketLocation,
    Object,
    ObjectLocation,
    Status,
    Versioning,
)
from ripple.metabase.write_condition import etag_matches

DEFAULT_MAX_RENAME_KEYS = 1000
_BATCH = 500  # rows per INSERT / DELETE statement (bind parameter limits)


@dataclass(frozen=True)
class RenameConditions:
    """S3 RenameObject's conditional headers: `if_*` on the destination (`If-Match`, …),
    `source_if_*` on the source (`x-amz-rename-source-if-*`). ETags may be quoted, weak
    (`W/`) or a comma-separated list; `*` matches any existing object."""

    if_match: str = ""
    if_none_match: str = ""
    if_modified_since: datetime | None = None
    if_unmodified_since: datetime | None = None
    source_if_match: str = ""
    source_if_none_match: str = ""
    source_if_modified_since: datetime | None = None
    source_if_unmodified_since: datetime | None = None


@dataclass(frozen=True)
class RenameResult:
    object: Object  # the row now at the destination
    source: Object  # the row deleted at the source (its data now belongs to `object`)
    removed: list[Object] = field(default_factory=list)  # replaced at the destination: free


@dataclass(frozen=True)
class PrefixRenameResult:
    objects: list[Object]  # the rows now under the destination prefix, in key order
    sources: list[Object]  # the rows deleted under the source prefix, in the same order


def rename_object(
    db: Metabase,
    src: ObjectLocation,
    dst_key: str,
    *,
    conditions: RenameConditions | None = None,
    tag: TransactionTag | None = None,
) -> RenameResult:
    """Rename the latest object at `src` to `dst_key` in the same bucket."""
    conditions = conditions or RenameConditions()
    _check_condition_times(conditions)
    raw_src, raw_dst = key_bytes(src.object_key), key_bytes(dst_key)
    dst = replace(src, object_key=dst_key)
    if raw_src == raw_dst:
        raise InvalidRenameRequest(
            f"the rename source and destination are the same key ({dst_key!r}); "
            "name a different destination"
        )
    for what, key in (("source", src.object_key), ("destination", dst_key)):
        if key.endswith("/"):
            raise InvalidRenameRequest(
                f"RenameObject does not rename keys ending with '/' (the {what} {key!r}); "
                "to rename every key under a prefix, send x-ripple-rename-prefix: true"
            )

    def tx(conn: sa.Connection) -> RenameResult:
        now = db.now()
        bucket = _start_rename(conn, src.bucket)
        lock_keys(conn, src, [raw_src, raw_dst])  # one statement, sorted: no deadlock
        source = latest_committed(conn, src)
        if source is None or source.is_delete_marker:
            raise ObjectNotFound(f"no such key {src.object_key!r} to rename")
        current = latest_committed(conn, dst)
        if current is not None and current.is_delete_marker:
            current = None
        _check_source(source, conditions)
        _check_destination(current, conditions)
        check_deletable(source, now, bypass=False)
        removed = remove_null_version(conn, bucket, dst, now, bypass=False)
        moved = _moved(conn, source, dst_key)
        delete_rows(conn, [source])
        insert_rows(conn, [moved])
        capture_of(conn).default_etag(moved.etag)
        return RenameResult(moved, source, removed)

    tag = (tag or TransactionTag()).defaults(operation=Operation.RENAME, rename_from=src.object_key)
    return db.run_write(tx, tag, exclude_txn_from_change_streams=False)


def rename_prefix(
    db: Metabase,
    bucket: BucketLocation,
    src_prefix: str,
    dst_prefix: str,
    *,
    max_keys: int = DEFAULT_MAX_RENAME_KEYS,
    tag: TransactionTag | None = None,
) -> PrefixRenameResult:
    """Move every committed key under `src_prefix` to `dst_prefix` + the rest of the key,
    atomically; refused, with nothing changed, if the destination prefix holds any key."""
    raw_src, raw_dst = _check_prefixes(src_prefix, dst_prefix)

    def tx(conn: sa.Connection) -> PrefixRenameResult:
        now = db.now()
        _start_rename(conn, bucket)
        sources = _rows_under(conn, bucket, raw_src, max_keys, lock=False)
        if not sources:
            raise ObjectNotFound(f"no key under the prefix {src_prefix!r} to rename")
        targets = [dst_prefix + s.object_key[len(src_prefix) :] for s in sources]
        locked = {key_bytes(s.object_key) for s in sources} | {key_bytes(t) for t in targets}
        lock_keys(conn, bucket, sorted(locked))
        # what changed before the locks were held: lock any new key too, and read again
        while True:
            sources = _rows_under(conn, bucket, raw_src, max_keys, lock=True)
            if not sources:
                raise ObjectNotFound(f"no key under the prefix {src_prefix!r} to rename")
            targets = [dst_prefix + s.object_key[len(src_prefix) :] for s in sources]
            wanted = {key_bytes(s.object_key) for s in sources} | {key_bytes(t) for t in targets}
            if wanted <= locked:
                break
            lock_keys(conn, bucket, sorted(wanted - locked))
            locked |= wanted
        occupied = _first_key_under(conn, bucket, raw_dst)
        if occupied is not None:
            raise DestinationPrefixNotEmpty(
                f"the destination prefix {dst_prefix!r} already holds {occupied!r}: like a "
                "directory rename, the destination must not exist; delete its keys or "
                "choose another prefix"
            )
        for source in sources:
            check_deletable(source, now, bypass=False)
        moved = [_moved(conn, s, t) for s, t in zip(sources, targets, strict=True)]
        for start in range(0, len(sources), _BATCH):
            delete_rows(conn, sources[start : start + _BATCH])
        for start in range(0, len(moved), _BATCH):
            insert_rows(conn, moved[start : start + _BATCH])
        return PrefixRenameResult(moved, sources)

    tag = (tag or TransactionTag()).defaults(
        operation=Operation.RENAME_PREFIX, rename_from=src_prefix, rename_to=dst_prefix
    )
    return db.run_write(tx, tag, exclude_txn_from_change_streams=False)


# --- steps -----------------------------------------------------------------------------


def _start_rename(conn: sa.Connection, loc: BucketLocation) -> Bucket:
    """Hold the bucket's configuration (as every key writer does first), and refuse
    versioned buckets."""
    bucket = get_bucket(conn, loc, lock="share")
    note_bucket(conn, bucket)
    if bucket.versioning is not Versioning.UNVERSIONED:
        state = "Enabled" if bucket.versioning is Versioning.ENABLED else "Suspended"
        raise InvalidRenameRequest(
            f"RenameObject is not supported on versioned buckets: versioning of bucket "
            f"{bucket.name!r} is {state}"
        )
    return bucket


def _moved(conn: sa.Connection, source: Object, dst_key: str) -> Object:
    """The source's row as it will stand at `dst_key`: the same data, metadata and dates."""
    dst = replace(source.location, object_key=dst_key)
    return replace(
        source,
        object_key=dst_key,
        version=next_version(conn, dst),
        status=Status.COMMITTED_UNVERSIONED,
    )


def _check_prefixes(src_prefix: str, dst_prefix: str) -> tuple[bytes, bytes]:
    for what, prefix in (("source", src_prefix), ("destination", dst_prefix)):
        if not prefix or not prefix.endswith("/"):
            raise InvalidRenameRequest(
                f"a prefix rename needs prefixes ending with '/'; the {what} is {prefix!r}"
            )
    raw_src, raw_dst = key_bytes(src_prefix), key_bytes(dst_prefix)
    if raw_src.startswith(raw_dst) or raw_dst.startswith(raw_src):
        raise InvalidRenameRequest(
            f"the prefixes {src_prefix!r} and {dst_prefix!r} overlap: one holds the other, "
            "so the renamed keys would land under the source"
        )
    return raw_src, raw_dst


def _rows_under(
    conn: sa.Connection, loc: BucketLocation, prefix: bytes, max_keys: int, *, lock: bool
) -> list[Object]:
    """The committed rows under `prefix` in key order (unversioned: one per key), refusing
    more than `max_keys`."""
    where = sa.and_(
        at_bucket(loc),
        objects.c.status.in_(COMMITTED_STATUSES),
        objects.c.object_key >= prefix,
        objects.c.object_key < past(prefix),
    )
    query = sa.select(objects).where(where).order_by(objects.c.object_key).limit(max_keys + 1)
    if lock and conn.dialect.name == "postgresql":
        query = query.with_for_update()
    rows = [object_from_row(r) for r in conn.execute(query)]
    if len(rows) > max_keys:
        count = conn.execute(sa.select(sa.func.count()).select_from(objects).where(where))
        raise TooManyKeysToRename(
            f"the prefix {prefix.decode()!r} holds {count.scalar_one()} keys; a prefix rename "
            f"moves at most {max_keys} (raise s3.max-rename-keys, RIPPLE_S3_MAX_RENAME_KEYS)"
        )
    return [r for r in rows if not r.is_delete_marker]


def _first_key_under(conn: sa.Connection, loc: BucketLocation, prefix: bytes) -> str | None:
    query = (
        sa.select(objects.c.object_key)
        .where(
            at_bucket(loc),
            objects.c.status.in_(COMMITTED_STATUSES),
            objects.c.object_key >= prefix,
            objects.c.object_key < past(prefix),
        )
        .order_by(objects.c.object_key)
        .limit(1)
    )
    raw = conn.execute(query).scalar()
    return None if raw is None else bytes(raw).decode("utf-8")


# --- conditions ------------------------------------------------------------------------


def _check_condition_times(conditions: RenameConditions) -> None:
    for name in (
        "if_modified_since",
        "if_unmodified_since",
        "source_if_modified_since",
        "source_if_unmodified_since",
    ):
        require_aware(getattr(conditions, name), name)


def _last_modified(obj: Object) -> datetime:
    return obj.created_at.replace(microsecond=0)  # HTTP dates have whole seconds


def _check_source(source: Object, c: RenameConditions) -> None:
    """The `x-amz-rename-source-if-*` conditions, as S3 judges the copy-source ones: an
    `if-match` that holds overrides `if-unmodified-since`, an `if-none-match` that holds
    overrides `if-modified-since`."""
    failed = []
    if c.source_if_match:
        if not etag_matches(c.source_if_match, source.etag):
            failed.append("x-amz-rename-source-if-match")
    elif c.source_if_unmodified_since and _last_modified(source) > c.source_if_unmodified_since:
        failed.append("x-amz-rename-source-if-unmodified-since")
    if c.source_if_none_match:
        if etag_matches(c.source_if_none_match, source.etag):
            failed.append("x-amz-rename-source-if-none-match")
    elif c.source_if_modified_since and _last_modified(source) <= c.source_if_modified_since:
        failed.append("x-amz-rename-source-if-modified-since")
    if failed:
        raise PreconditionFailed(
            f"the rename source {source.object_key!r} does not meet {', '.join(failed)}"
        )


def _check_destination(current: Object | None, c: RenameConditions) -> None:
    """`If-Match` needs a destination with a matching ETag; `If-None-Match: *` needs none
    (an ETag: none with that ETag); `If-Modified-Since` needs a destination modified after
    the time; `If-Unmodified-Since` refuses one modified after it (a missing destination
    was not modified). If-Match takes precedence over If-Unmodified-Since, If-None-Match
    over If-Modified-Since (RFC 7232)."""
    failed = []
    if c.if_match:
        if current is None or not etag_matches(c.if_match, current.etag):
            failed.append("If-Match")
    elif (
        c.if_unmodified_since
        and current is not None
        and _last_modified(current) > c.if_unmodified_since
    ):
        failed.append("If-Unmodified-Since")
    if c.if_none_match:
        if current is not None and etag_matches(c.if_none_match, current.etag):
            failed.append("If-None-Match")
    elif c.if_modified_since and (
        current is None or _last_modified(current) <= c.if_modified_since
    ):
        failed.append("If-Modified-Since")
    if failed:
        state = "does not exist" if current is None else f"has ETag {current.etag!r}"
        raise PreconditionFailed(
            f"the rename destination (which {state}) does not meet {', '.join(failed)}"
        )
