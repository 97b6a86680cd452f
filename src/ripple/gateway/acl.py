"""ACLs on the wire: Get/PutBucketAcl (`/bucket?acl`) and Get/PutObjectAcl
(`/bucket/key?acl`, on the latest version or `?versionId=`).

A PUT gives the new ACL one of three ways: a canned ACL or grant headers (`acl_headers`),
or an `AccessControlPolicy` document; giving a body and a header is `InvalidRequest`;
giving none is `MissingSecurityHeader`. Grantees are projects by public id
(`CanonicalUser`) or the groups AllUsers and AuthenticatedUsers; e-mail grantees are
`UnresolvableGrantByEmailAddress` (ripple has no e-mail addresses). The model and its rules
are the metabase's (`ripple.metabase.acl`).
"""

from __future__ import annotations

import uuid
from xml.etree.ElementTree import Element

from starlette.responses import Response

from ripple.changestream.tag import Operation
from ripple.gateway import xml
from ripple.gateway.acl_headers import acl_of, no_email
from ripple.gateway.auth import check_missing, requester_id
from ripple.gateway.body import read_document
from ripple.gateway.errors import S3Error
from ripple.gateway.headers import version_headers
from ripple.gateway.request import S3Request
from ripple.gateway.routes import operation
from ripple.metabase import acl as metabase_acl
from ripple.metabase.acl import (
    CANONICAL_USER,
    GROUP,
    AccessControlPolicy,
    AclSpec,
    Grant,
    Grantee,
    check_spec,
)
from ripple.metabase.errors import MethodNotAllowed, ObjectNotFound

SMALL_DOCUMENT = 64 * 1024
XSI_NAMESPACE = "http://www.w3.org/2001/XMLSchema-instance"
_EMAIL = "AmazonCustomerByEmail"


def _xsi_type(grantee: Element) -> str | None:
    for name, value in grantee.attrib.items():
        if name.rsplit("}", 1)[-1].rsplit(":", 1)[-1] == "type":
            return value
    return None


def parse_policy(body: bytes) -> tuple[str | None, list[Grant]]:
    """The owner id (None if absent) and the grants of an `AccessControlPolicy` document."""
    root = xml.parse(body, root="AccessControlPolicy", limit=SMALL_DOCUMENT)
    owner = xml.text(root, "Owner/ID")
    acl = xml.child(root, "AccessControlList")
    if acl is None:
        raise S3Error("MalformedACLError", "an AccessControlPolicy needs an AccessControlList")
    grants: list[Grant] = []
    for element in acl:
        if element.tag != "Grant":
            raise S3Error("MalformedACLError", f"unexpected <{element.tag}> in AccessControlList")
        grantee = xml.child(element, "Grantee")
        permission = xml.text(element, "Permission")
        if grantee is None or not permission:
            raise S3Error("MalformedACLError", "each <Grant> needs a <Grantee> and a <Permission>")
        kind = _xsi_type(grantee)
        user_id, uri, email = (
            xml.text(grantee, "ID"),
            xml.text(grantee, "URI"),
            xml.text(grantee, "EmailAddress"),
        )
        if kind is None:  # no xsi:type: go by what the grantee holds
            kind = CANONICAL_USER if user_id else GROUP if uri else _EMAIL if email else ""
        if kind == CANONICAL_USER and user_id:
            grants.append(Grant(CANONICAL_USER, user_id, permission))
        elif kind == GROUP and uri:
            grants.append(Grant(GROUP, uri, permission))
        elif kind == _EMAIL and email:
            raise no_email(email)
        else:
            raise S3Error(
                "MalformedACLError",
                f"a Grantee of type {kind!r} needs its ID (CanonicalUser), URI (Group) or "
                "EmailAddress (AmazonCustomerByEmail)",
            )
    return owner, grants


