"""Commit an inline object: a small object whose data is stored in the row itself, written
in one transaction with no pending row."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from ripple.changestream.tag import TransactionTag
from ripple.metabase.acl import AclSpec
from ripple.metabase.db import Metabase
from ripple.metabase.put_object import put_object
from ripple.metabase.rows import new_stream_id
from ripple.metabase.store_committed import CommitResult
from ripple.metabase.types import ObjectLocation, Retention


def commit_inline_object(
    db: Metabase,
    loc: ObjectLocation,
    data: bytes,
    *,
    etag: str,
    content_type: str = "",
    user_metadata: dict[str, str] | None = None,
    retention: Retention | None = None,
    legal_hold: bool = False,
    expires_at: datetime | None = None,
    tags: Mapping[str, str] | None = None,
    acl: AclSpec | None = None,
    tag: TransactionTag | None = None,
) -> CommitResult:
    return put_object(
        db,
        loc,
        stream_id=new_stream_id(),
        size=len(data),
        etag=etag,
        content_type=content_type,
        user_metadata=user_metadata,
        retention=retention,
        legal_hold=legal_hold,
        expires_at=expires_at,
        inline_data=data,
        tags=tags,
        acl=acl,
        tag=tag,
    )
