"""Shared row helpers for the operation modules: keys, row <-> Object, bucket and version
look-ups, and the set-membership predicates bulk operations use (one statement for any
number of keys: UNNEST arrays on PostgreSQL, a VALUES list on SQLite).
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection, Row

from ripple.changestream.capture import capture_of
from ripple.metabase.errors import BucketNotFound, InvalidArgument
from ripple.metabase.lean import Lean
from ripple.metabase.objectlock import check_deletable
from ripple.metabase.schema import buckets, objects
from ripple.metabase.types import (
    COMMITTED_STATUSES,
    UNVERSIONED_STATUSES,
    Bucket,
    BucketLocation,
    Checksum,
    DefaultRetention,
    Object,
    ObjectLocation,
    Retention,
    RetentionMode,
    Status,
    Versioning,
    VersionRef,
)

MAX_KEY_BYTES = 1024
# every column but inline data: what lists and deletes read
METADATA_COLUMNS = [c for c in objects.c if c.name != "inline_data"]


def key_bytes(key: str) -> bytes:
    """An object key as stored: UTF-8, 1 to 1024 bytes."""
    try:
        raw = key.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgument("object key must be valid UTF-8 (it has a lone surrogate)") from e
    if not raw:
        raise InvalidArgument("object key must not be empty")
    if len(raw) > MAX_KEY_BYTES:
        raise InvalidArgument(f"object key is {len(raw)} bytes; the limit is {MAX_KEY_BYTES}")
    return raw


def at_bucket(loc: BucketLocation | ObjectLocation) -> sa.ColumnElement[bool]:
    return sa.and_(objects.c.project_id == loc.project_id, objects.c.bucket_name == loc.bucket_name)


def at_key(loc: ObjectLocation) -> sa.ColumnElement[bool]:
    return sa.and_(at_bucket(loc), objects.c.object_key == key_bytes(loc.object_key))


# The one-key look-ups every write and read makes, built once (building a statement costs
# several times what running it does): their key is the parameters `key_parameters` gives.
_AT_KEY = sa.and_(
    objects.c.project_id == sa.bindparam("project_id"),
    objects.c.bucket_name == sa.bindparam("bucket_name"),
    objects.c.object_key == sa.bindparam("object_key"),
)


def status_in(statuses: Sequence[Status]) -> sa.ColumnElement[bool]:
    """`status IN (…)` with the statuses written into the statement, not bound: a
    statement built once then has no parameters but its own (`ripple.metabase.lean`)."""
    return objects.c.status.in_([sa.literal_column(str(int(s))) for s in statuses])


def key_parameters(loc: ObjectLocation) -> dict[str, Any]:
    return {
        "project_id": loc.project_id,
        "bucket_name": loc.bucket_name,
        "object_key": key_bytes(loc.object_key),
    }


@functools.cache
def _versions_query(dialect: str, *, null: bool, lock: bool) -> Lean:
    """A key's `null` version (`null`), or its committed version `:version`."""
    status = UNVERSIONED_STATUSES if null else COMMITTED_STATUSES
    where = sa.and_(_AT_KEY, status_in(status))
    if not null:
        where = sa.and_(where, objects.c.version == sa.bindparam("version"))
    query = sa.select(objects).where(where)
    return Lean(query.with_for_update() if lock and dialect == "postgresql" else query)


_LATEST_COMMITTED = Lean(
    sa.select(objects)
    .where(_AT_KEY, status_in(COMMITTED_STATUSES))
    .order_by(objects.c.version.desc())
    .limit(1)
)
_NEXT_VERSION = Lean(sa.select(sa.func.max(objects.c.version).label("top")).where(_AT_KEY))
_INSERT_ROWS = sa.insert(objects)
_INSERT_OBJECTS = Lean(_INSERT_ROWS)
_DELETE_VERSION = Lean(
    sa.delete(objects).where(_AT_KEY, objects.c.version == sa.bindparam("version"))
)


def object_from_row(row: Row[Any] | Mapping[str, Any]) -> Object:
    m = row._mapping if isinstance(row, Row) else row
    retention = None
    if m["retention_mode"] is not None and m["retain_until"] is not None:
        retention = Retention(RetentionMode(m["retention_mode"]), m["retain_until"])
    return Object(
        project_id=m["project_id"],
        bucket_name=m["bucket_name"],
        object_key=bytes(m["object_key"]).decode("utf-8"),
        version=m["version"],
        stream_id=m["stream_id"],
        status=Status(m["status"]),
        created_at=m["created_at"],
        total_plain_size=m["total_plain_size"],
        etag=m["etag"],
        content_type=m["content_type"],
        user_metadata=dict(m["user_metadata"] or {}),
        expires_at=m["expires_at"],
        retention=retention,
        legal_hold=bool(m["legal_hold"]),
        inline_data=None if m.get("inline_data") is None else bytes(m["inline_data"]),
        tags=dict(m["tags"] or {}),
        acl=m.get("acl"),
        part_sizes=tuple(m.get("part_sizes") or ()),
        checksum=Checksum.from_json(m.get("checksum")),
    )


