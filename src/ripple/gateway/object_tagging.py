"""Object tags on the wire: Put/Get/DeleteObjectTagging (`?tagging`), on the latest version
or `?versionId=`.

The `<Tagging><TagSet><Tag><Key/><Value/></Tag>…</TagSet></Tagging>` document both ways; the
rules of a tag set (at most 10, lengths, characters, no `aws:` keys, no duplicate keys) are
the metabase's (`check_tags`). Responses name the version in `x-amz-version-id` (versioned
objects only). As S3 does, the PUT needs a Content-MD5 or x-amz-checksum-* header.
"""

from __future__ import annotations

from starlette.responses import Response

from ripple import metabase
from ripple.changestream.tag import Operation
from ripple.gateway import xml
from ripple.gateway.body import read_document, require_digest
from ripple.gateway.errors import S3Error
from ripple.gateway.headers import version_headers
from ripple.gateway.request import S3Request
from ripple.gateway.routes import operation

SMALL_DOCUMENT = 64 * 1024


def parse_tagging(body: bytes) -> list[tuple[str, str]]:
    """The (key, value) pairs of a `<Tagging>` document, in order and as sent (duplicates
    included: the metabase refuses them). Key and value are taken verbatim, spaces kept."""
    root = xml.parse(body, root="Tagging", limit=SMALL_DOCUMENT)
    tag_set = xml.child(root, "TagSet")
    if tag_set is None:
        raise S3Error("MalformedXML", "a <Tagging> document needs a <TagSet>")
    pairs: list[tuple[str, str]] = []
    for tag in tag_set:
        if tag.tag != "Tag":
            raise S3Error("MalformedXML", f"a <TagSet> holds only <Tag> elements, not <{tag.tag}>")
        key, value = xml.child(tag, "Key"), xml.child(tag, "Value")
        if key is None or value is None:
            raise S3Error("MalformedXML", "each <Tag> needs a <Key> and a <Value>")
        pairs.append((key.text or "", value.text or ""))
    return pairs


@operation("PUT", "object", "tagging", "PutObjectTagging", "write")
async def put_object_tagging(req: S3Request) -> Response:
    require_digest(req)
    pairs = parse_tagging(await read_document(req, SMALL_DOCUMENT))
    obj = await req.run(
        metabase.put_object_tagging,
        req.db,
        req.object_location,
        pairs,
        version_id=req.version_id(),
        tag=req.context.tag(Operation.PUT_OBJECT_TAGGING),
    )
    return Response(status_code=200, headers=version_headers(obj))


@operation("GET", "object", "tagging", "GetObjectTagging", "read")
async def get_object_tagging(req: S3Request) -> Response:
    obj = await req.run(
        metabase.get_object_tagging, req.db, req.object_location, version_id=req.version_id()
    )
    root = xml.document("Tagging")
    tag_set = xml.add(root, "TagSet")
    # sorted by key, as Ceph RGW answers (S3 documents no order; SDK users compare sets)
    for key, value in sorted(obj.tags.items()):
        tag = xml.add(tag_set, "Tag")
        xml.add(tag, "Key", key)
        xml.add(tag, "Value", value)
    return xml.response(root, headers=version_headers(obj))


@operation("DELETE", "object", "tagging", "DeleteObjectTagging", "write")
async def delete_object_tagging(req: S3Request) -> Response:
    obj = await req.run(
        metabase.delete_object_tagging,
        req.db,
        req.object_location,
        version_id=req.version_id(),
        tag=req.context.tag(Operation.DELETE_OBJECT_TAGGING),
    )
    return Response(status_code=204, headers=version_headers(obj))
