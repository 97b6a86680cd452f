"""Get an object: its latest version, or an exact version by S3 version ID.

The latest version being a delete marker answers `ObjectNotFound` with `delete_marker`
set (S3: 404 with `x-amz-delete-marker: true`); asking for a delete marker by version ID
answers `MethodNotAllowed` (S3: 405)."""

from __future__ import annotations

import sqlalchemy as sa

from ripple.metabase.db import Metabase
from ripple.metabase.errors import MethodNotAllowed, ObjectNotFound, VersionNotFound
from ripple.metabase.rows import exact_version, get_bucket, key_bytes, latest_committed
from ripple.metabase.types import Object, ObjectLocation, decode_version_id


class DeleteMarkerVersion(MethodNotAllowed):
    """The version asked for is a delete marker."""

    def __init__(self, marker: Object) -> None:
        super().__init__(f"version {marker.version_id} of {marker.object_key!r} is a delete marker")
        self.marker = marker


def resolve_object(conn: sa.Connection, loc: ObjectLocation, version_id: str | None) -> Object:
    """The latest committed row, or the exact version; delete markers are returned as rows
    when asked for by version, and raise `ObjectNotFound(delete_marker=True)` when latest."""
    key_bytes(loc.object_key)
    if version_id is None:
        get_bucket(conn, loc.bucket)
        obj = latest_committed(conn, loc)
        if obj is None:
            raise ObjectNotFound(f"no such key {loc.object_key!r}")
        if obj.is_delete_marker:
            raise ObjectNotFound(
                f"the latest version of {loc.object_key!r} is a delete marker",
                delete_marker=True,
                version_id=obj.version_id,
            )
        return obj
    ref = decode_version_id(version_id)
    get_bucket(conn, loc.bucket)
    found = exact_version(conn, loc, ref)
    if found is None:
        raise VersionNotFound(f"no version {version_id} of {loc.object_key!r}")
    return found


def get_object(db: Metabase, loc: ObjectLocation, version_id: str | None = None) -> Object:
    """The object version to read. Never a pending upload; never a delete marker."""
    with db.read() as conn:
        obj = resolve_object(conn, loc, version_id)
    if obj.is_delete_marker:
        raise DeleteMarkerVersion(obj)
    return obj
