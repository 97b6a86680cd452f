"""The ACL request headers: a canned ACL (`x-amz-acl`) or grants (`x-amz-grant-read|write|
read-acp|write-acp|full-control: id="…", uri="…"`), which PutBucketAcl and PutObjectAcl
take instead of a document, and PutObject, CopyObject, CreateMultipartUpload and
CreateBucket take for the ACL of what they make (`acl_of`).

Sending both a canned ACL and grants is `InvalidRequest`; an e-mail grantee is
`UnresolvableGrantByEmailAddress` (ripple has no e-mail addresses). The model and its rules
are the metabase's (`ripple.metabase.acl`).
"""

from __future__ import annotations

from ripple.gateway.errors import S3Error
from ripple.gateway.request import S3Request
from ripple.metabase.acl import (
    CANONICAL_USER,
    FULL_CONTROL,
    GROUP,
    READ,
    READ_ACP,
    WRITE,
    WRITE_ACP,
    AclSpec,
    Grant,
    check_spec,
)

GRANT_HEADERS = {
    "x-amz-grant-full-control": FULL_CONTROL,
    "x-amz-grant-write": WRITE,
    "x-amz-grant-write-acp": WRITE_ACP,
    "x-amz-grant-read": READ,
    "x-amz-grant-read-acp": READ_ACP,
}


def no_email(address: str) -> S3Error:
    """The refusal of an e-mail grantee, in a grant header or an ACL document."""
    return S3Error(
        "UnresolvableGrantByEmailAddress",
        f"the e-mail address {address!r} you provided does not match any account: ripple "
        "grants to projects by id or to groups by URI",
    )


def acl_of(req: S3Request) -> AclSpec | None:
    """The ACL a request's headers ask for: a canned ACL's name, the grants of the
    `x-amz-grant-*` headers (exactly those: the owner gets none it is not given, as in S3),
    or None when it sends neither."""
    canned = req.header("x-amz-acl").strip()
    given = [(name, req.header(name)) for name in GRANT_HEADERS if req.header(name)]
    if canned and given:
        raise S3Error(
            "InvalidRequest", "Specifying both Canned ACLs and Header Grants is not allowed"
        )
    if canned:
        return check_spec(canned)
    if not given:
        return None
    grants: list[Grant] = []
    for name, value in given:
        for item in value.split(","):
            kind, equals, grantee = item.strip().partition("=")
            grantee = grantee.strip().strip('"')
            if not equals or not grantee:
                raise S3Error("InvalidArgument", f'{name}: {item.strip()!r} is not type="value"')
            if kind.strip() == "id":
                grants.append(Grant(CANONICAL_USER, grantee, GRANT_HEADERS[name]))
            elif kind.strip() == "uri":
                grants.append(Grant(GROUP, grantee, GRANT_HEADERS[name]))
            elif kind.strip() == "emailAddress":
                raise no_email(grantee)
            else:
                raise S3Error(
                    "InvalidArgument",
                    f"{name}: unknown grantee type {kind.strip()!r}; use id, uri or emailAddress",
                )
    return check_spec(grants)
