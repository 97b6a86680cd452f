"""GetObject and HeadObject on the wire: a version (latest or by versionId), one byte range
or one part (`partNumber`), the four conditional headers, the `response-*` query
overrides of response headers, and the version's (or part's) additional checksum with
`x-amz-checksum-mode: ENABLED` (never for a byte range).

A non-owner's read (an ACL let it in) is answered only if the version actually resolved
grants it READ: an overwrite after `grant_access` judged the ACL may have made it private.

The data file is opened before the response starts, so a version deleted while its body
streams is still read whole (POSIX keeps an unlinked open file).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

from starlette.responses import Response, StreamingResponse

from ripple import metabase
from ripple.gateway.auth import check_missing, check_served
from ripple.gateway.errors import S3Error
from ripple.gateway.headers import check_conditions, object_headers
from ripple.gateway.object_checksums import shown_headers
from ripple.gateway.parts import MAX_PART_NUMBER
from ripple.gateway.request import S3Request, query_number
from ripple.gateway.routes import operation
from ripple.metabase import Object
from ripple.metabase.errors import MethodNotAllowed, ObjectNotFound

OVERRIDES = {
    "response-content-type": "content-type",
    "response-content-language": "content-language",
    "response-expires": "expires",
    "response-cache-control": "cache-control",
    "response-content-disposition": "content-disposition",
    "response-content-encoding": "content-encoding",
}
_RANGE = re.compile(r"bytes=([0-9]*)-([0-9]*)", re.ASCII)
BEYOND_ANY_OBJECT = 10**18  # a position of more digits than this means "past the end"
READ_SIZE = 256 * 1024


def byte_range(header: str, size: int) -> tuple[int, int] | None:
    """The inclusive (first, last) byte a Range header asks for; None for the whole object.

    As S3 does, a header it cannot parse, or one with several ranges, is ignored; a range
    that starts past the end is `InvalidRange` (416).
    """
    match = _RANGE.fullmatch(header.strip())
    if match is None:
        return None
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:  # the last N bytes
        length = _position(last)
        if length == 0 or size == 0:
            raise _invalid_range(size)
        return max(0, size - length), size - 1
    start = _position(first)
    end = _position(last) if last else size - 1
    if start > end and last:
        return None  # syntactically invalid: ignored
    if start >= size:
        raise _invalid_range(size)
    return start, min(end, size - 1)


def part_range(obj: Object, number: int) -> tuple[int, int] | None:
    """The inclusive (first, last) byte of part `number` (`partNumber`): of a multipart
    object, that part; of an object written in one piece, part 1 is the whole object (None
    for an empty one). Beyond the last part: `InvalidPartNumber` (416)."""
    sizes = obj.part_sizes or (obj.total_plain_size,)
    if number > len(sizes):
        raise S3Error(
            "InvalidPartNumber",
            f"the requested part number {number} is not satisfiable: the object has "
            f"{len(sizes)} part{'s' if len(sizes) > 1 else ''}",
            extra={"PartsCount": str(len(sizes))},
        )
    first = sum(sizes[: number - 1])
    if sizes[number - 1] == 0:
        return None
    return first, first + sizes[number - 1] - 1


def _position(digits: str) -> int:
    """A byte position of any length: past every object's end when it is that long."""
    return int(digits) if len(digits) < 19 else BEYOND_ANY_OBJECT


def _invalid_range(size: int) -> S3Error:
    return S3Error(
        "InvalidRange",
        "the requested range is not satisfiable",
        extra={"ActualObjectSize": str(size)},
        headers={"content-range": f"bytes */{size}"},
    )


def _header_value(parameter: str, value: str) -> str:
    """An override as a header value: Latin-1 without control characters, as HTTP allows."""
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        ok = False
    else:
        ok = not any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in value)
    if not ok:
        raise S3Error(
            "InvalidArgument",
            f"{parameter} must be a header value: Latin-1 text without control characters "
            "(percent-encode other characters, e.g. filename*=UTF-8''…)",
        )
    return value


