"""List object versions (S3 ListObjectVersions): every version and delete marker, keys in
order and each key's versions newest first, with `is_latest` on the key's newest. Resumes
from a key marker, or a key and version-ID marker; a delimiter rolls keys up into common
prefixes."""

from __future__ import annotations

from dataclasses import dataclass

from ripple.metabase.db import Metabase
from ripple.metabase.errors import InvalidArgument
from ripple.metabase.listing import check_max_keys, common_prefix, past, scan, start_position
from ripple.metabase.rows import exact_version, get_bucket
from ripple.metabase.types import BucketLocation, Object, ObjectLocation, decode_version_id


@dataclass(frozen=True)
class VersionEntry:
    object: Object
    is_latest: bool


@dataclass(frozen=True)
class ListVersionsResult:
    versions: list[VersionEntry]
    common_prefixes: list[str]
    is_truncated: bool
    next_key_marker: str
    next_version_id_marker: str


def list_object_versions(
    db: Metabase,
    loc: BucketLocation,
    *,
    prefix: str = "",
    delimiter: str = "",
    key_marker: str = "",
    version_id_marker: str = "",
    max_keys: int = 1000,
) -> ListVersionsResult:
    limit = check_max_keys(max_keys)
    if version_id_marker and not key_marker:
        raise InvalidArgument("a version-id marker cannot be specified without a key marker")
    entries: list[VersionEntry] = []
    prefixes: list[str] = []
    next_key = next_version = ""
    truncated = False
    raw_prefix = prefix.encode("utf-8")
    with db.read() as conn:
        get_bucket(conn, loc)
        cursor = start_position(key_marker, prefix, delimiter)
        cursor_version: int | None = None
        if version_id_marker:
            ref = decode_version_id(version_id_marker)
            marker_loc = ObjectLocation(loc.project_id, loc.bucket_name, key_marker)
            position = ref.version
            if position is None:  # `null`: its number is in the row, if the row is still there
                marker = exact_version(conn, marker_loc, ref)
                position = None if marker is None else marker.version
            if position is not None:  # a deleted marker version still names a position
                cursor, cursor_version = key_marker.encode("utf-8"), position
        # a key whose newest version was listed on an earlier page has no latest left
        previous_key = cursor if cursor_version is not None else None
        exhausted = limit == 0
        while not exhausted and not truncated:
            rows = scan(conn, loc, raw_prefix, cursor, cursor_version)
            exhausted = len(rows) == 0
            for row in rows:
                raw = row.object_key.encode("utf-8")
                if len(entries) + len(prefixes) == limit:
                    truncated = True
                    break
                rolled = common_prefix(row.object_key, prefix, delimiter)
                if rolled is not None:
                    prefixes.append(rolled)
                    next_key, next_version = rolled, ""
                    cursor, cursor_version = past(rolled.encode("utf-8")), None
                    break  # scan again from after the common prefix
                entries.append(VersionEntry(row, is_latest=raw != previous_key))
                previous_key = raw
                next_key, next_version = row.object_key, row.version_id
                cursor, cursor_version = raw, row.version
    if not truncated:
        next_key = next_version = ""
    return ListVersionsResult(entries, prefixes, truncated, next_key, next_version)
