"""CopyObject on the wire: `PUT /bucket/key` with `x-amz-copy-source` (`copy_source`).

A copy resolves the source version, copies its file (objects stored inline are copied by
the metabase, in the row) to a new stream id's path, then commits the copy of exactly that
version (its version ID: a versioned source cannot change under the copy). Tags are copied
unless `x-amz-tagging-directive: REPLACE` sets those of `x-amz-tagging`. The one version
ID that can name other data later is `null`: the metabase refuses the copy if the version
it finds is not the stream whose data was copied, and the copy is made again.

The copy keeps the source's additional checksum, unless `x-amz-checksum-algorithm` asks for
another: then that algorithm's FULL_OBJECT checksum is computed as the bytes are copied.
"""

from __future__ import annotations

from typing import Literal, cast

from starlette.responses import Response

from ripple import metabase
from ripple.changestream.tag import Operation
from ripple.gateway import xml
from ripple.gateway.acl_headers import acl_of
from ripple.gateway.body import MAX_PUT_SIZE
from ripple.gateway.checksums import FULL_OBJECT, checksum_for, encode
from ripple.gateway.copy_source import (
    ATTEMPTS,
    copy_source,
    resolve_source,
    source_headers,
    source_kept_changing,
)
from ripple.gateway.data import commit_within, copy_file
from ripple.gateway.errors import S3Error
from ripple.gateway.headers import (
    content_type_of,
    lock_of,
    metadata_of,
    quoted,
    tagging_directive_of,
    tagging_of,
    version_headers,
    write_condition,
)
from ripple.gateway.object_checksums import add_elements, requested_algorithm
from ripple.gateway.request import S3Request, free
from ripple.gateway.routes import operation
from ripple.metabase import Checksum, CopyResult, check_tags
from ripple.metabase.copy_object import CopySourceChanged, InvalidCopyRequest
from ripple.metabase.errors import MetabaseError, ObjectNotFound
from ripple.metabase.rows import new_stream_id


def _directive(req: S3Request) -> Literal["COPY", "REPLACE"]:
    directive = req.header("x-amz-metadata-directive") or "COPY"
    if directive not in ("COPY", "REPLACE"):
        raise S3Error(
            "InvalidArgument", f"unknown metadata directive {directive!r}: COPY or REPLACE"
        )
    return cast(Literal["COPY", "REPLACE"], directive)


@operation("PUT", "object", "copy-source", "CopyObject", "write")
async def copy_object(req: S3Request) -> Response:
    source = await copy_source(req)
    directive = _directive(req)
    tagging_directive = tagging_directive_of(req)
    tags = check_tags(tagging_of(req)) if tagging_directive == "REPLACE" else None
    acl = acl_of(req)  # the copy's own; the source's ACL is never copied (as S3)
    retention, legal_hold = lock_of(req)
    replace = directive == "REPLACE"
    content_type = content_type_of(req) if replace else None
    metadata = metadata_of(req) if replace else None
    destination = req.object_location
    if source.location(req) == destination and source.version_id is None and not replace:
        raise S3Error(
            "InvalidRequest",
            "this copy request is illegal because it is trying to copy an object to itself "
            "without changing the object's metadata; use the REPLACE metadata directive",
        )
    algorithm = requested_algorithm(req)
    condition = await write_condition(req, destination)
    data = req.services.data
    for attempt in range(1, ATTEMPTS + 1):
        last = attempt == ATTEMPTS
        obj = await resolve_source(req, source)
        if obj.total_plain_size > MAX_PUT_SIZE:
            raise S3Error(
                "InvalidRequest",
                f"the source is {obj.total_plain_size} bytes; CopyObject copies at most "
                f"{MAX_PUT_SIZE}: copy it in parts with UploadPartCopy",
            )
        stream_id = new_stream_id()
        copied = obj.inline_data is None
        hasher = None if algorithm is None else checksum_for(algorithm)
        commit_by = None
        if copied:
            try:
                commit_by = await req.run_data(copy_file, data, obj, stream_id, hasher)
            except FileNotFoundError:  # deleted since it was resolved: resolve again
                if last:
                    raise source_kept_changing() from None
                continue
        elif hasher is not None and obj.inline_data is not None:
            hasher.update(obj.inline_data)  # the metabase copies exactly this version's
        checksum = None
        if algorithm is not None and hasher is not None:
            checksum = Checksum(algorithm, FULL_OBJECT, encode(hasher.digest()))
        try:
            result = await req.run(
                commit_within,
                commit_by,
                metabase.copy_object,
                req.db,
                source.location(req),
                destination,
                source_version_id=obj.version_id,  # exactly the version whose data was copied
                metadata_directive=directive,
                content_type=content_type,
                user_metadata=metadata,
                tagging_directive=tagging_directive,
                tags=tags,
                retention=retention,
                legal_hold=legal_hold,
                stream_id=stream_id,
                source_stream_id=obj.stream_id,
                acl=acl,
                checksum=checksum,
                condition=condition,
                tag=req.context.tag(Operation.COPY),
            )
        except CopySourceChanged:  # the `null` version was replaced: copy it again
            if copied:
                data.remove([stream_id])
            if last:
                raise source_kept_changing() from None
            continue
        except (ObjectNotFound, InvalidCopyRequest):
            # the resolved version was deleted (or the latest is now a delete marker)
            if copied:
                data.remove([stream_id])
            if source.version_id is not None or last:
                raise
            continue
        except MetabaseError:
            if copied:
                data.remove([stream_id])
            raise
        free(req, result.removed)
        return _answer(result)
    raise AssertionError("unreachable")


def _answer(result: CopyResult) -> Response:
    if result.source is None:
        raise RuntimeError("a copy answered without its source")
    root = xml.document("CopyObjectResult")
    xml.add(root, "LastModified", result.object.created_at)
    xml.add(root, "ETag", quoted(result.object.etag))
    add_elements(root, result.object.checksum)
    headers = {**version_headers(result.object), **source_headers(result.source)}
    return xml.response(root, headers=headers)