def object_values(obj: Object) -> dict[str, Any]:
    """The column values that store `obj`."""
    return {
        "project_id": obj.project_id,
        "bucket_name": obj.bucket_name,
        "object_key": key_bytes(obj.object_key),
        "version": obj.version,
        "stream_id": obj.stream_id,
        "status": int(obj.status),
        "created_at": obj.created_at,
        "expires_at": obj.expires_at,
        "total_plain_size": obj.total_plain_size,
        "etag": obj.etag,
        "content_type": obj.content_type,
        "user_metadata": obj.user_metadata or None,
        "retention_mode": None if obj.retention is None else int(obj.retention.mode),
        "retain_until": None if obj.retention is None else obj.retention.retain_until,
        "legal_hold": obj.legal_hold,
        "inline_data": obj.inline_data,
        "tags": obj.tags or None,
        "acl": obj.acl,
        "part_sizes": list(obj.part_sizes) or None,
        "checksum": None if obj.checksum is None else obj.checksum.to_json(),
    }


def bucket_from_row(row: Row[Any] | Mapping[str, Any]) -> Bucket:
    m = row._mapping if isinstance(row, Row) else row
    default = None
    if m["default_retention_mode"] is not None:
        default = DefaultRetention(
            RetentionMode(m["default_retention_mode"]),
            days=m["default_retention_days"],
            years=m["default_retention_years"],
        )
    return Bucket(
        project_id=m["project_id"],
        name=m["name"],
        versioning=Versioning(m["versioning"]),
        object_lock_enabled=bool(m["object_lock_enabled"]),
        default_retention=default,
        created_at=m["created_at"],
        acl=m.get("acl"),
        lifecycle=m.get("lifecycle"),
    )


def get_bucket(
    conn: Connection, loc: BucketLocation, *, lock: Literal["share", "update"] | None = None
) -> Bucket:
    """The bucket, or `BucketNotFound`. On PostgreSQL, `share` keeps its configuration (and
    existence) fixed until the transaction ends, as object writers need; `update` is for
    the writers of that configuration."""
    query = _bucket_query(conn.dialect.name, lock)
    found = query.rows(conn, {"project_id": loc.project_id, "name": loc.bucket_name})
    if not found:
        raise BucketNotFound(f"bucket {loc.bucket_name!r} does not exist")
    return bucket_from_row(found[0])


@functools.cache
def _bucket_query(dialect: str, lock: Literal["share", "update"] | None) -> Lean:
    query = sa.select(buckets).where(
        buckets.c.project_id == sa.bindparam("project_id"),
        buckets.c.name == sa.bindparam("name"),
    )
    if lock and dialect == "postgresql":
        query = query.with_for_update(read=lock == "share")
    return Lean(query)


def start_key_write(conn: Connection, loc: ObjectLocation) -> Bucket:
    """What every writer of one key does first, always in this order: hold the bucket's
    configuration, then the key (`lock_key`). Returns the bucket. On PostgreSQL both are
    one statement (`_HOLD_BUCKET_AND_KEY`)."""
    if conn.dialect.name == "postgresql":
        parameters = {
            "project_id": loc.project_id,
            "name": loc.bucket_name,
            "key_lock": _lock_id(loc, key_bytes(loc.object_key)),
        }
        found = _HOLD_BUCKET_AND_KEY.rows(conn, parameters)
        if not found:
            raise BucketNotFound(f"bucket {loc.bucket_name!r} does not exist")
        bucket = bucket_from_row(found[0])
    else:
        bucket = get_bucket(conn, loc.bucket, lock="share")
        lock_key(conn, loc)
    note_bucket(conn, bucket)
    return bucket


def note_bucket(conn: Connection, bucket: Bucket) -> None:
    """Tell the transaction's change records the versioning of a bucket it writes to."""
    capture_of(conn).note_bucket(bucket.name, _VERSIONING_NAMES.get(bucket.versioning))


_VERSIONING_NAMES = {Versioning.ENABLED: "Enabled", Versioning.SUSPENDED: "Suspended"}


