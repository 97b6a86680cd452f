"""Who is asking, and may they: SigV4 authentication against the keyring, the bucket's
owner and ACLs (`grant_access`), then the access key's restrictions (bucket, prefix,
denied actions) for the operation's action.

A bucket's owner may do everything its keys allow. Another project, or an unsigned
(anonymous) request, may do only what the bucket's or object's ACL grants it
(`BUCKET_PERMISSIONS`, `OBJECT_PERMISSIONS`); anything else is `AccessDenied`, as are
what no ACL grants (object lock and tagging headers on writes, deleting a specific
version). Object reads are judged again on the version actually served (`check_served`).
A request with a bad signature is refused, never taken for an anonymous one.
"""

from __future__ import annotations

from datetime import UTC, datetime

from ripple.gateway import sigv4
from ripple.gateway.errors import S3Error
from ripple.gateway.request import S3Request, raw_query
from ripple.identity.keyring import NotHeld
from ripple.metabase import get_bucket_info
from ripple.metabase.acl import (
    FULL_CONTROL,
    READ,
    READ_ACP,
    WRITE,
    WRITE_ACP,
    BucketOwner,
    acl_version,
    permits,
)
from ripple.metabase.buckets import bucket_owner
from ripple.metabase.db import Metabase
from ripple.metabase.errors import (
    BucketNotFound,
    MetabaseError,
    MethodNotAllowed,
    ObjectNotFound,
)
from ripple.metabase.types import BucketLocation, Object, ObjectLocation

ANONYMOUS_DENIED = (
    "anonymous requests are not allowed: sign the request with an access key "
    "(create one with `ripple user create NAME`)"
)

# the principal of an unsigned request, in its events' userIdentity
ANONYMOUS_PRINCIPAL = "Anonymous"

# What another project (or an anonymous request) needs in the bucket's ACL for each
# operation; FULL_CONTROL grants every one of them.
BUCKET_PERMISSIONS = {
    "ListObjects": READ,
    "ListObjectsV2": READ,
    "ListObjectVersions": READ,
    "ListMultipartUploads": READ,
    "HeadBucket": READ,
    "PutObject": WRITE,
    "DeleteObject": WRITE,
    "DeleteObjects": WRITE,
    "CopyObject": WRITE,  # the source needs object READ (`check_source_read`)
    "CreateMultipartUpload": WRITE,
    "UploadPart": WRITE,
    "CompleteMultipartUpload": WRITE,
    "AbortMultipartUpload": WRITE,
    "ListParts": WRITE,
    "GetBucketAcl": READ_ACP,
    "PutBucketAcl": WRITE_ACP,
}
# ... and in the object version's ACL (the latest, or `versionId`); the handlers check
# the version they actually serve or change again (`check_served`, `put_object_acl`)
OBJECT_PERMISSIONS = {
    "GetObject": READ,
    "HeadObject": READ,
    "GetObjectAttributes": READ,
    "GetObjectAcl": READ_ACP,
    "PutObjectAcl": WRITE_ACP,
}
# Write headers whose S3 permission no ACL grants: only the bucket owner may send them
OWNER_ONLY_HEADERS = {
    "x-amz-object-lock-mode": "s3:PutObjectRetention",
    "x-amz-object-lock-retain-until-date": "s3:PutObjectRetention",
    "x-amz-object-lock-legal-hold": "s3:PutObjectLegalHold",
    "x-amz-tagging": "s3:PutObjectTagging",
}
OWNER_ONLY_HEADER_OPERATIONS = ("PutObject", "CopyObject", "CreateMultipartUpload")


async def authenticate_request(req: S3Request, *, anonymous: bool = False) -> None:
    """`authenticate` on the event loop when the keyring holds the request's key (most
    requests: no thread hop), in a thread when it must query the metabase for it."""
    try:
        authenticate(req, anonymous=anonymous, held_only=True)
    except NotHeld:
        await req.run(authenticate, req, anonymous=anonymous)


