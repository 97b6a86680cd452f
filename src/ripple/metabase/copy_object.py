"""Copy an object: a new committed version at the destination from a source version.

The copy gets a new stream id (the caller copies the data for objects not stored inline),
the source's size, ETag and, with the COPY directives, its content type and metadata
(metadata directive) and its tags (tagging directive; REPLACE sets `tags`), its part
sizes and additional checksum (unless the caller computed another: `checksum`). Object
lock settings are not copied; the destination's default retention applies. Nor is the
ACL: the copy gets `acl` (default private), as in S3. Copying a key
onto itself must change something (REPLACE), as S3 requires."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

import sqlalchemy as sa

from ripple.changestream.capture import capture_of
from ripple.changestream.tag import Operation, TransactionTag
from ripple.metabase.acl import AclSpec, check_spec, resolve_acl
from ripple.metabase.db import Metabase
from ripple.metabase.errors import ConflictRetry, InvalidArgument
from ripple.metabase.get_object import resolve_object
from ripple.metabase.object_tagging import check_tags
from ripple.metabase.rows import key_bytes, latest_committed, new_stream_id, start_key_write
from ripple.metabase.store_committed import CommitResult, store_committed
from ripple.metabase.types import Checksum, Object, ObjectLocation, Retention
from ripple.metabase.write_condition import WriteCondition


class InvalidCopyRequest(InvalidArgument):
    code = "InvalidRequest"


class CopySourceChanged(ConflictRetry):
    """The source version is no longer the one whose data the caller copied (a `null`
    version replaced meanwhile); nothing was committed."""


@dataclass(frozen=True)
class CopyResult(CommitResult):
    source: Object | None = None


def copy_object(
    db: Metabase,
    source: ObjectLocation,
    destination: ObjectLocation,
    *,
    source_version_id: str | None = None,
    metadata_directive: Literal["COPY", "REPLACE"] = "COPY",
    content_type: str | None = None,
    user_metadata: dict[str, str] | None = None,
    tagging_directive: Literal["COPY", "REPLACE"] = "COPY",
    tags: Mapping[str, str] | None = None,
    retention: Retention | None = None,
    legal_hold: bool = False,
    stream_id: uuid.UUID | None = None,
    source_stream_id: uuid.UUID | None = None,
    acl: AclSpec | None = None,
    checksum: Checksum | None = None,
    condition: WriteCondition | None = None,
    tag: TransactionTag | None = None,
) -> CopyResult:
    """Commit a copy of the source version. With `source_stream_id`, the version found must
    be that stream's (the data the caller copied), else `CopySourceChanged`; a conditional
    write's `condition` on the destination must still hold (`ConditionalRequestConflict`);
    `checksum` is the copy's additional checksum when the caller computed one (None: the
    source's, part checksums and all)."""
    key_bytes(destination.object_key)
    if metadata_directive not in ("COPY", "REPLACE"):
        raise InvalidArgument(
            f"metadata directive must be COPY or REPLACE, not {metadata_directive!r}"
        )
    if source == destination and source_version_id is None and metadata_directive == "COPY":
        raise InvalidCopyRequest(
            "this copy request is illegal because it is trying to copy an object to itself "
            "without changing the object's metadata; use the REPLACE metadata directive"
        )
    if tagging_directive not in ("COPY", "REPLACE"):
        raise InvalidArgument(
            f"tagging directive must be COPY or REPLACE, not {tagging_directive!r}"
        )
    new_tags = check_tags(tags or {})
    acl = None if acl is None else check_spec(acl)
    new_stream = stream_id or new_stream_id()

    def tx(conn: sa.Connection) -> CopyResult:
        bucket = start_key_write(conn, destination)
        src = resolve_object(conn, source, source_version_id)
        _note_source(conn, source, destination, src, source_version_id)
        if source_stream_id is not None and src.stream_id != source_stream_id:
            raise CopySourceChanged(
                f"the copy source {source.object_key!r} changed during the copy; try again"
            )
        if src.is_delete_marker:
            raise InvalidCopyRequest(
                "the source version is a delete marker, which cannot be copied; "
                "name an object version in x-amz-copy-source"
            )
        replace_meta = metadata_directive == "REPLACE"
        new = replace(
            src,
            project_id=destination.project_id,
            bucket_name=destination.bucket_name,
            object_key=destination.object_key,
            stream_id=new_stream,
            content_type=(content_type or "") if replace_meta else src.content_type,
            user_metadata=dict(user_metadata or {}) if replace_meta else dict(src.user_metadata),
            tags=new_tags if tagging_directive == "REPLACE" else dict(src.tags),
            retention=retention,
            legal_hold=legal_hold,
            expires_at=None,
            acl=resolve_acl(conn, destination.project_id, acl),  # never the source's
            checksum=checksum or src.checksum,
        )
        result = store_committed(
            conn,
            bucket,
            new,
            db.now(),
            explicit_retention=retention is not None,
            condition=condition,
        )
        return CopyResult(result.object, result.removed, source=src)

    tag = (tag or TransactionTag()).defaults(operation=Operation.COPY)
    return db.run_write(tx, tag, exclude_txn_from_change_streams=False)


def _note_source(
    conn: sa.Connection,
    source: ObjectLocation,
    destination: ObjectLocation,
    src: Object,
    version_id: str | None,
) -> None:
    """Put the source in the transaction tag (`copy_source`) for the events: a copy of a
    key's latest version onto itself is also a metadata update; one of an older version
    restores it, so its source is named with `?versionId=` (looked up only for a copy onto
    itself: any other copy is no metadata update)."""
    name = f"{source.bucket_name}/{source.object_key}"
    if source == destination and version_id is not None and not src.is_delete_marker:
        latest = latest_committed(conn, source)
        if latest is None or (latest.stream_id, latest.version) != (src.stream_id, src.version):
            name += f"?versionId={src.version_id}"
    capture = capture_of(conn)
    capture.tag = replace(capture.tag, copy_source=name)