def select_rows(
    conn: Connection, where: sa.ColumnElement[bool], *, lock: bool = False, data: bool = True
) -> list[Object]:
    """Object rows matching `where`; `lock` takes row locks (PostgreSQL) for a change;
    `data=False` leaves inline data behind (its `inline_data` reads as None)."""
    query = sa.select(*(objects.c if data else METADATA_COLUMNS)).where(where)
    if lock and conn.dialect.name == "postgresql":
        query = query.with_for_update()
    return [object_from_row(r) for r in conn.execute(query)]


def latest_committed(conn: Connection, loc: ObjectLocation) -> Object | None:
    """The key's newest committed row (object or delete marker), if any."""
    found = _LATEST_COMMITTED.rows(conn, key_parameters(loc))
    return object_from_row(found[0]) if found else None


def exact_version(
    conn: Connection, loc: ObjectLocation, ref: VersionRef, *, lock: bool = False
) -> Object | None:
    """The committed row a version ID names, if it still exists."""
    null = ref.version is None
    query = _versions_query(conn.dialect.name, null=null, lock=lock)
    parameters = key_parameters(loc)
    if not null:
        parameters["version"] = ref.version
    found = (object_from_row(r) for r in query.rows(conn, parameters))
    return next((r for r in found if ref.matches(r)), None)


def null_version(conn: Connection, loc: ObjectLocation, *, lock: bool = False) -> Object | None:
    """The key's `null` version: the row an unversioned or suspended write replaces."""
    return exact_version(conn, loc, VersionRef(None), lock=lock)


def remove_null_version(
    conn: Connection, bucket: Bucket, loc: ObjectLocation, now: datetime, *, bypass: bool
) -> list[Object]:
    """Outside an enabled bucket a write replaces the key's `null` version: delete it, if
    there is one and object lock allows (else `ObjectLocked`). Returns what was deleted."""
    if bucket.versioning is Versioning.ENABLED:
        return []
    old = null_version(conn, loc, lock=True)
    if old is None:
        return []
    check_deletable(old, now, bypass=bypass)
    delete_rows(conn, [old])
    return [old]


def replace_null_version(
    conn: Connection, bucket: Bucket, loc: ObjectLocation, now: datetime, *, bypass: bool
) -> tuple[list[Object], int]:
    """`remove_null_version` and the version a new row of the key takes (one above every
    version the key has had until now, the removed one included): what a write that adds a
    version does, its reads in one statement (`_key_state`)."""
    if bucket.versioning is Versioning.ENABLED:
        return [], next_version(conn, loc)
    (row,) = _key_state(conn.dialect.name).rows(conn, key_parameters(loc))  # one: a max()
    top = int(row["top"] or 0)
    if row["project_id"] is None:
        return [], top + 1
    old = object_from_row(row)
    check_deletable(old, now, bypass=bypass)
    delete_rows(conn, [old])
    return [old], top + 1


@functools.cache
def _key_state(dialect: str) -> Lean:
    """The key's highest version (`top`: NULL when it has none) beside its `null` version's
    columns (NULL when it has none), the row locked on PostgreSQL."""
    top = sa.select(sa.func.max(objects.c.version).label("top")).where(_AT_KEY).subquery("top")
    null = sa.select(objects).where(_AT_KEY, status_in(UNVERSIONED_STATUSES))
    if dialect == "postgresql":  # FOR UPDATE may not lock an outer join's nullable side
        held = null.with_for_update().lateral("held")
        return Lean(sa.select(top.c.top, held).select_from(top.outerjoin(held, sa.true())))
    on = sa.and_(_AT_KEY, status_in(UNVERSIONED_STATUSES))
    return Lean(sa.select(top.c.top, objects).select_from(top.outerjoin(objects, on)))


def next_version(conn: Connection, loc: ObjectLocation) -> int:
    """One above every version the key has, pending uploads included."""
    (row,) = _NEXT_VERSION.rows(conn, key_parameters(loc))  # one: a max()
    return int(row["top"] or 0) + 1


def _mod_row(obj: Object) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """A row as its change record sees it (no inline data), and its primary key."""
    values = object_values(obj)
    del values["inline_data"]
    key = (obj.project_id, obj.bucket_name, values["object_key"], obj.version)
    return values, key


def insert_rows(conn: Connection, rows: Sequence[Object]) -> None:
    """Insert the given rows in one statement, and record them in the change stream."""
    if not rows:
        return
    if len(rows) == 1:  # a write's one row: built once
        _INSERT_OBJECTS.run(conn, object_values(rows[0]))
    else:
        conn.execute(_INSERT_ROWS, [object_values(r) for r in rows])
    capture = capture_of(conn)
    for row in rows:
        capture.insert("objects", *_mod_row(row))


