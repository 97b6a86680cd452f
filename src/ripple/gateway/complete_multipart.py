"""CompleteMultipartUpload on the wire: the parts a document names become the object.

The parts (`ripple.gateway.parts`) must be those the document names, with their ETags (and,
for an upload that declared a checksum algorithm, their checksums: `object_checksums`),
every one but the last at least 5 MiB. Completing concatenates them into the file of the
upload's own stream id and commits the row with the part sizes and the object's checksum.
Completes of one upload queue on a lock file in its parts directory, so a repeated
complete finds the upload gone rather than removing the data the first committed, and
answers what the first did (the committed version keeps the upload's stream id); one whose
commit fails (the upload was aborted meanwhile) removes its file.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import quote

from starlette.responses import Response

from ripple.changestream.tag import Operation
from ripple.gateway import xml
from ripple.gateway.body import read_document
from ripple.gateway.data import commit_within
from ripple.gateway.errors import S3Error
from ripple.gateway.headers import quoted, version_headers, write_condition
from ripple.gateway.object_checksums import add_elements, completed, listed_checksums
from ripple.gateway.parts import (
    MAX_PART_NUMBER,
    Part,
    lock_upload,
    multipart_etag,
    stored_parts,
    upload_id_of,
)
from ripple.gateway.request import S3Request, free
from ripple.gateway.routes import operation
from ripple.metabase import Object, WriteCondition, commit_object
from ripple.metabase.errors import (
    MetabaseError,
    ObjectNotFound,
    PendingObjectNotFound,
    PreconditionFailed,
)
from ripple.metabase.uploads import completed_upload, get_upload

MIN_PART_SIZE = 5 * 1024 * 1024  # every part but the last


def _requested_parts(body: bytes) -> list[tuple[int, str, dict[str, str]]]:
    """(number, ETag, checksums by algorithm) of the parts a CompleteMultipartUpload names,
    in ascending order (else `InvalidPartOrder`). A part listed twice in a row (a client
    that uploaded it again while the first upload was still running) counts once, as its
    last listing: the upload it names is the one the part now holds."""
    root = xml.parse(body, root="CompleteMultipartUpload")
    parts: list[tuple[int, str, dict[str, str]]] = []
    for element in root.findall("Part"):
        number = xml.number(element, "PartNumber", least=1, most=MAX_PART_NUMBER)
        etag = xml.text(element, "ETag", "")
        if number is None or not etag:
            raise S3Error("MalformedXML", "each Part needs a PartNumber and an ETag")
        if parts and number < parts[-1][0]:
            raise S3Error(
                "InvalidPartOrder", "the list of parts was not in ascending order by part number"
            )
        if parts and number == parts[-1][0]:
            parts.pop()
        parts.append((number, etag.strip('"').lower(), listed_checksums(element)))
    if not parts:
        raise S3Error("MalformedXML", "a CompleteMultipartUpload must name at least one part")
    return parts


def _chosen_parts(
    wanted: list[tuple[int, str, dict[str, str]]], stored: dict[int, Part]
) -> list[Part]:
    chosen: list[Part] = []
    for number, etag, _ in wanted:
        part = stored.get(number)
        if part is None or part.etag != etag:
            raise _invalid_part(number)
        chosen.append(part)
    for part in chosen[:-1]:
        if part.size < MIN_PART_SIZE:
            raise S3Error(
                "EntityTooSmall",
                f"part {part.number} is {part.size} bytes: every part but the last must be "
                f"at least {MIN_PART_SIZE}",
                extra={"ProposedSize": str(part.size), "MinSizeAllowed": str(MIN_PART_SIZE)},
            )
    return chosen


def _invalid_part(number: int) -> S3Error:
    return S3Error(
        "InvalidPart",
        f"part {number} could not be found: it was not uploaded, or its entity tag does not "
        "match the one given",
    )


# this process's completes in progress, by (event loop, upload): an upload's completes wait
# their turn on the loop, so at most one of them waits on its file lock on a data thread
_COMPLETING: dict[tuple[int, uuid.UUID], tuple[asyncio.Lock, list[int]]] = {}


@asynccontextmanager
async def one_at_a_time(upload: uuid.UUID) -> AsyncIterator[None]:
    """Hold this process's turn to complete `upload`. Without it, every retry of a slow
    complete took a data thread to wait on the upload's lock, and enough of them (a client
    retrying in a loop) took them all, the holder's next steps included: the process's file
    work stopped for good."""
    key = (id(asyncio.get_running_loop()), upload)
    lock, users = _COMPLETING.setdefault(key, (asyncio.Lock(), [0]))
    users[0] += 1
    try:
        async with lock:
            yield
    finally:
        users[0] -= 1
        if users[0] == 0:
            del _COMPLETING[key]


@operation("POST", "object", "uploadId", "CompleteMultipartUpload", "write")
async def complete_multipart_upload(req: S3Request) -> Response:
    upload, loc = upload_id_of(req), req.object_location
    try:
        await req.run(get_upload, req.db, loc, upload)
    except PendingObjectNotFound:
        return await _completed_before(req, upload)
    try:
        condition = await write_condition(req, loc)
    except (PreconditionFailed, ObjectNotFound) as refused:
        # a retry whose first try committed meanwhile: the object it sees is its own
        try:
            return await _completed_before(req, upload)
        except PendingObjectNotFound:
            raise refused from None
    # its x-amz-checksum-* headers are the whole object's, not the document's
    document = await read_document(req, xml.MAX_XML_BYTES, body_checksums=False)
    wanted = await req.run(_requested_parts, document)  # up to 2 MiB: off the event loop
    async with one_at_a_time(upload):
        return await _complete_locked(req, upload, wanted, condition)


async def _complete_locked(
    req: S3Request,
    upload: uuid.UUID,
    wanted: list[tuple[int, str, dict[str, str]]],
    condition: WriteCondition,
) -> Response:
    """The complete, once it is this process's turn for the upload: under the upload's file
    lock (other processes' completes), the parts become the object."""
    loc, data = req.object_location, req.services.data
    lock = await req.run_data(lock_upload, data, upload)
    if lock is None:
        try:
            await req.run(get_upload, req.db, loc, upload)
        except PendingObjectNotFound:
            return await _completed_before(req, upload, document_read=True)
        raise _invalid_part(wanted[0][0])
    try:
        # under the lock: a complete that held it before us has committed the upload
        try:
            pending = await req.run(get_upload, req.db, loc, upload)
        except PendingObjectNotFound:
            return await _completed_before(req, upload, document_read=True)
        parts = _chosen_parts(wanted, await req.run_data(stored_parts, data, upload))
        checksum = completed(req, pending.checksum, parts, [sums for _, _, sums in wanted])
        writer = data.writer()
        try:
            await req.run_data(data.concatenate, [p.path for p in parts], writer)
            await req.run_data(writer.place, data.path_of(upload))
        except FileNotFoundError:  # a part was replaced, or the upload aborted, meanwhile
            writer.abort()
            await req.run(get_upload, req.db, loc, upload)
            raise _invalid_part(wanted[0][0]) from None
        except BaseException:
            writer.abort()
            raise
        etag = multipart_etag(parts)
        try:
            result = await req.run(
                commit_within,
                writer.commit_by,
                commit_object,
                req.db,
                pending,
                size=writer.size,
                etag=etag,
                content_type=pending.content_type,
                user_metadata=pending.user_metadata,
                retention=pending.retention,
                legal_hold=pending.legal_hold,
                part_sizes=[p.size for p in parts],
                checksum=checksum,
                condition=condition,
                tag=req.context.tag(Operation.COMPLETE_MULTIPART_UPLOAD, etag=etag),
            )
        except MetabaseError:  # aborted meanwhile, or a conditional write lost a race
            await req.run_data(data.remove, [upload])
            raise
        await req.run_data(data.remove_parts, upload)
    finally:
        lock.close()  # releases the lock
    free(req, result.removed)
    return _completion(req, result.object)


async def _completed_before(
    req: S3Request, upload: uuid.UUID, *, document_read: bool = False
) -> Response:
    """A complete of an upload that is no longer in progress: if it was completed and the
    key still holds that version, the same answer again (S3 does, for retries); otherwise
    `NoSuchUpload`. A document not yet read is read and checked as for a first complete."""
    completed = await req.run(completed_upload, req.db, req.object_location, upload)
    if not document_read:
        document = await read_document(req, xml.MAX_XML_BYTES, body_checksums=False)
        await req.run(_requested_parts, document)
    return _completion(req, completed)


def _completion(req: S3Request, obj: Object) -> Response:
    root = xml.document("CompleteMultipartUploadResult")
    location = str(req.http.base_url) + quote(f"{req.bucket}/{req.key}", safe="/")
    xml.add_all(
        root,
        [
            ("Location", location),
            ("Bucket", req.bucket),
            ("Key", req.key),
            ("ETag", quoted(obj.etag)),
        ],
    )
    add_elements(root, obj.checksum)
    return xml.response(root, headers=version_headers(obj))