def authenticate(
    req: S3Request,
    *,
    service: str = "s3",
    payload_sha256: str | None = None,
    anonymous: bool = False,
    held_only: bool = False,
) -> None:
    """Verify the request's signature; sets `req.access_key`, `req.signed` and the principal.

    S3 requests are signed for `s3`; the topic API passes `sns` and the body's SHA-256
    (`sigv4.verify`). An unsigned request is `AccessDenied` unless `anonymous` (S3 requests,
    which `grant_access` then checks against the ACLs): it goes on with no access key.
    `held_only`: answer from the keys the keyring holds, or raise `NotHeld` (no query)."""
    http = req.http
    raw_path = http.scope.get("raw_path", b"").decode("latin-1").split("?", 1)[0] or "/"
    headers: dict[str, str] = {}
    for name, value in http.headers.items():
        name = name.lower()
        headers[name] = f"{headers[name]},{value}" if name in headers else value
    keyring = req.services.keyring
    signed = sigv4.verify(
        http.method,
        raw_path,
        raw_query(http),
        headers,
        keyring.held_secret_of if held_only else keyring.secret_of,
        datetime.now(UTC),
        service=service,
        payload_sha256=payload_sha256,
    )
    if signed is None:
        if anonymous:
            req.context.principal = ANONYMOUS_PRINCIPAL  # as S3 names it in events
            return
        raise S3Error("AccessDenied", ANONYMOUS_DENIED)
    services = req.services
    if services.enforce_region and signed.region != services.region:
        raise S3Error(
            "AuthorizationHeaderMalformed",
            f"the authorization header is malformed; the region {signed.region!r} is wrong; "
            f"expecting {services.region!r}: configure your client for region {services.region}",
        )
    key = (keyring.held_key if held_only else keyring.key)(signed.access_key_id)
    if key is None:  # revoked between the two look-ups
        raise S3Error("InvalidAccessKeyId", "the AWS access key ID you provided does not exist")
    req.signed = signed
    req.access_key = key
    req.context.principal = str(key.project_public_id)


def authorize(req: S3Request, action: str, *, key: str | None = None) -> None:
    """Refuse with `AccessDenied` unless the access key may do `action` here.

    `key` overrides the request's object key (a list prefix, a DeleteObjects item). An
    anonymous request has no key to restrict it (`grant_access` let it through).
    """
    if req.access_key is None:
        return
    target = key if key is not None else req.key
    if not req.access_key.permits(action, req.bucket, target):
        raise S3Error(
            "AccessDenied", f"this access key may not {action} here", resource=req.resource
        )


async def grant_access(req: S3Request, operation: str) -> None:
    """Find the bucket's owner (`req.owner`); refuse with `AccessDenied` unless the
    requester is the owner or the ACLs grant it what `operation` needs.

    The owner's own and anonymous requests cost no query once the name's owner is
    remembered; other projects' look it up again (they read the ACLs anyway). A bucket
    that exists nowhere is left to the handler (NoSuchBucket; CreateBucket makes it); an
    anonymous request is told `NoSuchBucket` at once, as S3 tells anyone."""
    anonymous = req.access_key is None
    if req.bucket is None or operation == "CreateBucket":
        if anonymous:
            raise S3Error("AccessDenied", ANONYMOUS_DENIED)
        return  # ListBuckets, CreateBucket: the requester's own project
    owners = req.services.owners
    owner = owners.cached(req.bucket)
    if owner is None or (not anonymous and _foreign(req, owner)):
        # a signed request for another project's bucket is looked up fresh: the name may
        # have been deleted and made again by the requester through another gateway
        # (anonymous requests, on public buckets, keep the cache: they own nothing)
        owner = await req.run(owners.lookup, req.bucket, fresh=True)
    if owner is None:
        if anonymous:
            raise S3Error("NoSuchBucket", f"the bucket {req.bucket!r} does not exist")
        return
    req.owner = owner
    if req.access_key is not None and req.access_key.project_id == owner.project_id:
        return
    req.cross_project = True
    requester = requester_id(req)
    permission = BUCKET_PERMISSIONS.get(operation) or OBJECT_PERMISSIONS.get(operation)
    if permission is None or not await req.run(_granted, req, operation, requester):
        raise _denied(req, operation, permission)
    _refuse_owner_only(req, operation)


def requester_id(req: S3Request) -> str | None:
    """The requester's public id, as ACLs name it (None: an anonymous request)."""
    return None if req.access_key is None else str(req.access_key.project_public_id)


def _refuse_owner_only(req: S3Request, operation: str) -> None:
    """Object lock and tagging headers need permissions no ACL grants (S3's
    s3:PutObjectRetention, s3:PutObjectLegalHold, s3:PutObjectTagging): a non-owner's write
    sending one is refused before anything is read or written. So is a delete of a specific
    version (s3:DeleteObjectVersion, the bucket owner's alone under ACLs)."""
    if operation in OWNER_ONLY_HEADER_OPERATIONS:
        for header, needs in OWNER_ONLY_HEADERS.items():
            if req.header(header):
                raise S3Error(
                    "AccessDenied",
                    f"only the bucket owner may send {header} on bucket {req.bucket!r}: it "
                    f"needs {needs}, which no ACL grants",
                    resource=req.resource,
                )
    if operation == "DeleteObject" and req.version_id() is not None:
        raise S3Error(
            "AccessDenied",
            f"only the bucket owner may delete a specific version in bucket {req.bucket!r}",
            resource=req.resource,
        )