def update_row(conn: Connection, obj: Object, **values: Any) -> None:
    """Change columns of one row in place (lock settings; never a commit, which inserts)."""
    conn.execute(
        sa.update(objects)
        .where(
            at_key(obj.location),
            objects.c.version == obj.version,
            objects.c.stream_id == obj.stream_id,
        )
        .values(**values)
    )
    old, key = _mod_row(obj)
    capture_of(conn).update("objects", old, {**old, **values}, key)


def delete_rows(conn: Connection, rows: Sequence[Object]) -> None:
    """Delete the given rows of one bucket in one statement, and record them."""
    if not rows:
        return
    first = rows[0]
    if any(r.project_id != first.project_id or r.bucket_name != first.bucket_name for r in rows):
        raise ValueError("delete_rows deletes the rows of one bucket at a time")
    if len(rows) == 1:  # the version a write replaces, a single delete: built once
        _DELETE_VERSION.run(conn, {**key_parameters(first.location), "version": first.version})
    else:
        conn.execute(
            sa.delete(objects).where(
                at_bucket(first.location),
                key_version_in(
                    conn, [key_bytes(r.object_key) for r in rows], [r.version for r in rows]
                ),
            )
        )
    capture = capture_of(conn)
    for row in rows:
        capture.delete("objects", *_mod_row(row))


def key_version_in(
    conn: Connection, keys: Sequence[bytes], versions: Sequence[int]
) -> sa.ColumnElement[bool]:
    """`(object_key, version) IN <pairs>` with one bind per column on PostgreSQL."""
    pair = sa.tuple_(objects.c.object_key, objects.c.version)
    if conn.dialect.name == "postgresql":
        return pair.in_(
            sa.select(
                sa.func.unnest(_array(keys, sa.LargeBinary)),
                sa.func.unnest(_array(versions, sa.BigInteger)),
            )
        )
    return pair.in_(list(zip(keys, versions, strict=True)))


def key_in(conn: Connection, keys: Sequence[bytes]) -> sa.ColumnElement[bool]:
    if conn.dialect.name == "postgresql":
        return objects.c.object_key == sa.func.any(_array(keys, sa.LargeBinary))
    return objects.c.object_key.in_(list(keys))


def _array(
    values: Sequence[Any], item_type: type[sa.types.TypeEngine[Any]]
) -> sa.BindParameter[Any]:
    return sa.bindparam(None, list(values), type_=postgresql.ARRAY(item_type), unique=True)


def lock_key(conn: Connection, loc: ObjectLocation) -> None:
    """`lock_keys` for the one key a write changes."""
    lock_keys(conn, loc, [key_bytes(loc.object_key)])


def lock_keys(
    conn: Connection, loc: BucketLocation | ObjectLocation, keys: Sequence[bytes]
) -> None:
    """Serialize writers of the same keys until the transaction ends (PostgreSQL advisory
    locks, taken in one statement in sorted order so bulk writers cannot deadlock). Each
    writer then computes versions from a state no one else is changing. SQLite needs none:
    its writers already queue on `BEGIN IMMEDIATE`."""
    if conn.dialect.name != "postgresql" or not keys:
        return
    ids = sorted({_lock_id(loc, key) for key in keys})
    conn.execute(_LOCK_KEYS, {"ids": ids})


_HELD_BUCKET = (
    sa.select(buckets)
    .where(
        buckets.c.project_id == sa.bindparam("project_id"), buckets.c.name == sa.bindparam("name")
    )
    .with_for_update(read=True)
    .subquery("held_bucket")
)
# The bucket's row held (FOR SHARE), then the key's advisory lock: a subquery with a
# locking clause is never merged into its parent, so its row is locked before the outer
# select calls the lock function, and only when the bucket exists.
_HOLD_BUCKET_AND_KEY = Lean(
    sa.select(
        _HELD_BUCKET,
        sa.func.pg_advisory_xact_lock(sa.bindparam("key_lock", type_=sa.BigInteger)).label(
            "key_lock"
        ),
    )
)

_LOCK_KEYS = sa.text("SELECT pg_advisory_xact_lock(id) FROM unnest(:ids) AS t(id)").bindparams(
    sa.bindparam("ids", type_=postgresql.ARRAY(sa.BigInteger))
)


def _lock_id(loc: BucketLocation | ObjectLocation, key: bytes) -> int:
    digest = hashlib.blake2b(
        b"%s\0%s\0%s" % (loc.project_id.bytes, loc.bucket_name.encode(), key), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


def new_stream_id() -> uuid.UUID:
    return uuid.uuid4()


def require_aware(value: datetime | None, what: str) -> None:
    if value is not None and value.tzinfo is None:
        raise InvalidArgument(f"{what} must be timezone-aware")
