"""Multipart uploads on the wire: CreateMultipartUpload, UploadPart (and UploadPartCopy),
AbortMultipartUpload, ListParts and ListMultipartUploads.

An upload is a pending metabase row (`begin_upload`) holding the content type, metadata,
object lock and checksum algorithm given at create; its stream id, in hex, is the UploadId.
Parts are files (`ripple.gateway.parts`), with their checksum in that algorithm; the
completed object's checksum is made of theirs (`ripple.gateway.object_checksums`).

Completing is `ripple.gateway.complete_multipart`.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from xml.etree.ElementTree import Element

from starlette.responses import Response

from ripple.events.keys import encode_key
from ripple.gateway import xml
from ripple.gateway.acl_headers import acl_of
from ripple.gateway.auth import authorize
from ripple.gateway.body import receive, require_length
from ripple.gateway.checksums import decode, element_of, encode, header_of
from ripple.gateway.copy_source import copy_part_data, source_headers
from ripple.gateway.errors import S3Error
from ripple.gateway.headers import (
    content_type_of,
    lock_of,
    metadata_of,
    quoted,
    tagging_of,
)
from ripple.gateway.object_checksums import (
    add_elements,
    declared,
    part_algorithm,
)
from ripple.gateway.parts import (
    MAX_PART_NUMBER,
    drop_older,
    parse_upload_id,
    part_file,
    stored_parts,
    upload_id_of,
)
from ripple.gateway.request import S3Request, query_number
from ripple.gateway.routes import operation
from ripple.metabase import Checksum, check_tags
from ripple.metabase.errors import BucketNotFound, PendingObjectNotFound
from ripple.metabase.uploads import (
    abort_upload,
    begin_upload,
    get_upload,
    list_uploads,
)

MAX_LISTED = 1000


def _part_number(req: S3Request) -> int:
    return query_number(req, "partNumber", least=1, most=MAX_PART_NUMBER)


async def _settle_part(req: S3Request, upload: uuid.UUID, path: Path) -> None:
    """After a part is placed: drop the part it replaces; if the upload was completed or
    aborted meanwhile (its bucket deleted, too), its parts are garbage, this one too."""
    await req.run_data(drop_older, path)
    try:
        await req.run(get_upload, req.db, req.object_location, upload)
    except (PendingObjectNotFound, BucketNotFound):
        await req.run_data(req.services.data.remove_parts, upload)
        raise


def _owner(req: S3Request, parent: Element) -> None:
    for tag in ("Initiator", "Owner"):  # the bucket owner owns the upload's object
        who = xml.add(parent, tag)
        xml.add(who, "ID", req.owner_id)
        xml.add(who, "DisplayName", req.owner_name)


@operation("POST", "object", "uploads", "CreateMultipartUpload", "write")
async def create_multipart_upload(req: S3Request) -> Response:
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
        checksum=declared(req),
    )
    root = xml.document("InitiateMultipartUploadResult")
    xml.add_all(
        root, [("Bucket", req.bucket), ("Key", req.key), ("UploadId", pending.stream_id.hex)]
    )
    headers = {}
    if pending.checksum is not None:
        headers["x-amz-checksum-algorithm"] = pending.checksum.algorithm
        headers["x-amz-checksum-type"] = pending.checksum.type
    return xml.response(root, headers=headers)


@operation("PUT", "object", "partNumber", "UploadPart", "write")
async def upload_part(req: S3Request) -> Response:
    number = _part_number(req)
    upload = upload_id_of(req)
    pending = await req.run(get_upload, req.db, req.object_location, upload)
    if req.has_copy_source:
        req.context.operation = "UploadPartCopy"
        return await _upload_part_copy(req, upload, number, pending.checksum)
    require_length(req)
    algorithm = part_algorithm(req, pending.checksum)  # refused before the body is read
    data = req.services.data
    writer = data.writer(digest=False)  # `receive` computes the MD5
    try:
        received = await receive(req, writer.write, compute=algorithm)
        checksum = b""
        if algorithm is not None:
            checksum = decode(algorithm, received.checksums[header_of(algorithm)]) or b""
        path = part_file(data, upload, number, received.etag, checksum)
        await req.run_data(writer.place, path)
    except BaseException:
        writer.abort()
        raise
    await _settle_part(req, upload, path)
    return Response(status_code=200, headers={"etag": quoted(received.etag), **received.checksums})


async def _upload_part_copy(
    req: S3Request, upload: uuid.UUID, number: int, declared: Checksum | None
) -> Response:
    data = req.services.data
    algorithm = None if declared is None else declared.algorithm
    obj, writer, checksum = await copy_part_data(req, data, algorithm)
    try:
        path = part_file(data, upload, number, writer.md5.hex(), checksum)
        await req.run_data(writer.place, path)
    except BaseException:
        writer.abort()
        raise
    await _settle_part(req, upload, path)
    root = xml.document("CopyPartResult")
    xml.add(root, "LastModified", datetime.fromtimestamp(path.stat().st_mtime, UTC))
    xml.add(root, "ETag", quoted(writer.md5.hex()))
    if algorithm is not None:
        xml.add(root, element_of(algorithm), encode(checksum))
    return xml.response(root, headers=source_headers(obj))


@operation("DELETE", "object", "uploadId", "AbortMultipartUpload", "write")
async def abort_multipart_upload(req: S3Request) -> Response:
    upload = upload_id_of(req)
    await req.run(abort_upload, req.db, req.object_location, upload)
    await req.run_data(req.services.data.remove_parts, upload)
    return Response(status_code=204)


@operation("GET", "object", "uploadId", "ListParts", "list")
async def list_parts(req: S3Request) -> Response:
    upload = upload_id_of(req)
    pending = await req.run(get_upload, req.db, req.object_location, upload)
    max_parts = min(query_number(req, "max-parts", most=2**31 - 1, default=MAX_LISTED), MAX_LISTED)
    marker = query_number(req, "part-number-marker", most=2**31 - 1, default=0)
    stored = await req.run_data(stored_parts, req.services.data, upload)
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
        if pending.checksum is not None and part.checksum:
            xml.add(entry, element_of(pending.checksum.algorithm), encode(part.checksum))
    _owner(req, root)
    xml.add(root, "StorageClass", "STANDARD")
    add_elements(root, pending.checksum, algorithm=True)
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
        add_elements(entry, pending.checksum, algorithm=True)
    for common in found.common_prefixes:
        xml.add(xml.add(root, "CommonPrefixes"), "Prefix", key(common))
    return xml.response(root)
