"""Bucket listings on the wire: ListObjects (v1), ListObjectsV2 and ListObjectVersions.

The metabase decides what a page holds (`metabase.list_objects`, `list_object_versions`); this
module reads the query (prefix, delimiter, markers, max-keys, encoding-type), checks the
access key may list under the prefix, and writes S3's XML. With `encoding-type=url` every
member that can hold a key is percent-encoded (space as %20, `+` as %2B, `/` kept), which
both `unquote` and botocore's `unquote_plus` turn back into the exact key. The V2
continuation token is `continuation`'s.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from urllib.parse import quote

from starlette.responses import Response

from ripple import metabase
from ripple.gateway import xml
from ripple.gateway.auth import authorize
from ripple.gateway.continuation import continuation_token, resume_key
from ripple.gateway.errors import S3Error
from ripple.gateway.headers import quoted
from ripple.gateway.request import S3Request, query_number
from ripple.gateway.routes import operation
from ripple.metabase import Object
from ripple.metabase.listing import MAX_KEYS


@dataclass(frozen=True)
class Query:
    """What every listing reads from the query string."""

    prefix: str
    delimiter: str
    max_keys: int
    encode: bool  # encoding-type=url

    def wire(self, value: str) -> str:
        """`value` as a key-bearing member is written: URL-encoded when asked for."""
        return quote(value, safe="/") if self.encode else value


def _query(req: S3Request) -> Query:
    # S3 takes any 32-bit count and lists at most 1000
    max_keys = query_number(req, "max-keys", most=2**31 - 1, default=MAX_KEYS)
    encoding = req.query.get("encoding-type")
    if encoding is not None and encoding.lower() != "url":
        raise S3Error("InvalidArgument", f"invalid encoding-type {encoding!r}: the only one is url")
    query = Query(
        prefix=req.query.get("prefix", ""),
        delimiter=req.query.get("delimiter", ""),
        max_keys=min(max_keys, MAX_KEYS),
        encode=encoding is not None,
    )
    authorize(req, "list", key=query.prefix)
    return query


def _head(root: ET.Element, req: S3Request, query: Query, *, encoded_prefix: bool = True) -> None:
    """Name and Prefix. ListObjects (v1) answers the prefix as sent, even with
    encoding-type=url: S3 encodes keys, common prefixes, markers and the delimiter there,
    not the prefix (and SDKs decode only those)."""
    xml.add(root, "Name", req.bucket)
    xml.add(root, "Prefix", query.wire(query.prefix) if encoded_prefix else query.prefix)


def _tail(root: ET.Element, query: Query, truncated: bool) -> None:
    xml.add(root, "MaxKeys", query.max_keys)
    if query.delimiter:
        xml.add(root, "Delimiter", query.wire(query.delimiter))
    if query.encode:
        xml.add(root, "EncodingType", "url")
    xml.add(root, "IsTruncated", truncated)


def _owner(parent: ET.Element, req: S3Request) -> None:
    owner = xml.add(parent, "Owner")  # the bucket owner owns every object in it
    xml.add(owner, "ID", req.owner_id)
    xml.add(owner, "DisplayName", req.owner_name)


def _contents(
    root: ET.Element, req: S3Request, query: Query, objects: list[Object], *, owner: bool
) -> None:
    for obj in objects:
        entry = xml.add(root, "Contents")
        xml.add(entry, "Key", query.wire(obj.object_key))
        xml.add(entry, "LastModified", obj.created_at)
        xml.add(entry, "ETag", quoted(obj.etag))
        xml.add(entry, "Size", obj.total_plain_size)
        if owner:
            _owner(entry, req)
        xml.add(entry, "StorageClass", "STANDARD")


def _common_prefixes(root: ET.Element, query: Query, prefixes: list[str]) -> None:
    for prefix in prefixes:
        xml.add(xml.add(root, "CommonPrefixes"), "Prefix", query.wire(prefix))


@operation("GET", "bucket", "", "ListObjects", "list")
async def list_objects(req: S3Request) -> Response:
    query = _query(req)
    marker = req.query.get("marker", "")
    result = await req.run(
        metabase.list_objects,
        req.db,
        req.bucket_location,
        prefix=query.prefix,
        delimiter=query.delimiter,
        start_after=marker,
        max_keys=query.max_keys,
    )
    root = xml.document("ListBucketResult")
    _head(root, req, query, encoded_prefix=False)
    xml.add(root, "Marker", query.wire(marker))
    # without a delimiter S3 leaves it out: clients resume after the last Key
    if result.is_truncated and query.delimiter:
        xml.add(root, "NextMarker", query.wire(result.next_marker))
    _tail(root, query, result.is_truncated)
    _contents(root, req, query, result.objects, owner=True)
    _common_prefixes(root, query, result.common_prefixes)
    return xml.response(root)


@operation("GET", "bucket", "list-type", "ListObjectsV2", "list")
async def list_objects_v2(req: S3Request) -> Response:
    if req.query["list-type"] != "2":
        raise S3Error(
            "InvalidArgument", f"list-type {req.query['list-type']!r} is not supported: use 2"
        )
    query = _query(req)
    token = req.query.get("continuation-token")
    start_after = req.query.get("start-after", "")
    fetch_owner = req.query.get("fetch-owner", "").lower() == "true"
    # an empty token is no token: the listing starts from the beginning (or start-after)
    position = resume_key(token) if token else start_after
    result = await req.run(
        metabase.list_objects,
        req.db,
        req.bucket_location,
        prefix=query.prefix,
        delimiter=query.delimiter,
        start_after=position,
        max_keys=query.max_keys,
    )
    root = xml.document("ListBucketResult")
    _head(root, req, query)
    if token is not None:
        xml.add(root, "ContinuationToken", token)
    if result.is_truncated:
        xml.add(root, "NextContinuationToken", continuation_token(result.next_marker))
    xml.add(root, "KeyCount", len(result.objects) + len(result.common_prefixes))
    if start_after:
        xml.add(root, "StartAfter", query.wire(start_after))
    _tail(root, query, result.is_truncated)
    _contents(root, req, query, result.objects, owner=fetch_owner)
    _common_prefixes(root, query, result.common_prefixes)
    return xml.response(root)


@operation("GET", "bucket", "versions", "ListObjectVersions", "list")
async def list_object_versions(req: S3Request) -> Response:
    query = _query(req)
    key_marker = req.query.get("key-marker", "")
    version_id_marker = req.query.get("version-id-marker", "")
    result = await req.run(
        metabase.list_object_versions,
        req.db,
        req.bucket_location,
        prefix=query.prefix,
        delimiter=query.delimiter,
        key_marker=key_marker,
        version_id_marker=version_id_marker,
        max_keys=query.max_keys,
    )
    root = xml.document("ListVersionsResult")
    _head(root, req, query)
    xml.add(root, "KeyMarker", query.wire(key_marker))
    xml.add(root, "VersionIdMarker", version_id_marker)
    if result.is_truncated:
        xml.add(root, "NextKeyMarker", query.wire(result.next_key_marker))
        if result.next_version_id_marker:  # none after a common prefix
            xml.add(root, "NextVersionIdMarker", result.next_version_id_marker)
    _tail(root, query, result.is_truncated)
    for entry in result.versions:
        obj = entry.object
        element = xml.add(root, "DeleteMarker" if obj.is_delete_marker else "Version")
        xml.add(element, "Key", query.wire(obj.object_key))
        xml.add(element, "VersionId", obj.version_id)
        xml.add(element, "IsLatest", entry.is_latest)
        xml.add(element, "LastModified", obj.created_at)
        if not obj.is_delete_marker:
            xml.add(element, "ETag", quoted(obj.etag))
            xml.add(element, "Size", obj.total_plain_size)
            xml.add(element, "StorageClass", "STANDARD")
        _owner(element, req)
    _common_prefixes(root, query, result.common_prefixes)
    return xml.response(root)
