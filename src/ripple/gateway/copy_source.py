"""The copy source of CopyObject and UploadPartCopy: the `x-amz-copy-source` header parsed,
the key checked to be allowed to read it, the source version resolved under the
`x-amz-copy-source-if-*` conditions, and for UploadPartCopy the range of it
(`x-amz-copy-source-range`) copied to a new part's file.

A source may be another project's bucket: what it holds is told only to a requester its
object ACL lets read it (`auth.check_source_read`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote

from ripple.gateway.auth import check_source_missing, check_source_read, source_owner
from ripple.gateway.body import MAX_PUT_SIZE
from ripple.gateway.checksums import checksum_for
from ripple.gateway.data import DataWriter, ObjectData, write_range
from ripple.gateway.errors import S3Error
from ripple.gateway.headers import check_conditions
from ripple.gateway.request import S3Request
from ripple.metabase import Object, ObjectLocation, get_object
from ripple.metabase.acl import BucketOwner
from ripple.metabase.errors import ObjectNotFound
from ripple.metabase.get_object import DeleteMarkerVersion
from ripple.metabase.types import NULL_VERSION_ID
from ripple.numbers import INT64_MAX, NumberError, whole_number

ATTEMPTS = 3  # resolutions of a source that keeps changing before giving up
MAX_POSITION = INT64_MAX  # a byte position any object could have
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
    raise source_kept_changing()


def source_kept_changing() -> S3Error:
    """The refusal of a copy whose source changed under each of its `ATTEMPTS`."""
    return S3Error(
        "OperationAborted", "the copy source changed repeatedly during the copy; try again"
    )