def _granted(req: S3Request, operation: str, requester: str | None) -> bool:
    owner = req.bucket_owner.public_id
    if operation in OBJECT_PERMISSIONS:
        try:
            obj = acl_version(req.db, req.object_location, req.version_id())
        except (ObjectNotFound, MethodNotAllowed):
            # a missing key is NoSuchKey only for those who may list the bucket (as S3)
            if may_list(req.db, req.bucket_location, owner, requester):
                raise
            return False
        return permits(obj.acl, owner, OBJECT_PERMISSIONS[operation], requester)
    bucket = get_bucket_info(req.db, req.bucket_location)
    return permits(bucket.acl, owner, BUCKET_PERMISSIONS[operation], requester)


def may_list(db: Metabase, loc: BucketLocation, owner: str, requester: str | None) -> bool:
    """Does the bucket's ACL grant the requester READ (so may it learn a key is missing)?"""
    return permits(get_bucket_info(db, loc).acl, owner, READ, requester)


def check_served(req: S3Request, obj: Object, operation: str) -> None:
    """A non-owner's read is answered only if the version actually served grants what
    `operation` needs: it may not be the one `grant_access` judged (an overwrite in
    between)."""
    if not req.cross_project:
        return
    permission = OBJECT_PERMISSIONS[operation]
    if not permits(obj.acl, req.bucket_owner.public_id, permission, requester_id(req)):
        raise _denied(req, operation, permission)


async def check_missing(req: S3Request, operation: str) -> None:
    """The version a non-owner asked for is gone (since `grant_access` found it): the
    caller re-raises its NoSuchKey only if the requester has bucket READ."""
    if not req.cross_project:
        return
    if not await req.run(
        may_list, req.db, req.bucket_location, req.bucket_owner.public_id, requester_id(req)
    ):
        raise _denied(req, operation, OBJECT_PERMISSIONS[operation])


def _denied(req: S3Request, operation: str, permission: str | None) -> S3Error:
    if req.access_key is None:
        return S3Error("AccessDenied", ANONYMOUS_DENIED, resource=req.resource)
    if permission is None:
        message = f"only the bucket owner may {operation} on bucket {req.bucket!r}"
    else:
        what = "object" if operation in OBJECT_PERMISSIONS else "bucket"
        message = (
            f"bucket {req.bucket!r} belongs to another project and the {what} ACL does not "
            f"grant you {permission} (or {FULL_CONTROL}), which {operation} needs"
        )
    return S3Error("AccessDenied", message, resource=req.resource)


async def source_owner(req: S3Request, bucket: str) -> BucketOwner | None:
    """The owner of a copy source's bucket (None: no project holds it, the requester's own
    project is searched and the bucket is not found there)."""
    owners = req.services.owners
    owner = owners.cached(bucket) or await req.run(owners.lookup, bucket)
    if owner is None and req.access_key is None:
        raise S3Error("AccessDenied", ANONYMOUS_DENIED, resource=req.resource)
    return owner


def _foreign(req: S3Request, owner: BucketOwner | None) -> bool:
    """Is `owner`'s bucket another project's (or is the request anonymous)?"""
    return owner is not None and (
        req.access_key is None or req.access_key.project_id != owner.project_id
    )


def check_source_read(req: S3Request, owner: BucketOwner | None, source: Object) -> None:
    """A copy source in another project's bucket must grant the requester object READ."""
    if owner is None or not _foreign(req, owner):
        return
    if not permits(source.acl, owner.public_id, READ, requester_id(req)):
        raise _source_denied(req, source.bucket_name, source.object_key)


def check_source_missing(req: S3Request, owner: BucketOwner | None, loc: ObjectLocation) -> None:
    """A copy source in another project's bucket is missing (or a delete marker): the
    caller may say so only to a requester with READ on the source bucket; AccessDenied
    otherwise, revealing nothing about the key."""
    if owner is None or not _foreign(req, owner):
        return
    bucket = BucketLocation(loc.project_id, loc.bucket_name)
    try:
        listable = may_list(req.db, bucket, owner.public_id, requester_id(req))
    except MetabaseError:
        listable = False  # the bucket itself is gone
    if not listable:
        raise _source_denied(req, loc.bucket_name, loc.object_key)


def _source_denied(req: S3Request, bucket: str, key: str) -> S3Error:
    return S3Error(
        "AccessDenied",
        f"the copy source /{bucket}/{key} belongs to another project and its ACL does not "
        "grant you READ",
        resource=req.resource,
    )


def own_bucket(req: S3Request) -> None:
    """The bucket must be the caller's: another project's is AccessDenied, as in S3."""
    try:
        get_bucket_info(req.db, req.bucket_location)
    except BucketNotFound:
        if bucket_owner(req.db, req.bucket or "") is not None:
            raise S3Error("AccessDenied", f"bucket {req.bucket!r} is not yours") from None
        raise
