"""DeleteObjects: delete up to 1000 objects or versions of one bucket in one request.

One transaction and a constant number of statements whatever the item count (DESIGN.md
"Bulk delete"): read the bucket, the highest version of every key, and every row an item
may touch (one statement each, `UNNEST` arrays on PostgreSQL, a VALUES list on SQLite);
apply the items in request order to that in-memory view, as sequential DeleteObject calls
would (an item repeated in the request is applied once); then write the net result with
one DELETE and one multi-row INSERT of delete markers. Per item, the semantics are those
of `delete_object` (no version ID) and `delete_object_version` (with one); an item object
lock refuses is an error entry and changes nothing. More than 1000 items, or none: nothing
is deleted and the request fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa

from ripple.changestream.tag import Operation, TransactionTag
from ripple.metabase.db import Metabase
from ripple.metabase.delete_condition import DeleteCondition, UnjudgedCondition
from ripple.metabase.delete_object import delete_marker
from ripple.metabase.errors import InvalidArgument, InvalidDeleteRequest, MetabaseError
from ripple.metabase.objectlock import bypass_allowed, check_deletable
from ripple.metabase.rows import (
    METADATA_COLUMNS,
    at_bucket,
    delete_rows,
    get_bucket,
    insert_rows,
    key_bytes,
    key_in,
    key_version_in,
    lock_keys,
    note_bucket,
    object_from_row,
    select_rows,
)
from ripple.metabase.schema import objects
from ripple.metabase.types import (
    COMMITTED_STATUSES,
    UNVERSIONED_STATUSES,
    Bucket,
    BucketLocation,
    Object,
    ObjectLocation,
    Versioning,
    VersionRef,
    decode_version_id,
)

MAX_DELETE_OBJECTS = 1000


@dataclass(frozen=True)
class DeleteObjectsItem:
    key: str
    version_id: str | None = None
    # a conditional delete (<ETag>, <LastModifiedTime>, <Size>): see `delete_condition`
    condition: DeleteCondition | None = None


@dataclass(frozen=True)
class DeletedObject:
    key: str
    version_id: str | None  # as requested
    deleted_version_id: str | None = None  # the version removed, if one was
    delete_marker: bool = False  # a delete marker was created or removed
    delete_marker_version_id: str | None = None


@dataclass(frozen=True)
class DeleteObjectsError:
    key: str
    version_id: str | None
    code: str
    message: str


@dataclass(frozen=True)
class DeleteObjectsResult:
    deleted: list[DeletedObject] = field(default_factory=list)  # empty in quiet mode
    errors: list[DeleteObjectsError] = field(default_factory=list)
    removed: list[Object] = field(default_factory=list)  # rows deleted (data to free)


@dataclass(frozen=True)
class _Item:
    key: str
    version_id: str | None
    raw_key: bytes
    ref: VersionRef | None  # None: no version ID given
    condition: DeleteCondition | None = None


def delete_objects(
    db: Metabase,
    loc: BucketLocation,
    items: Sequence[DeleteObjectsItem],
    *,
    quiet: bool = False,
    bypass_governance: bool = False,
    can_bypass_governance: bool = False,
    tag: TransactionTag | None = None,
) -> DeleteObjectsResult:
    if not items:
        raise InvalidDeleteRequest("DeleteObjects needs at least one object")
    if len(items) > MAX_DELETE_OBJECTS:
        raise InvalidDeleteRequest(
            f"DeleteObjects takes at most {MAX_DELETE_OBJECTS} objects, got {len(items)}; "
            "nothing was deleted: split the request"
        )
    bypass = bypass_allowed(bypass_governance, can_bypass_governance)
    valid, errors = _parse(items)

    def tx(conn: sa.Connection) -> DeleteObjectsResult:
        bucket = get_bucket(conn, loc, lock="share")
        note_bucket(conn, bucket)
        lock_keys(conn, loc, [i.raw_key for i in valid])
        view = _View(
            bucket,
            db,
            _top_versions(conn, loc, bucket, valid),
            _candidates(conn, loc, bucket, valid),
            _judged_latest(conn, loc, valid),
        )
        deleted: list[DeletedObject] = []
        item_errors = list(errors)
        for item in valid:
            try:
                deleted.append(view.apply(item, bypass))
            except MetabaseError as e:
                item_errors.append(DeleteObjectsError(item.key, item.version_id, e.code, e.message))
        removed, inserted = view.changes()
        delete_rows(conn, removed)
        insert_rows(conn, inserted)
        return DeleteObjectsResult([] if quiet else deleted, item_errors, removed)

    tag = (tag or TransactionTag()).defaults(operation=Operation.DELETE_OBJECTS)
    return db.run_write(tx, tag, exclude_txn_from_change_streams=False)


def _parse(items: Sequence[DeleteObjectsItem]) -> tuple[list[_Item], list[DeleteObjectsError]]:
    """Validate keys and version IDs; keep the first of duplicate items."""
    valid: list[_Item] = []
    errors: list[DeleteObjectsError] = []
    seen: set[tuple[bytes, VersionRef | None]] = set()
    for item in items:
        try:
            raw = key_bytes(item.key)
        except InvalidArgument as e:
            errors.append(DeleteObjectsError(item.key, item.version_id, e.code, e.message))
            continue
        ref = None
        if item.version_id is not None:
            try:
                ref = decode_version_id(item.version_id)
            except InvalidArgument:
                errors.append(
                    DeleteObjectsError(
                        item.key,
                        item.version_id,
                        "NoSuchVersion",
                        "the version ID is not valid: use `null` or an ID that "
                        "ListObjectVersions returned",
                    )
                )
                continue
        if (raw, ref) in seen:
            continue
        seen.add((raw, ref))
        valid.append(_Item(item.key, item.version_id, raw, ref, item.condition))
    return valid, errors


def _top_versions(
    conn: sa.Connection, loc: BucketLocation, bucket: Bucket, items: list[_Item]
) -> dict[bytes, int]:
    """The highest version of each key (pending uploads too): new markers go above them."""
    marks = bucket.versioning is not Versioning.UNVERSIONED and any(i.ref is None for i in items)
    if not marks:
        return {}
    keys = sorted({i.raw_key for i in items if i.ref is None})
    query = (
        sa.select(objects.c.object_key, sa.func.max(objects.c.version).label("top"))
        .where(at_bucket(loc), key_in(conn, keys))
        .group_by(objects.c.object_key)
    )
    return {bytes(row.object_key): int(row.top) for row in conn.execute(query)}


def _judged_latest(conn: sa.Connection, loc: BucketLocation, items: list[_Item]) -> list[Object]:
    """The latest committed row of each key whose conditional item names no version: what
    its condition is judged against (one statement for them all)."""
    keys = sorted({i.raw_key for i in items if i.ref is None and i.condition})
    if not keys:
        return []
    committed = sa.and_(at_bucket(loc), objects.c.status.in_(COMMITTED_STATUSES))
    top = (
        sa.select(objects.c.object_key, sa.func.max(objects.c.version).label("top"))
        .where(committed, key_in(conn, keys))
        .group_by(objects.c.object_key)
        .subquery()
    )
    query = (
        sa.select(*METADATA_COLUMNS)
        .join_from(
            objects,
            top,
            sa.and_(objects.c.object_key == top.c.object_key, objects.c.version == top.c.top),
        )
        .where(committed)
    )
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(of=objects)
    return [object_from_row(row) for row in conn.execute(query)]


def _candidates(
    conn: sa.Connection, loc: BucketLocation, bucket: Bucket, items: list[_Item]
) -> list[Object]:
    """Every committed row an item may delete, locked: exact versions, and `null` versions
    of the keys whose item needs it (no version ID outside an enabled bucket, or `null`)."""
    exact = [
        (i.raw_key, i.ref.version) for i in items if i.ref is not None and i.ref.version is not None
    ]
    null_keys = sorted(
        {
            i.raw_key
            for i in items
            if (i.ref is None and bucket.versioning is not Versioning.ENABLED)
            or (i.ref is not None and i.ref.is_null)
        }
    )
    wanted = []
    if exact:
        keys, versions = zip(*exact, strict=True)
        wanted.append(key_version_in(conn, keys, versions))
    if null_keys:
        wanted.append(sa.and_(key_in(conn, null_keys), objects.c.status.in_(UNVERSIONED_STATUSES)))
    if not wanted:
        return []
    where = sa.and_(
        at_bucket(loc),
        objects.c.status.in_(COMMITTED_STATUSES),
        sa.or_(*wanted),
    )
    return select_rows(conn, where, lock=True, data=False)


class _View:
    """The rows the request can touch, changed item by item in memory."""

    def __init__(
        self,
        bucket: Bucket,
        db: Metabase,
        top: dict[bytes, int],
        rows: list[Object],
        latest: list[Object],
    ):
        self.bucket = bucket
        self.now = db.now()
        self.top = top
        # the latest committed version of each key a conditional item names no version of
        self.latest = {r.object_key: r for r in latest}
        rows = rows + latest
        self.original = {(r.object_key, r.version): r for r in rows}  # duplicates once
        self.removed: list[Object] = []  # in the order the items removed them
        self.by_key: dict[str, dict[int, Object]] = {}
        for r in rows:
            self.by_key.setdefault(r.object_key, {})[r.version] = r

    def apply(self, item: _Item, bypass: bool) -> DeletedObject:
        if item.ref is not None:
            return self._delete_version(item, item.ref, bypass)
        if item.condition:
            current = self._latest(item.key)
            if current is None:  # nothing to delete: no error, and no delete marker either
                return DeletedObject(item.key, None)
            item.condition.judge(current)
        removed = None
        if self.bucket.versioning is not Versioning.ENABLED:
            removed = self._find(item.key, VersionRef(None))
            if removed is not None:
                check_deletable(removed, self.now, bypass=bypass)
                self._remove(removed)
        marker = None
        if self.bucket.versioning is not Versioning.UNVERSIONED:
            version = self.top.get(item.raw_key, 0) + 1
            self.top[item.raw_key] = version
            loc = ObjectLocation(self.bucket.project_id, self.bucket.name, item.key)
            marker = delete_marker(self.bucket, loc, version, self.now)
            self.by_key.setdefault(item.key, {})[version] = marker
        return DeletedObject(
            key=item.key,
            version_id=None,
            deleted_version_id=None if removed is None else removed.version_id,
            delete_marker=marker is not None,
            delete_marker_version_id=None if marker is None else marker.version_id,
        )

    def _delete_version(self, item: _Item, ref: VersionRef, bypass: bool) -> DeletedObject:
        target = self._find(item.key, ref)
        if target is None:  # already gone: deleting it again succeeds, as in S3
            return DeletedObject(item.key, item.version_id)
        if item.condition:
            item.condition.judge(target)
        check_deletable(target, self.now, bypass=bypass)
        self._remove(target)
        return DeletedObject(
            key=item.key,
            version_id=item.version_id,
            deleted_version_id=target.version_id,
            delete_marker=target.is_delete_marker,
            delete_marker_version_id=target.version_id if target.is_delete_marker else None,
        )

    def _latest(self, key: str) -> Object | None:
        """The key's latest version as the items so far left it (`_judged_latest` loaded
        it; a marker an earlier item made is above it). If an earlier item removed it and
        made nothing newer, the version now latest was never read: the condition cannot be
        judged here, and the item is refused rather than judged against nothing."""
        versions = self.by_key.get(key, {})
        found = versions[max(versions)] if versions else None
        loaded = self.latest.get(key)
        if loaded is not None and (found is None or found.version < loaded.version):
            raise UnjudgedCondition(
                f"an earlier item of this request deleted the latest version of {key!r}; "
                "send a conditional delete of the key in a request of its own"
            )
        return found

    def _find(self, key: str, ref: VersionRef) -> Object | None:
        versions = self.by_key.get(key, {})
        if ref.version is not None:
            row = versions.get(ref.version)
            return row if row is not None and ref.matches(row) else None
        return next((row for row in versions.values() if ref.matches(row)), None)

    def _remove(self, row: Object) -> None:
        del self.by_key[row.object_key][row.version]
        self.removed.append(row)

    def changes(self) -> tuple[list[Object], list[Object]]:
        """(rows to delete, rows to insert) that turn the database into the view."""
        now = {(k, v): r for k, versions in self.by_key.items() for v, r in versions.items()}
        removed = [
            r
            for r in self.removed
            if (r.object_key, r.version) in self.original and (r.object_key, r.version) not in now
        ]
        inserted = [r for pos, r in now.items() if pos not in self.original]
        return removed, inserted
