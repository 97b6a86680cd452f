"""CopyObject on the wire (`PUT /bucket/key` with `x-amz-copy-source`), and the copy-source
helpers UploadPartCopy shares: parsing the header, checking the key may read the source,
resolving the source version under the `x-amz-copy-source-if-*` conditions, copying bytes.

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

import re
import uuid
from dataclasses import dataclass
from typing import Literal, cast
from urllib.parse import parse_qs, unquote

from starlette.responses import Response

from ripple.gateway import xml
from ripple.gateway.acl import acl_of
from ripple.gateway.auth import check_source_missing, check_source_read, source_owner
from ripple.gateway.body import MAX_PUT_SIZE
from ripple.gateway.checksums import FULL_OBJECT, Hasher, checksum_for, encode
from ripple.gateway.data import DataWriter, ObjectData
from ripple.gateway.errors import S3Error
from ripple.gateway.get_object import check_conditions
from ripple.gateway.headers import (
    content_type_of,
    lock_of,
    metadata_of,
    quoted,
    tagging_directive_of,
    tagging_of,
    version_headers,
)
from ripple.gateway.object_checksums import add_elements, requested_algorithm
from ripple.gateway.objects import commit_within, free, write_condition
from ripple.gateway.request import S3Request
from ripple.gateway.routes import operation
from ripple.metabase import (
    Checksum,
    CopyResult,
    Object,
    ObjectLocation,
    check_tags,
    copy_object,
    get_object,
)
from ripple.metabase.acl import BucketOwner
from ripple.metabase.copy_object import CopySourceChanged, InvalidCopyRequest
from ripple.metabase.errors import MetabaseError, ObjectNotFound
from ripple.metabase.get_object import DeleteMarkerVersion
from ripple.metabase.rows import new_stream_id
from ripple.metabase.types import NULL_VERSION_ID
from ripple.numbers import INT64_MAX, NumberError, whole_number

ATTEMPTS = 3  # resolutions of a source that keeps changing before giving up
MAX_POSITION = INT64_MAX  # a byte position any object could have
_READ = 1 << 20
_COPY_RANGE = re.compile(r"bytes=([0-9]+)-([0-9]+)", re.ASCII)


@dataclass(frozen=True)
class CopySource:
    bucket: str
    key: str
    version_id: str | None  # None: the latest version
    owner: BucketOwner | None = None  # the source bucket's (None: no project holds it)

    def location(self, req: S3Request) -> ObjectLocation:
        project = self.owner.project_id if self.owner is not None else req.project_id
        return ObjectLocation(project, self.bucket, self.key)


async def copy_source(req: S3Request) -> CopySource:
    """The `x-amz-copy-source` of the request (`[/]bucket/key[?versionId=V]`, URL-encoded),
    once the access key is known to be allowed to read it; the source bucket may be
    another project's (its object ACL is checked in `resolve_source`)."""
    raw = req.header("x-amz-copy-source")
    path, _, query = raw.partition("?")
    try:
        path = unquote(path, errors="strict")
    except UnicodeDecodeError:
        path = ""
    bucket, _, key = path.removeprefix("/").partition("/")
    if not bucket or not key:
        raise S3Error(
            "InvalidArgument",
            "x-amz-copy-source must name the source bucket and key: /sourcebucket/sourcekey",
        )
    versions = parse_qs(query, keep_blank_values=True).get("versionId", [])
    version_id = versions[0] if versions else None
    if version_id == "":
        raise S3Error("InvalidArgument", "the copy source's version id cannot be the empty string")
    if req.access_key is not None and not req.access_key.permits("read", bucket, key):
        raise S3Error(
            "AccessDenied",
            f"this access key may not read the copy source /{bucket}/{key}",
            resource=req.resource,
        )
    return CopySource(bucket, key, version_id, await source_owner(req, bucket))


async def resolve_source(req: S3Request, source: CopySource) -> Object:
    """The source version, if the requester may read it and the `x-amz-copy-source-if-*`
    conditions hold for it. Of another project's source, nothing (not even that it is
    missing or a delete marker) is told to a requester without READ on it, or without
    bucket READ for a missing one."""
    location = source.location(req)
    try:
        obj = await req.run(get_object, req.db, location, source.version_id)
    except DeleteMarkerVersion:
        await req.run(check_source_missing, req, source.owner, location)
        raise S3Error(
            "InvalidRequest",
            "the copy source version is a delete marker, which cannot be copied",
        ) from None
    except ObjectNotFound:
        await req.run(check_source_missing, req, source.owner, location)
        raise
    check_source_read(req, source.owner, obj)
    check_conditions(req, obj, prefix="x-amz-copy-source-")
    return obj


def source_headers(obj: Object) -> dict[str, str]:
    if obj.version_id == NULL_VERSION_ID:
        return {}
    return {"x-amz-copy-source-version-id": obj.version_id}


