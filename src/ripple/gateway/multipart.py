"""Multipart uploads on the wire: CreateMultipartUpload, UploadPart (and UploadPartCopy),
CompleteMultipartUpload, AbortMultipartUpload, ListParts and ListMultipartUploads.

An upload is a pending metabase row (`begin_upload`) holding the content type, metadata
and object lock given at create; its stream id, in hex, is the UploadId. Parts are files
(`ripple.gateway.parts`).

Completing concatenates the parts into the file of the upload's own stream id and commits
the row. Completes of one upload queue on a lock file in its parts directory, so a repeated
complete finds the upload gone rather than removing the data the first committed, and
answers what the first did (the committed version keeps the upload's stream id); one
whose commit fails (the upload was aborted meanwhile) removes its file.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote
from xml.etree.ElementTree import Element

from starlette.responses import Response

from ripple.events.keys import encode_key
from ripple.gateway import xml
from ripple.gateway.acl import acl_of
from ripple.gateway.app import operation
from ripple.gateway.auth import authorize
from ripple.gateway.body import read_document, receive, require_length
from ripple.gateway.copy_object import copy_part_data, source_headers
from ripple.gateway.errors import S3Error
from ripple.gateway.get_object import MAX_PART_NUMBER
from ripple.gateway.headers import (
    content_type_of,
    lock_of,
    metadata_of,
    quoted,
    tagging_of,
    version_headers,
)
from ripple.gateway.objects import checksum_headers, free, write_condition
from ripple.gateway.parts import (
    Part,
    drop_older,
    lock_upload,
    multipart_etag,
    part_file,
    stored_parts,
)
from ripple.gateway.request import S3Request, query_number
from ripple.metabase import Object, check_tags, commit_object
from ripple.metabase.errors import MetabaseError, PendingObjectNotFound
from ripple.metabase.uploads import (
    abort_upload,
    begin_upload,
    completed_upload,
    get_upload,
    list_uploads,
)

MIN_PART_SIZE = 5 * 1024 * 1024  # every part but the last
MAX_LISTED = 1000
_HEX = frozenset("0123456789abcdef")


def _upload_id(req: S3Request) -> uuid.UUID:
    """The upload named by `uploadId`: exactly the 32 hex digits this gateway gave out (not
    the other spellings `uuid.UUID` would take for the same upload)."""
    upload = parse_upload_id(req.query.get("uploadId", ""))
    if upload is None:
        raise S3Error("NoSuchUpload", "the specified multipart upload does not exist")
    return upload


def parse_upload_id(text: str) -> uuid.UUID | None:
    if len(text) != 32 or not _HEX.issuperset(text):
        return None
    return uuid.UUID(hex=text)


def _part_number(req: S3Request) -> int:
    return query_number(req, "partNumber", least=1, most=MAX_PART_NUMBER)


async def _settle_part(req: S3Request, upload: uuid.UUID, path: Path) -> None:
    """After a part is placed: drop the part it replaces; if the upload was completed or
    aborted meanwhile, its parts are garbage, this one too."""
    await req.run(drop_older, path)
    try:
        await req.run(get_upload, req.db, req.object_location, upload)
    except PendingObjectNotFound:
        await req.run(req.services.data.remove_parts, upload)
        raise


def _owner(req: S3Request, parent: Element) -> None:
    for tag in ("Initiator", "Owner"):  # the bucket owner owns the upload's object
        who = xml.add(parent, tag)
        xml.add(who, "ID", req.owner_id)
        xml.add(who, "DisplayName", req.owner_name)


@operation("POST", "object", "uploads", "CreateMultipartUpload", "write")
async def create(req: S3Request) -> Response:
    retention, legal_hold = lock_of(req)
    pending = await req.run(
        begin_upload,
        req.db,
        req.object_location,
        content_type=content_type_of(req),
        user_metadata=metadata_of(req),
        retention=retention,
        legal_hold=legal_hold,
        tags=check_tags(tagging_of(req)),
        acl=acl_of(req),
    )
    root = xml.document("InitiateMultipartUploadResult")
    xml.add_all(
        root, [("Bucket", req.bucket), ("Key", req.key), ("UploadId", pending.stream_id.hex)]
    )
    return xml.response(root)


@operation("PUT", "object", "partNumber", "UploadPart", "write")
async def upload_part(req: S3Request) -> Response:
    number = _part_number(req)
    upload = _upload_id(req)
    await req.run(get_upload, req.db, req.object_location, upload)
    if req.has_copy_source:
        req.context.operation = "UploadPartCopy"
        return await _upload_part_copy(req, upload, number)
    require_length(req)
    data = req.services.data
    writer = data.writer(digest=False)  # `receive` computes the MD5
    try:
        received = await receive(req, writer.write)
        path = part_file(data, upload, number, received.etag)
        await req.run(writer.place, path)
    except BaseException:
        writer.abort()
        raise
    await _settle_part(req, upload, path)
    return Response(
        status_code=200, headers={"etag": quoted(received.etag), **checksum_headers(received)}
    )


async def _upload_part_copy(req: S3Request, upload: uuid.UUID, number: int) -> Response:
    data = req.services.data
    obj, writer = await copy_part_data(req, data)
    try:
        path = part_file(data, upload, number, writer.md5.hex())
        await req.run(writer.place, path)
    except BaseException:
        writer.abort()
        raise
    await _settle_part(req, upload, path)
    root = xml.document("CopyPartResult")
    xml.add(root, "LastModified", datetime.fromtimestamp(path.stat().st_mtime, UTC))
    xml.add(root, "ETag", quoted(writer.md5.hex()))
    return xml.response(root, headers=source_headers(obj))


def _requested_parts(body: bytes) -> list[tuple[int, str]]:
    """(number, ETag) of the parts a CompleteMultipartUpload names, in strictly ascending
    order (else `InvalidPartOrder`)."""
    root = xml.parse(body, root="CompleteMultipartUpload")
    parts: list[tuple[int, str]] = []
    for element in root.findall("Part"):
        number = xml.number(element, "PartNumber", least=1, most=MAX_PART_NUMBER)
        etag = xml.text(element, "ETag", "")
        if number is None or not etag:
            raise S3Error("MalformedXML", "each Part needs a PartNumber and an ETag")
        if parts and number <= parts[-1][0]:
            raise S3Error(
                "InvalidPartOrder", "the list of parts was not in ascending order by part number"
            )
        parts.append((number, etag.strip('"').lower()))
    if not parts:
        raise S3Error("MalformedXML", "a CompleteMultipartUpload must name at least one part")
    return parts


def _chosen_parts(wanted: list[tuple[int, str]], stored: dict[int, Part]) -> list[Part]:
    chosen: list[Part] = []
    for number, etag in wanted:
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


@operation("POST", "object", "uploadId", "CompleteMultipartUpload", "write")
async def complete(req: S3Request) -> Response:
    upload, loc, data = _upload_id(req), req.object_location, req.services.data
    try:
        await req.run(get_upload, req.db, loc, upload)
    except PendingObjectNotFound:
        return await _completed_before(req, upload)
    condition = await write_condition(req, loc)
    # its x-amz-checksum-* headers are the whole object's, not the document's
    document = await read_document(req, xml.MAX_XML_BYTES, body_checksums=False)
    wanted = _requested_parts(document)
    lock = await req.run(lock_upload, data, upload)
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
        parts = _chosen_parts(wanted, await req.run(stored_parts, data, upload))
        writer = data.writer()
        try:
            await req.run(data.concatenate, [p.path for p in parts], writer)
            await req.run(writer.place, data.path_of(upload))
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
                condition=condition,
                tag=req.context.tag("complete-multipart-upload", etag=etag),
            )
        except MetabaseError:  # aborted meanwhile, or a conditional write lost a race
            await req.run(data.remove, [upload])
            raise
        await req.run(data.remove_parts, upload)
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
        _requested_parts(await read_document(req, xml.MAX_XML_BYTES, body_checksums=False))
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
    return xml.response(root, headers=version_headers(obj))


@operation("DELETE", "object", "uploadId", "AbortMultipartUpload", "write")
async def abort(req: S3Request) -> Response:
    upload = _upload_id(req)
    await req.run(abort_upload, req.db, req.object_location, upload)
    await req.run(req.services.data.remove_parts, upload)
    return Response(status_code=204)


@operation("GET", "object", "uploadId", "ListParts", "list")
async def list_parts(req: S3Request) -> Response:
    upload = _upload_id(req)
    await req.run(get_upload, req.db, req.object_location, upload)
    max_parts = min(query_number(req, "max-parts", most=2**31 - 1, default=MAX_LISTED), MAX_LISTED)
    marker = query_number(req, "part-number-marker", most=2**31 - 1, default=0)
    stored = await req.run(stored_parts, req.services.data, upload)
    after = sorted((p for p in stored.values() if p.number > marker), key=lambda p: p.number)
    shown = after[:max_parts]
    root = xml.document("ListPartsResult")
    xml.add_all(root, [("Bucket", req.bucket), ("Key", req.key), ("UploadId", upload.hex)])
    xml.add(root, "PartNumberMarker", marker)
    if shown:
        xml.add(root, "NextPartNumberMarker", shown[-1].number)
    xml.add(root, "MaxParts", max_parts)
    xml.add(root, "IsTruncated", len(after) > len(shown))
    for part in shown:
        entry = xml.add(root, "Part")
        xml.add_all(
            entry,
            [
                ("PartNumber", part.number),
                ("LastModified", datetime.fromtimestamp(part.modified_ns / 1e9, UTC)),
                ("ETag", quoted(part.etag)),
                ("Size", part.size),
            ],
        )
    _owner(req, root)
    xml.add(root, "StorageClass", "STANDARD")
    return xml.response(root)


@operation("GET", "bucket", "uploads", "ListMultipartUploads", "list")
async def list_multipart_uploads(req: S3Request) -> Response:
    query = req.query
    prefix, delimiter = query.get("prefix", ""), query.get("delimiter", "")
    key_marker, upload_id_marker = query.get("key-marker", ""), query.get("upload-id-marker", "")
    encoding = query.get("encoding-type", "")
    if encoding not in ("", "url"):
        raise S3Error("InvalidArgument", f"invalid encoding-type {encoding!r}: only url")
    authorize(req, "list", key=prefix)
    max_uploads = min(
        query_number(req, "max-uploads", most=2**31 - 1, default=MAX_LISTED), MAX_LISTED
    )
    upload_marker = None
    if key_marker and upload_id_marker:
        upload_marker = parse_upload_id(upload_id_marker)
        if upload_marker is None:
            raise S3Error("InvalidArgument", "upload-id-marker is not an upload ID")
    found = await req.run(
        list_uploads,
        req.db,
        req.bucket_location,
        prefix=prefix,
        delimiter=delimiter,
        key_marker=key_marker,
        upload_marker=upload_marker,
        max_uploads=max_uploads,
    )

    def key(value: str) -> str:
        return encode_key(value) if encoding else value

    root = xml.document("ListMultipartUploadsResult")
    xml.add(root, "Bucket", req.bucket)
    xml.add(root, "KeyMarker", key(key_marker))
    xml.add(root, "UploadIdMarker", upload_id_marker if upload_marker else "")
    if found.is_truncated:
        xml.add(root, "NextKeyMarker", key(found.next_key_marker))
        upload = found.next_upload_marker
        xml.add(root, "NextUploadIdMarker", upload.hex if upload else "")
    if delimiter:
        xml.add(root, "Delimiter", key(delimiter))
    xml.add(root, "Prefix", key(prefix))
    xml.add(root, "MaxUploads", max_uploads)
    xml.add(root, "IsTruncated", found.is_truncated)
    if encoding:
        xml.add(root, "EncodingType", encoding)
    for pending in found.uploads:
        entry = xml.add(root, "Upload")
        xml.add(entry, "Key", key(pending.object_key))
        xml.add(entry, "UploadId", pending.stream_id.hex)
        _owner(req, entry)
        xml.add(entry, "StorageClass", "STANDARD")
        xml.add(entry, "Initiated", pending.created_at)
    for common in found.common_prefixes:
        xml.add(xml.add(root, "CommonPrefixes"), "Prefix", key(common))
    return xml.response(root)