def _chunks(file: BinaryIO, start: int, length: int) -> Iterator[bytes]:
    try:
        file.seek(start)
        while length > 0:
            chunk = file.read(min(READ_SIZE, length))
            if not chunk:
                break
            length -= len(chunk)
            yield chunk
    finally:
        file.close()


def _look_up(req: S3Request, whole: bool) -> tuple[Object, BinaryIO | bytes | None]:
    """The version asked for and, for one stored on the filesystem, its opened data; read
    already (bytes) when `whole` and it is at most READ_SIZE. One thread hop for all."""
    for _ in range(3):
        obj = metabase.get_object(req.db, req.object_location, req.version_id())
        if obj.inline_data is not None:
            return obj, None
        try:
            file = req.services.data.open(obj.stream_id)
        except FileNotFoundError:
            continue  # replaced or deleted between the look-up and the open: look again
        if not whole or obj.total_plain_size > READ_SIZE:
            return obj, file
        with file:
            return obj, file.read(READ_SIZE + 1)
    raise S3Error("InternalError", f"the data of {req.key!r} is missing; please try again")


async def _answer(req: S3Request, head: bool) -> Response:
    for name in req.query:
        if name.startswith("response-") and name not in OVERRIDES:
            raise S3Error("InvalidArgument", f"unknown response header override {name!r}")
    operation = "HeadObject" if head else "GetObject"
    # a plain GET of a small object reads its data with the look-up
    whole = not head and not req.header("range") and "partNumber" not in req.query
    try:
        obj, data = await req.read(_look_up, req, whole)
    except (ObjectNotFound, MethodNotAllowed):
        await check_missing(req, operation)  # gone since `grant_access` found it
        raise
    file = data if data is not None and not isinstance(data, bytes) else None
    try:
        check_served(req, obj, operation)  # a non-owner: this very version's ACL
        headers = object_headers(obj)
        status = check_conditions(req, obj)
        if status == 304:
            kept = ("etag", "last-modified", "x-amz-version-id")
            if file is not None:
                file.close()
            return Response(status_code=304, headers={k: headers[k] for k in kept if k in headers})
        for parameter, header in OVERRIDES.items():
            if parameter in req.query:
                headers[header] = _header_value(parameter, req.query[parameter])
        size = obj.total_plain_size
        ranged = req.header("range")
        if "partNumber" in req.query:
            if ranged:
                raise S3Error(
                    "InvalidRequest",
                    "cannot specify both a Range header and a partNumber parameter",
                )
            number = query_number(req, "partNumber", least=1, most=MAX_PART_NUMBER)
            span = part_range(obj, number)
            if obj.part_sizes:
                headers["x-amz-mp-parts-count"] = str(len(obj.part_sizes))
            headers.update(shown_headers(req, obj.checksum, number))
        else:
            span = byte_range(ranged, size) if ranged else None
            if not ranged:
                headers.update(shown_headers(req, obj.checksum, None))
        start, length, status = 0, size, 200
        if span is not None:
            start, length, status = span[0], span[1] - span[0] + 1, 206
            headers["content-range"] = f"bytes {span[0]}-{span[1]}/{size}"
        headers["content-length"] = str(length)
    except BaseException:
        if file is not None:
            file.close()
        raise
    if head or length == 0:
        if file is not None:
            file.close()
        return Response(status_code=status, headers=headers)
    if isinstance(data, bytes):
        return Response(data, status, headers=headers)
    if file is None:
        if obj.inline_data is None:
            raise RuntimeError("an object with neither a data file nor inline data")
        return Response(obj.inline_data[start : start + length], status, headers=headers)
    return StreamingResponse(_chunks(file, start, length), status, headers=headers)


@operation("GET", "object", "partNumber", "GetObject", "read")
@operation("GET", "object", "", "GetObject", "read")
async def get_object(req: S3Request) -> Response:
    return await _answer(req, head=False)


@operation("HEAD", "object", "partNumber", "HeadObject", "read")
@operation("HEAD", "object", "", "HeadObject", "read")
async def head_object(req: S3Request) -> Response:
    return await _answer(req, head=True)
