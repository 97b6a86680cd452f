"""List objects (S3 ListObjects v1 / v2): the latest version of each key, in key order,
skipping keys whose latest version is a delete marker; with a delimiter, keys roll up
into common prefixes. `start_after` is v1's marker, v2's start-after or continuation key."""

from __future__ import annotations

from dataclasses import dataclass

from ripple.metabase.db import Metabase
from ripple.metabase.listing import (
    check_max_keys,
    common_prefix,
    past,
    scan,
    start_position,
)
from ripple.metabase.rows import get_bucket
from ripple.metabase.types import BucketLocation, Object


@dataclass(frozen=True)
class ListObjectsResult:
    objects: list[Object]
    common_prefixes: list[str]
    is_truncated: bool
    next_marker: str  # the last key or common prefix returned when truncated, else ""


def list_objects(
    db: Metabase,
    loc: BucketLocation,
    *,
    prefix: str = "",
    delimiter: str = "",
    start_after: str = "",
    max_keys: int = 1000,
) -> ListObjectsResult:
    limit = check_max_keys(max_keys)
    found: list[Object] = []
    prefixes: list[str] = []
    last = ""
    truncated = False
    raw_prefix = prefix.encode("utf-8")
    cursor = start_position(start_after, prefix, delimiter)
    with db.read() as conn:
        get_bucket(conn, loc)
        exhausted = limit == 0
        while not exhausted and not truncated:
            rows = scan(conn, loc, raw_prefix, cursor)
            exhausted = len(rows) == 0
            seen: bytes | None = None
            for row in rows:
                raw = row.object_key.encode("utf-8")
                if raw == seen:
                    continue  # an older version of a key already decided
                seen = cursor = raw
                if row.is_delete_marker:
                    continue
                rolled = common_prefix(row.object_key, prefix, delimiter)
                if len(found) + len(prefixes) == limit:
                    truncated = True
                    break
                if rolled is None:
                    found.append(row)
                    last = row.object_key
                    continue
                prefixes.append(rolled)
                last = rolled
                cursor = past(rolled.encode("utf-8"))
                break  # scan again from after the common prefix
    return ListObjectsResult(found, prefixes, truncated, last if truncated else "")