def write_range(
    data: ObjectData,
    obj: Object,
    writer: DataWriter,
    start: int,
    length: int,
    checksum: Hasher | None = None,
) -> None:
    """Write `length` bytes of a version's data from `start` (through `checksum` too, if
    any); `FileNotFoundError` if its file is gone (the version was deleted since it was
    read)."""
    if obj.inline_data is not None:
        chunk = obj.inline_data[start : start + length]
        writer.write(chunk)
        if checksum is not None:
            checksum.update(chunk)
        return
    with data.open(obj.stream_id) as f:
        f.seek(start)
        while length > 0:
            chunk = f.read(min(_READ, length))
            if not chunk:
                raise RuntimeError(f"the data of stream {obj.stream_id} is shorter than its size")
            writer.write(chunk)
            if checksum is not None:
                checksum.update(chunk)
            length -= len(chunk)


def copy_file(
    data: ObjectData, obj: Object, stream_id: uuid.UUID, checksum: Hasher | None = None
) -> float:
    """Copy the whole data of a version stored as a file to `stream_id`'s path; when its
    commit must be made by (`DataWriter.commit_by`)."""
    writer = data.writer()
    try:
        write_range(data, obj, writer, 0, obj.total_plain_size, checksum)
        writer.place(data.path_of(stream_id))
    except BaseException:
        writer.abort()
        raise
    return writer.commit_by


def copy_range(header: str, size: int) -> tuple[int, int]:
    """(start, length) of `x-amz-copy-source-range: bytes=first-last`; the whole source
    without one."""
    if not header:
        span = (0, size)
    else:
        match = _COPY_RANGE.fullmatch(header.strip())
        malformed = S3Error(
            "InvalidArgument",
            "x-amz-copy-source-range must be bytes=first-last (zero-based, inclusive)",
        )
        if match is None:
            raise malformed
        try:  # positions past any object are refused below as not satisfiable
            first, last = (
                whole_number(match[i], "x-amz-copy-source-range", most=MAX_POSITION) for i in (1, 2)
            )
        except NumberError:
            raise _unsatisfiable(header, size) from None
        if first > last:
            raise malformed
        if last >= size:
            raise _unsatisfiable(header, size)
        span = (first, last - first + 1)
    if span[1] > MAX_PUT_SIZE:
        raise S3Error(
            "InvalidRequest", f"a part is at most {MAX_PUT_SIZE} bytes; copy a smaller range"
        )
    return span


def _unsatisfiable(header: str, size: int) -> S3Error:
    shown = header if len(header) <= 60 else header[:60] + "…"
    return S3Error(
        "InvalidRange",
        f"the range {shown!r} is not satisfiable: the source is {size} bytes",
        extra={"ActualObjectSize": str(size)},
    )


async def copy_part_data(
    req: S3Request, data: ObjectData, algorithm: str | None = None
) -> tuple[Object, DataWriter, bytes]:
    """UploadPartCopy's data: the source version, a writer holding the range of it the
    request asks for, for the caller to place as the part (or abort), and that range's
    checksum in `algorithm` (b"" without one)."""
    source = await copy_source(req)
    for _ in range(ATTEMPTS):
        obj = await resolve_source(req, source)
        start, length = copy_range(req.header("x-amz-copy-source-range"), obj.total_plain_size)
        writer = data.writer()
        checksum = None if algorithm is None else checksum_for(algorithm)
        try:
            await req.run_data(write_range, data, obj, writer, start, length, checksum)
        except FileNotFoundError:  # the version was deleted since it was resolved
            writer.abort()
            continue
        except BaseException:
            writer.abort()
            raise
        return obj, writer, b"" if checksum is None else checksum.digest()
    raise _changing()


def _directive(req: S3Request) -> Literal["COPY", "REPLACE"]:
    directive = req.header("x-amz-metadata-directive") or "COPY"
    if directive not in ("COPY", "REPLACE"):
        raise S3Error(
            "InvalidArgument", f"unknown metadata directive {directive!r}: COPY or REPLACE"
        )
    return cast(Literal["COPY", "REPLACE"], directive)


@operation("PUT", "object", "copy-source", "CopyObject", "write")
async def copy(req: S3Request) -> Response:
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
                    raise _changing() from None
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
                copy_object,
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
                tag=req.context.tag("copy"),
            )
        except CopySourceChanged:  # the `null` version was replaced: copy it again
            if copied:
                data.remove([stream_id])
            if last:
                raise _changing() from None
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


def _changing() -> S3Error:
    return S3Error(
        "OperationAborted", "the copy source changed repeatedly during the copy; try again"
    )


def _answer(result: CopyResult) -> Response:
    assert result.source is not None
    root = xml.document("CopyObjectResult")
    xml.add(root, "LastModified", result.object.created_at)
    xml.add(root, "ETag", quoted(result.object.etag))
    add_elements(root, result.object.checksum)
    headers = {**version_headers(result.object), **source_headers(result.source)}
    return xml.response(root, headers=headers)
