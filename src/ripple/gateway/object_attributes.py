"""GetObjectAttributes on the wire (`GET /bucket/key?attributes`): what HeadObject and
ListParts would tell of one version, without its data, in one answer.

`x-amz-object-attributes` names what to answer (comma-separated): `ETag` (unquoted),
`Checksum` (the version's additional checksum and its type), `ObjectParts` (of an object
completed from a multipart upload: its part count and its parts' numbers, sizes and
checksums, a page at a time with `x-amz-max-parts` and `x-amz-part-number-marker`),
`StorageClass` and `ObjectSize`. `versionId` picks a version; Last-Modified and
x-amz-version-id come as headers. A non-owner needs READ on the version, as for GetObject.
"""

from __future__ import annotations

from xml.etree.ElementTree import Element

from starlette.responses import Response

from ripple.gateway import xml
from ripple.gateway.auth import check_missing, check_served
from ripple.gateway.checksums import element_of
from ripple.gateway.errors import S3Error
from ripple.gateway.headers import http_date, version_headers
from ripple.gateway.object_checksums import shown_value
from ripple.gateway.request import S3Request, header_number
from ripple.gateway.routes import operation
from ripple.metabase import Object, get_object
from ripple.metabase.errors import MethodNotAllowed, ObjectNotFound

ATTRIBUTES = ("ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize")
MAX_PARTS = 1000  # as ListParts: more is answered as 1000


def _wanted(req: S3Request) -> set[str]:
    names = [n.strip() for n in req.header("x-amz-object-attributes").split(",") if n.strip()]
    if not names:
        raise S3Error(
            "InvalidArgument",
            "the x-amz-object-attributes header specifying the attributes to be retrieved "
            f"is either missing or empty: name some of {', '.join(ATTRIBUTES)}",
            extra={"ArgumentName": "x-amz-object-attributes"},
        )
    for name in names:
        if name not in ATTRIBUTES:
            raise S3Error(
                "InvalidArgument",
                f"Invalid attribute name specified: {name[:60]!r}; use {', '.join(ATTRIBUTES)}",
                extra={"ArgumentName": "x-amz-object-attributes"},
            )
    return set(names)


@operation("GET", "object", "attributes", "GetObjectAttributes", "read")
async def get_object_attributes(req: S3Request) -> Response:
    wanted = _wanted(req)
    max_parts = min(
        header_number(req, "x-amz-max-parts", most=2**31 - 1, default=MAX_PARTS), MAX_PARTS
    )
    marker = header_number(req, "x-amz-part-number-marker", most=2**31 - 1, default=0)
    try:
        obj = await req.run(get_object, req.db, req.object_location, req.version_id())
    except (ObjectNotFound, MethodNotAllowed):
        await check_missing(req, "GetObjectAttributes")  # gone since `grant_access` found it
        raise
    check_served(req, obj, "GetObjectAttributes")
    root = xml.document("GetObjectAttributesResponse")
    if "ETag" in wanted:
        xml.add(root, "ETag", obj.etag)
    checksum = obj.checksum
    if "Checksum" in wanted and checksum is not None and checksum.value:
        element = xml.add(root, "Checksum")
        xml.add(element, element_of(checksum.algorithm), shown_value(checksum))
        xml.add(element, "ChecksumType", checksum.type)
    if "ObjectParts" in wanted and obj.part_sizes:
        _add_parts(root, obj, max_parts, marker)
    if "StorageClass" in wanted:
        xml.add(root, "StorageClass", "STANDARD")
    if "ObjectSize" in wanted:
        xml.add(root, "ObjectSize", obj.total_plain_size)
    headers = {"last-modified": http_date(obj.created_at), **version_headers(obj)}
    return xml.response(root, headers=headers)


def _add_parts(root: Element, obj: Object, max_parts: int, marker: int) -> None:
    """`<ObjectParts>`: the part count, and the parts after `marker`, at most `max_parts`
    (every part, with its checksum when the upload declared an algorithm)."""
    sizes = obj.part_sizes
    checksum = obj.checksum
    sums = checksum.parts if checksum is not None and len(checksum.parts) == len(sizes) else ()
    numbers = range(marker + 1, len(sizes) + 1) if marker < len(sizes) else range(0)
    shown = numbers[:max_parts]
    parts = xml.add(root, "ObjectParts")
    xml.add(parts, "PartsCount", len(sizes))
    xml.add(parts, "PartNumberMarker", marker)
    truncated = len(shown) < len(numbers)
    if truncated:
        xml.add(parts, "NextPartNumberMarker", shown[-1] if shown else marker)
    xml.add(parts, "MaxParts", max_parts)
    xml.add(parts, "IsTruncated", truncated)
    for number in shown:
        part = xml.add(parts, "Part")
        xml.add(part, "PartNumber", number)
        xml.add(part, "Size", sizes[number - 1])
        if sums and checksum is not None:
            xml.add(part, element_of(checksum.algorithm), sums[number - 1])
