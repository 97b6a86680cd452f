"""Object writes and deletes on the wire: PutObject (conditional writes too) and DeleteObject.

PutObject streams the body into a temporary file (or memory, for objects small enough to
live in their metabase row), checks every digest the client sent, moves the file under its
new stream id, then commits the version in one metabase transaction, with the additional
checksum it was verified against (`object_checksums`). The data of versions
the commit replaced, and of versions a delete removed, is removed only after the commit.
"""

from __future__ import annotations

from pathlib import Path

from starlette.responses import Response

from ripple import metabase
from ripple.changestream.tag import Operation
from ripple.gateway.acl_headers import acl_of
from ripple.gateway.body import receive, require_length
from ripple.gateway.data import DataWriter, ObjectData, commit_within
from ripple.gateway.headers import (
    MAX_SIZE,
    condition_time,
    content_type_of,
    lock_of,
    metadata_of,
    owner_only_conditions,
    quoted,
    tagging_of,
    version_headers,
    write_condition,
)
from ripple.gateway.object_checksums import of_received, response_headers
from ripple.gateway.request import S3Request, free, header_number
from ripple.gateway.routes import operation
from ripple.metabase import (
    DeleteResult,
    check_tags,
)
from ripple.metabase.delete_condition import DeleteCondition
from ripple.metabase.errors import MetabaseError
from ripple.metabase.put_object import put_object as metabase_put_object
from ripple.metabase.rows import new_stream_id
from ripple.metabase.store_committed import CommitResult


def place(writer: DataWriter, path: Path) -> None:
    """Move the written file to `path`, durably; on failure, remove it."""
    try:
        writer.place(path)
    except BaseException:
        writer.abort()
        raise


class Spool:
    """A body kept in memory while it fits in a metabase row, spilled to a temporary file
    once it outgrows that (what arrives decides, not what the headers announce)."""

    def __init__(self, data: ObjectData, limit: int) -> None:
        self.data = data
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0
        self.writer: DataWriter | None = None

    def write(self, chunk: bytes) -> None:
        if self.writer is not None:
            self.writer.write(chunk)
            return
        self.parts.append(chunk)
        self.size += len(chunk)
        if self.size > self.limit:
            self.writer = self.data.writer(digest=False)  # `receive` computes the MD5
            for part in self.parts:
                self.writer.write(part)
            self.parts = []

    @property
    def inline(self) -> bytes | None:
        return None if self.writer is not None else b"".join(self.parts)

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()


@operation("PUT", "object", "", "PutObject", "write")
async def put_object(req: S3Request) -> Response:
    require_length(req)
    loc = req.object_location
    condition = await write_condition(req, loc)
    metadata = metadata_of(req)
    retention, legal_hold = lock_of(req)
    content_type = content_type_of(req)
    tags = check_tags(tagging_of(req))  # refused before the body is read
    acl = acl_of(req)
    stream_id = new_stream_id()
    data = req.services.data
    spool = Spool(data, req.services.inline_limit)
    try:
        received = await receive(req, spool.write)
        checksum = of_received(received)
    except BaseException:
        spool.abort()
        raise

    writer = spool.writer
    if writer is not None:  # a body past the inline limit: its file made durable first
        # it fsyncs a file of up to 5 GiB: on a data thread, not on the metabase threads
        await req.run_data(place, writer, data.path_of(stream_id))

    def store() -> CommitResult:
        """Commit the version (or, not committed, remove its data file)."""
        try:
            result = commit_within(
                None if writer is None else writer.commit_by,
                metabase_put_object,
                req.db,
                loc,
                stream_id=stream_id,
                size=received.size,
                etag=received.etag,
                content_type=content_type,
                user_metadata=metadata,
                retention=retention,
                legal_hold=legal_hold,
                inline_data=spool.inline,
                tags=tags,
                acl=acl,
                checksum=checksum,
                condition=condition,
                tag=req.context.tag(Operation.PUT),
            )
        except MetabaseError:  # not committed: nothing names the data
            if writer is not None:
                data.remove([stream_id])
            raise
        return result

    result = await req.commit(store, lambda result: free(req, result.removed))
    headers = {
        "etag": quoted(result.object.etag),
        **version_headers(result.object),
        **response_headers(checksum),
    }
    return Response(status_code=200, headers=headers)


def delete_condition(req: S3Request) -> DeleteCondition:
    """A conditional DeleteObject's `If-Match`, `x-amz-if-match-last-modified-time` and
    `x-amz-if-match-size`, judged by the metabase against what the delete acts on."""
    when = req.header("x-amz-if-match-last-modified-time")
    condition = DeleteCondition(
        if_match=req.header("if-match"),
        last_modified=condition_time(when, "x-amz-if-match-last-modified-time") if when else None,
        size=(
            header_number(req, "x-amz-if-match-size", most=MAX_SIZE)
            if req.header("x-amz-if-match-size")
            else None
        ),
    )
    if condition:
        owner_only_conditions(req)
    return condition


@operation("DELETE", "object", "", "DeleteObject", "delete")
async def delete_object(req: S3Request) -> Response:
    condition = delete_condition(req)
    bypass = req.header("x-amz-bypass-governance-retention").lower() == "true"
    allowed = req.can_bypass_governance
    version_id = req.version_id()
    tag = req.context.tag(Operation.DELETE)

    def remove() -> DeleteResult:
        """Take a rate-limit token and delete (its data freed once committed)."""
        req.services.deletes.take(req.project_id)
        if version_id is None:
            return metabase.delete_object(
                req.db,
                req.object_location,
                bypass_governance=bypass,
                can_bypass_governance=allowed,
                condition=condition,
                tag=tag,
            )
        return metabase.delete_object_version(
            req.db,
            req.object_location,
            version_id,
            bypass_governance=bypass,
            can_bypass_governance=allowed,
            condition=condition,
            tag=tag,
        )

    result = await req.commit(remove, lambda result: free(req, result.removed))
    headers: dict[str, str] = {}
    if version_id is not None:
        headers["x-amz-version-id"] = version_id
        if any(o.is_delete_marker for o in result.removed):
            headers["x-amz-delete-marker"] = "true"
    elif result.marker is not None:
        headers["x-amz-delete-marker"] = "true"
        headers["x-amz-version-id"] = result.marker.version_id
    return Response(status_code=204, headers=headers)
