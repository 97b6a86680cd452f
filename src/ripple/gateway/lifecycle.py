"""Bucket lifecycle on the wire: Put/Get/DeleteBucketLifecycleConfiguration (`?lifecycle`).

The `<LifecycleConfiguration><Rule>…</Rule>…</LifecycleConfiguration>` document is read into
the dict boto3 would send (`Rules`, each rule's members by name, an `<And>`'s `<Tag>`s as
`Tags`) and checked by the metabase (`check_lifecycle`: S3's `MalformedXML`,
`InvalidArgument`, `InvalidRequest`, and `NotImplemented` for transitions); a refused
document stores nothing. A member given twice where S3 takes one is `MalformedXML`; texts
other than IDs, prefixes and tags lose only the XML whitespace around them (so `<Days>
7</Days>` is 7, but a non-breaking space or `²` reaches the metabase's bounded integer
parser, which refuses it). As S3 does, the PUT needs a Content-MD5 or x-amz-checksum-*
header. GET answers the rules as stored (IDs filled in; a rule stored before a later check
too, so its owner can see and replace it) or `NoSuchLifecycleConfiguration`; DELETE
answers 204, configuration or not. The rules are applied by `ripple lifecycle run`
and by `ripple up` on a schedule (docs/lifecycle.md).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from starlette.responses import Response

from ripple import metabase
from ripple.gateway import xml
from ripple.gateway.body import read_document, require_digest
from ripple.gateway.errors import S3Error
from ripple.gateway.request import S3Request
from ripple.gateway.routes import operation
from ripple.metabase.lifecycle import lifecycle_documents

# texts taken verbatim (a prefix or tag may begin or end with spaces); others lose the XML
# whitespace around them, and only that
_VERBATIM = {"ID", "Prefix", "Key", "Value"}
_XML_SPACE = " \t\r\n"
# Rule > Filter > And > Tag > Key is the deepest a rule's members go
_MAX_DEPTH = 5
# the order S3 answers a rule's members in
_RULE_ORDER = (
    "ID",
    "Prefix",
    "Filter",
    "Status",
    "Expiration",
    "NoncurrentVersionExpiration",
    "AbortIncompleteMultipartUpload",
)


def parse_lifecycle(body: bytes) -> dict[str, Any]:
    """A `<LifecycleConfiguration>` as the dict boto3 sends; `MalformedXML` for anything
    but `<Rule>`s at the top, or a member given twice where S3 takes one."""
    root = xml.parse(body, root="LifecycleConfiguration")
    rules = []
    for child in root:
        if child.tag != "Rule":
            raise S3Error(
                "MalformedXML", f"a <LifecycleConfiguration> holds only <Rule>s, not <{child.tag}>"
            )
        rules.append(_element(child))
    return {"Rules": rules}


def _element(element: ET.Element, depth: int = 1) -> Any:
    """A `<Rule>` (depth 1) or one of its members as a dict of its children, or its text."""
    if len(element) == 0:
        text = element.text or ""
        return text if element.tag in _VERBATIM else text.strip(_XML_SPACE)
    if depth >= _MAX_DEPTH:  # no lifecycle member nests this deep: refused, not recursed into
        raise S3Error("MalformedXML", f"<{element.tag}> is nested deeper than a rule's members")
    members: dict[str, Any] = {}
    for child in element:
        if element.tag == "And" and child.tag == "Tag":
            members.setdefault("Tags", []).append(_element(child, depth + 1))
        elif child.tag in members:
            raise S3Error("MalformedXML", f"<{element.tag}> holds at most one <{child.tag}>")
        else:
            members[child.tag] = _element(child, depth + 1)
    return members


def _render(parent: ET.Element, tag: str, value: Any) -> None:
    if isinstance(value, dict):
        child = xml.add(parent, tag)
        for name, member in value.items():
            _render(child, name, member)
    elif isinstance(value, list):  # an <And>'s Tags
        for item in value:
            _render(parent, "Tag", item)
    else:
        xml.add(parent, tag, value)


@operation("PUT", "bucket", "lifecycle", "PutBucketLifecycleConfiguration", "write")
async def put_bucket_lifecycle_configuration(req: S3Request) -> Response:
    require_digest(req)
    configuration = parse_lifecycle(await read_document(req, xml.MAX_XML_BYTES))
    await req.run(metabase.put_bucket_lifecycle, req.db, req.bucket_location, configuration)
    return Response(status_code=200)


@operation("GET", "bucket", "lifecycle", "GetBucketLifecycleConfiguration", "read")
async def get_bucket_lifecycle_configuration(req: S3Request) -> Response:
    documents = await req.run(lifecycle_documents, req.db, req.bucket_location)
    root = xml.document("LifecycleConfiguration")
    for document in documents:
        element = xml.add(root, "Rule")
        for name in _RULE_ORDER:
            if name in document:
                _render(element, name, document[name])
    return xml.response(root)


@operation("DELETE", "bucket", "lifecycle", "DeleteBucketLifecycle", "write")
async def delete_bucket_lifecycle(req: S3Request) -> Response:
    await req.run(metabase.delete_bucket_lifecycle, req.db, req.bucket_location)
    return Response(status_code=204)
