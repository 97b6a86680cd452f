"""Object lock of one object version on the wire: Put/GetObjectRetention (`?retention`)
and Put/GetObjectLegalHold (`?legal-hold`), on the latest version or `?versionId=`.

The rules (compliance never shortened, governance weakened only with an allowed bypass,
only in buckets created with object lock, not on delete markers) are the metabase's; this
module reads and writes the `<Retention>` and `<LegalHold>` documents. As S3 does, the puts
need a Content-MD5 or x-amz-checksum-* header.
"""

from __future__ import annotations

from starlette.responses import Response

from ripple import metabase
from ripple.changestream.tag import Operation
from ripple.gateway import xml
from ripple.gateway.body import read_document, require_digest
from ripple.gateway.errors import S3Error
from ripple.gateway.headers import parse_timestamp
from ripple.gateway.request import S3Request
from ripple.gateway.routes import operation
from ripple.metabase import (
    Retention,
    RetentionMode,
)

SMALL_DOCUMENT = 64 * 1024


def parse_retention(body: bytes) -> Retention | None:
    """The retention a `<Retention>` document sets; None (remove it) for an empty one."""
    root = xml.parse(body, root="Retention")
    mode = xml.text(root, "Mode", "")
    until = xml.text(root, "RetainUntilDate", "")
    if not mode and not until:
        return None
    if not mode or not until:
        raise S3Error(
            "MalformedXML", "a <Retention> needs both <Mode> and <RetainUntilDate>, or neither"
        )
    if mode not in RetentionMode.__members__:
        raise S3Error("MalformedXML", f"retention <Mode> {mode!r} must be GOVERNANCE or COMPLIANCE")
    return Retention(RetentionMode[mode], parse_timestamp(until, "RetainUntilDate"))


def parse_legal_hold(body: bytes) -> bool:
    """Whether a `<LegalHold>` document turns the hold on."""
    status = xml.text(xml.parse(body, root="LegalHold"), "Status", "")
    if status not in ("ON", "OFF"):
        raise S3Error("MalformedXML", f"legal hold <Status> {status!r} must be ON or OFF")
    return status == "ON"


@operation("PUT", "object", "retention", "PutObjectRetention", "write")
async def put_object_retention(req: S3Request) -> Response:
    require_digest(req)
    retention = parse_retention(await read_document(req, SMALL_DOCUMENT))
    await req.run(
        metabase.put_object_retention,
        req.db,
        req.object_location,
        retention,
        version_id=req.version_id(),
        bypass_governance=req.header("x-amz-bypass-governance-retention").lower() == "true",
        can_bypass_governance=req.can_bypass_governance,
        tag=req.context.tag(Operation.PUT_OBJECT_RETENTION),
    )
    return Response(status_code=200)


@operation("GET", "object", "retention", "GetObjectRetention", "read")
async def get_object_retention(req: S3Request) -> Response:
    retention = await req.run(
        metabase.get_object_retention, req.db, req.object_location, version_id=req.version_id()
    )
    if retention is None:
        raise S3Error(
            "NoSuchObjectLockConfiguration",
            "the specified object does not have an object lock retention configuration",
        )
    root = xml.document("Retention")
    xml.add(root, "Mode", retention.mode.name)
    xml.add(root, "RetainUntilDate", retention.retain_until)
    return xml.response(root)


@operation("PUT", "object", "legal-hold", "PutObjectLegalHold", "write")
async def put_object_legal_hold(req: S3Request) -> Response:
    require_digest(req)
    on = parse_legal_hold(await read_document(req, SMALL_DOCUMENT))
    await req.run(
        metabase.put_object_legal_hold,
        req.db,
        req.object_location,
        on,
        version_id=req.version_id(),
        tag=req.context.tag(Operation.PUT_OBJECT_LEGAL_HOLD),
    )
    return Response(status_code=200)


@operation("GET", "object", "legal-hold", "GetObjectLegalHold", "read")
async def get_object_legal_hold(req: S3Request) -> Response:
    on = await req.run(
        metabase.get_object_legal_hold, req.db, req.object_location, version_id=req.version_id()
    )
    root = xml.document("LegalHold")
    xml.add(root, "Status", "ON" if on else "OFF")
    return xml.response(root)
