"""DeleteObjects on the wire: `POST /BUCKET?delete` with a `<Delete>` document of up to
1000 keys or versions, answered by one `<DeleteResult>`.

The whole request is one operation: ONE token from the project's delete rate limit and ONE
metabase `delete_objects` call (one transaction), whatever the item count. Items the access
key may not delete (outside its prefix, or `delete` denied), and items naming a version
when the requester is not the bucket owner (no ACL lets it delete versions), are left out
of that call and answered as per-item `AccessDenied` errors, as are items object lock
refuses; the response
is 200 unless the request itself fails (no digest header, malformed XML, more than 1000
items, no such bucket, rate limited). Quiet mode answers only the errors. The data of the
versions the transaction removed is freed after it commits.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable

from starlette.background import BackgroundTask
from starlette.responses import Response

from ripple import metabase
from ripple.changestream.tag import Operation
from ripple.gateway import xml
from ripple.gateway.body import read_document, require_digest
from ripple.gateway.errors import S3Error
from ripple.gateway.headers import MAX_SIZE, condition_time
from ripple.gateway.request import S3Request, free
from ripple.gateway.routes import operation
from ripple.metabase import (
    MAX_DELETE_OBJECTS,
    DeletedObject,
    DeleteObjectsError,
    DeleteObjectsItem,
    DeleteObjectsResult,
    get_bucket_info,
)
from ripple.metabase.delete_condition import DeleteCondition

Entry = DeletedObject | DeleteObjectsError


def parse_delete(body: bytes) -> tuple[list[DeleteObjectsItem], bool]:
    """The items and quiet flag of a `<Delete>` document; `MalformedXML` if it has no items,
    more than 1000, an `<Object>` without `<Key>`, or a Quiet that is not true or false."""
    root = xml.parse(body, root="Delete")
    quiet = (xml.text(root, "Quiet", "false") or "false").lower()
    if quiet not in ("true", "false"):
        raise S3Error("MalformedXML", f"<Quiet> must be true or false, not {quiet!r}")
    elements = root.findall("Object")
    if len(elements) > MAX_DELETE_OBJECTS:
        raise S3Error(
            "MalformedXML",
            f"DeleteObjects takes at most {MAX_DELETE_OBJECTS} objects, got {len(elements)}; "
            "nothing was deleted: split the request",
        )
    if not elements:
        raise S3Error("MalformedXML", "the <Delete> document names no <Object> to delete")
    return [_item(element) for element in elements], quiet == "true"


def _item(element: ET.Element) -> DeleteObjectsItem:
    key = xml.child(element, "Key")
    if key is None:
        raise S3Error("MalformedXML", "every <Object> of a <Delete> document needs a <Key>")
    when = xml.text(element, "LastModifiedTime")
    condition = DeleteCondition(  # a conditional delete: see metabase.delete_condition
        if_match=xml.text(element, "ETag", "") or "",
        last_modified=condition_time(when, "LastModifiedTime") if when else None,
        size=xml.number(element, "Size", most=MAX_SIZE),
    )
    # the key is taken as written: leading and trailing spaces are part of it
    return DeleteObjectsItem(
        key.text or "", xml.text(element, "VersionId"), condition if condition else None
    )


@operation("POST", "bucket", "delete", "DeleteObjects", "delete", per_key=True)
async def delete_objects(req: S3Request) -> Response:
    require_digest(req)
    # up to 2 MiB of XML: parsed off the event loop, which keeps serving meanwhile
    items, quiet = await req.run(parse_delete, await read_document(req, xml.MAX_XML_BYTES))
    allowed = [i for i in items if _may_delete(req, i)]
    denied = _unique(i for i in items if not _may_delete(req, i))
    bypass = req.header("x-amz-bypass-governance-retention").lower() == "true"

    def remove() -> DeleteObjectsResult:
        """Take a rate-limit token and delete: one thread hop."""
        req.services.deletes.take(req.project_id)
        if not allowed:  # nothing to delete, but a missing bucket still fails the request
            get_bucket_info(req.db, req.bucket_location)
            return DeleteObjectsResult()
        return metabase.delete_objects(
            req.db,
            req.bucket_location,
            allowed,
            quiet=quiet,
            bypass_governance=bypass,
            can_bypass_governance=req.can_bypass_governance,
            tag=req.context.tag(Operation.DELETE_OBJECTS),
        )

    result = await req.run(remove)
    removed = result.removed
    refused = [
        DeleteObjectsError(i.key, i.version_id, "AccessDenied", _why(req, i)) for i in denied
    ]
    response = xml.response(_result(items, result.deleted, [*result.errors, *refused]))
    # up to 1000 unlinks, after the answer is sent (a crash first leaves orphans for gc)
    response.background = BackgroundTask(free, req, removed)
    return response


def _may_delete(req: S3Request, item: DeleteObjectsItem) -> bool:
    """The access key may delete the key, and a version only the bucket owner may delete
    (S3's s3:DeleteObjectVersion, which no ACL grants); so is a conditional item (its
    answer would tell what the key holds: `objects.owner_only_conditions`)."""
    if req.cross_project and (item.version_id is not None or item.condition is not None):
        return False
    key = req.access_key  # None: anonymous, which the bucket ACL allowed
    return key is None or key.permits("delete", req.bucket, item.key)


def _why(req: S3Request, item: DeleteObjectsItem) -> str:
    if req.cross_project and item.version_id is not None:
        return "Access Denied: only the bucket owner may delete a specific version"
    if req.cross_project and item.condition is not None:
        return "Access Denied: only the bucket owner may send a conditional delete"
    return "Access Denied: this access key may not delete this key"


def _unique(items: Iterable[DeleteObjectsItem]) -> list[DeleteObjectsItem]:
    return list(dict.fromkeys(items))


def _in_request_order(items: list[DeleteObjectsItem], entries: list[Entry]) -> list[Entry]:
    """`entries` in the order of the first request item each answers."""
    position: dict[tuple[str, str | None], int] = {}
    for index, item in enumerate(items):
        position.setdefault((item.key, item.version_id), index)
    return sorted(entries, key=lambda e: position.get((e.key, e.version_id), len(items)))


def _result(
    items: list[DeleteObjectsItem],
    deleted: list[DeletedObject],
    errors: list[DeleteObjectsError],
) -> ET.Element:
    root = xml.document("DeleteResult")
    for entry in _in_request_order(items, [*deleted, *errors]):
        if isinstance(entry, DeletedObject):
            element = xml.add(root, "Deleted")
            xml.add(element, "Key", entry.key)
            xml.add_all(
                element,
                [
                    ("VersionId", entry.version_id),
                    ("DeleteMarker", True if entry.delete_marker else None),
                    ("DeleteMarkerVersionId", entry.delete_marker_version_id),
                ],
            )
        else:
            element = xml.add(root, "Error")
            xml.add(element, "Key", entry.key)
            xml.add_all(
                element,
                [("VersionId", entry.version_id), ("Code", entry.code), ("Message", entry.message)],
            )
    return root