async def _requested(req: S3Request) -> AclSpec:
    """The ACL a PutBucketAcl / PutObjectAcl request sets (body or headers, not both)."""
    body = await read_document(req, SMALL_DOCUMENT)
    from_headers = acl_of(req)
    if not body.strip():
        if from_headers is None:
            raise S3Error(
                "MissingSecurityHeader",
                "your request was missing a required header: send x-amz-acl, x-amz-grant-* "
                "or an AccessControlPolicy body",
                extra={"MissingHeaderName": "x-amz-acl"},
            )
        return from_headers
    if from_headers is not None:
        raise S3Error(
            "InvalidRequest",
            "send the ACL either in x-amz-acl / x-amz-grant-* headers or as an "
            "AccessControlPolicy body, not both",
        )
    owner, grants = parse_policy(body)
    if owner is not None and _normal(owner) != _normal(req.owner_id):
        raise S3Error(
            "AccessDenied", f"the Owner ID {owner!r} is not the owner of bucket {req.bucket!r}"
        )
    return check_spec(grants)


def _normal(public_id: str) -> str:
    try:
        return str(uuid.UUID(public_id))
    except ValueError:
        return public_id


def _policy_response(policy: AccessControlPolicy, headers: dict[str, str]) -> Response:
    root = xml.document("AccessControlPolicy")
    owner = xml.add(root, "Owner")
    xml.add(owner, "ID", policy.owner_id)
    xml.add(owner, "DisplayName", policy.owner_name)
    acl = xml.add(root, "AccessControlList")
    for grant in policy.grants:
        element = xml.add(acl, "Grant")
        grantee = xml.add(element, "Grantee")
        grantee.set("xmlns:xsi", XSI_NAMESPACE)
        grantee.set("xsi:type", grant.grantee_type)
        if grant.grantee_type == CANONICAL_USER:
            xml.add(grantee, "ID", grant.grantee)
            if grant.grantee in policy.names:
                xml.add(grantee, "DisplayName", policy.names[grant.grantee])
        else:
            xml.add(grantee, "URI", grant.grantee)
        xml.add(element, "Permission", grant.permission)
    return xml.response(root, headers=headers)


@operation("PUT", "bucket", "acl", "PutBucketAcl", "write")
async def put_bucket_acl(req: S3Request) -> Response:
    acl = await _requested(req)
    await req.run(metabase_acl.put_bucket_acl, req.db, req.bucket_location, acl)
    return Response(status_code=200)


@operation("GET", "bucket", "acl", "GetBucketAcl", "read")
async def get_bucket_acl(req: S3Request) -> Response:
    _, policy = await req.run(metabase_acl.get_bucket_acl, req.db, req.bucket_location)
    return _policy_response(policy, {})


@operation("PUT", "object", "acl", "PutObjectAcl", "write")
async def put_object_acl(req: S3Request) -> Response:
    acl = await _requested(req)
    try:
        obj = await req.run(
            metabase_acl.put_object_acl,
            req.db,
            req.object_location,
            acl,
            version_id=req.version_id(),
            grantee=_grantee(req),
            tag=req.context.tag(Operation.PUT_OBJECT_ACL),
        )
    except (ObjectNotFound, MethodNotAllowed):
        await check_missing(req, "PutObjectAcl")  # gone since `grant_access` found it
        raise
    return Response(status_code=200, headers=version_headers(obj))


@operation("GET", "object", "acl", "GetObjectAcl", "read")
async def get_object_acl(req: S3Request) -> Response:
    try:
        obj, policy = await req.run(
            metabase_acl.get_object_acl,
            req.db,
            req.object_location,
            version_id=req.version_id(),
            grantee=_grantee(req),
        )
    except (ObjectNotFound, MethodNotAllowed):
        await check_missing(req, "GetObjectAcl")
        raise
    return _policy_response(policy, version_headers(obj))


def _grantee(req: S3Request) -> Grantee | None:
    """A non-owner is judged again by the ACL of the very version read or changed, in the
    metabase call (`grant_access` read the ACL before: an overwrite may come between)."""
    return Grantee(requester_id(req)) if req.cross_project else None
