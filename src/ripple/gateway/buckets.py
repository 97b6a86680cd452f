"""Bucket operations on the wire: ListBuckets, CreateBucket (with object lock), HeadBucket,
DeleteBucket, GetBucketLocation, Put/GetBucketVersioning and Put/GetObjectLockConfiguration.
Semantics are the metabase's; this module reads and writes S3's XML and headers."""

from __future__ import annotations

import uuid

from starlette.responses import Response

from ripple import metabase
from ripple.changestream.tag import Operation
from ripple.gateway import xml
from ripple.gateway.acl_headers import acl_of
from ripple.gateway.body import read_document
from ripple.gateway.continuation import continuation_token, resume_key
from ripple.gateway.errors import S3Error
from ripple.gateway.request import S3Request, principal, query_number
from ripple.gateway.routes import operation
from ripple.metabase import (
    DefaultRetention,
    RetentionMode,
    Versioning,
    get_bucket_info,
    set_bucket_versioning,
    set_object_lock_configuration,
)
from ripple.metabase.errors import BucketAlreadyOwnedByYou

SMALL_DOCUMENT = 64 * 1024
MAX_BUCKETS = 10_000  # the most ListBuckets answers in one page
PERIOD_BOUND = 10**9  # a default retention period read as a number at all
TOO_LONG = "InvalidRetentionPeriod"


@operation("GET", "service", "", "ListBuckets", "list")
async def list_buckets(req: S3Request) -> Response:
    """The project's buckets by name; `prefix`, `bucket-region`, and pages of `max-buckets`
    (1 to 10,000) resumed with `continuation-token`, as S3 has since 2024."""
    found = await req.run(metabase.list_buckets, req.db, req.project_id)
    key = req.authenticated_key
    if key.bucket is not None:  # a key restricted to one bucket sees only it
        found = [b for b in found if b.name == key.bucket]
    prefix = req.query.get("prefix", "")
    found = [b for b in found if b.name.startswith(prefix)]
    if req.query.get("bucket-region", req.services.region) != req.services.region:
        found = []  # every bucket is in the region this gateway serves
    if req.query.get("continuation-token"):
        after = resume_key(req.query["continuation-token"])
        found = [b for b in found if b.name > after]
    page_size = query_number(req, "max-buckets", least=1, most=MAX_BUCKETS, default=MAX_BUCKETS)
    more = len(found) > page_size
    found = found[:page_size]
    root = xml.document("ListAllMyBucketsResult")
    owner = xml.add(root, "Owner")
    xml.add(owner, "ID", str(key.project_public_id))
    xml.add(owner, "DisplayName", key.user)
    listed = xml.add(root, "Buckets")
    for bucket in found:
        entry = xml.add(listed, "Bucket")
        xml.add(entry, "Name", bucket.name)
        xml.add(entry, "CreationDate", bucket.created_at)
        xml.add(entry, "BucketRegion", req.services.region)
    if more:
        xml.add(root, "ContinuationToken", continuation_token(found[-1].name))
    if prefix:
        xml.add(root, "Prefix", prefix)
    return xml.response(root)


@operation("PUT", "bucket", "", "CreateBucket", "write")
async def create_bucket(req: S3Request) -> Response:
    body = await read_document(req, SMALL_DOCUMENT)
    if body.strip():
        config = xml.parse(body, root="CreateBucketConfiguration")
        constraint = xml.text(config, "LocationConstraint", "")
        if constraint and constraint != req.services.region:
            raise S3Error(
                "InvalidLocationConstraint",
                f"this gateway serves region {req.services.region!r}, not {constraint!r}",
            )
    lock = req.header("x-amz-bucket-object-lock-enabled").lower()
    if lock not in ("", "true", "false"):
        raise S3Error("InvalidArgument", "x-amz-bucket-object-lock-enabled must be true or false")
    acl = acl_of(req)
    bucket = req.bucket_location.bucket_name
    req.services.owners.forget(bucket)
    try:
        await req.run(
            metabase.create_bucket,
            req.db,
            req.bucket_location,
            object_lock_enabled=lock == "true",
            acl=acl,
            tag=req.context.tag(Operation.CREATE_BUCKET),
        )
    except BucketAlreadyOwnedByYou:
        # S3's legacy rule: in us-east-1 creating a bucket you own answers 200 and changes
        # nothing; elsewhere it is BucketAlreadyOwnedByYou
        if req.services.region != "us-east-1":
            raise
        return Response(status_code=200, headers={"location": f"/{req.bucket}"})
    # a new bucket starts bare, even if a DeleteBucket of the name failed before it could
    # remove the notifications (a no-op otherwise)
    await req.run(req.services.eventing.forget_bucket, req.project_id, bucket, principal(req))
    await req.run(req.services.config_changed)
    return Response(status_code=200, headers={"location": f"/{req.bucket}"})


@operation("HEAD", "bucket", "", "HeadBucket", "read")
async def head_bucket(req: S3Request) -> Response:
    await req.run(get_bucket_info, req.db, req.bucket_location)
    return Response(status_code=200, headers={"x-amz-bucket-region": req.services.region})


@operation("DELETE", "bucket", "", "DeleteBucket", "delete")
async def delete_bucket(req: S3Request) -> Response:
    aborted = await req.run(
        metabase.delete_bucket,
        req.db,
        req.bucket_location,
        tag=req.context.tag(Operation.DELETE_BUCKET),
    )
    if aborted:  # S3 aborts the uploads still in progress: their parts go too
        await req.run_data(_remove_parts, req, aborted)
    # its notifications go with it, as in S3: a bucket made again under the name starts bare
    bucket = req.bucket_location.bucket_name
    req.services.owners.forget(bucket)
    await req.run(req.services.eventing.forget_bucket, req.project_id, bucket, principal(req))
    await req.run(req.services.config_changed)
    return Response(status_code=204)


def _remove_parts(req: S3Request, uploads: list[uuid.UUID]) -> None:
    for upload in uploads:
        req.services.data.remove_parts(upload)


@operation("GET", "bucket", "location", "GetBucketLocation", "read")
async def get_bucket_location(req: S3Request) -> Response:
    await req.run(get_bucket_info, req.db, req.bucket_location)
    root = xml.document("LocationConstraint")
    # S3 answers an empty constraint for us-east-1
    if req.services.region != "us-east-1":
        root.text = req.services.region
    return xml.response(root)


@operation("GET", "bucket", "versioning", "GetBucketVersioning", "read")
async def get_bucket_versioning(req: S3Request) -> Response:
    bucket = await req.run(get_bucket_info, req.db, req.bucket_location)
    root = xml.document("VersioningConfiguration")
    if bucket.versioning is Versioning.ENABLED:
        xml.add(root, "Status", "Enabled")
    elif bucket.versioning is Versioning.SUSPENDED:
        xml.add(root, "Status", "Suspended")
    return xml.response(root)


@operation("PUT", "bucket", "versioning", "PutBucketVersioning", "write")
async def put_bucket_versioning(req: S3Request) -> Response:
    config = xml.parse(await read_document(req, SMALL_DOCUMENT), root="VersioningConfiguration")
    status = xml.text(config, "Status", "")
    if xml.text(config, "MfaDelete", "") not in ("", "Disabled"):
        raise S3Error("NotImplemented", "MFA delete is not supported by ripple")
    if status not in ("Enabled", "Suspended"):
        raise S3Error("MalformedXML", "versioning Status must be Enabled or Suspended")
    await req.run(set_bucket_versioning, req.db, req.bucket_location, enabled=status == "Enabled")
    return Response(status_code=200)


@operation("GET", "bucket", "object-lock", "GetObjectLockConfiguration", "read")
async def get_object_lock_configuration(req: S3Request) -> Response:
    bucket = await req.run(get_bucket_info, req.db, req.bucket_location)
    if not bucket.object_lock_enabled:
        raise S3Error(
            "ObjectLockConfigurationNotFoundError",
            "object lock configuration does not exist for this bucket",
        )
    root = xml.document("ObjectLockConfiguration")
    xml.add(root, "ObjectLockEnabled", "Enabled")
    default = bucket.default_retention
    if default is not None:
        retention = xml.add(xml.add(root, "Rule"), "DefaultRetention")
        xml.add_all(
            retention,
            [("Mode", default.mode.name), ("Days", default.days), ("Years", default.years)],
        )
    return xml.response(root)


@operation("PUT", "bucket", "object-lock", "PutObjectLockConfiguration", "write")
async def put_object_lock_configuration(req: S3Request) -> Response:
    config = xml.parse(await read_document(req, SMALL_DOCUMENT), root="ObjectLockConfiguration")
    if xml.text(config, "ObjectLockEnabled", "") != "Enabled":
        raise S3Error("MalformedXML", "ObjectLockEnabled must be Enabled")
    default: DefaultRetention | None = None
    rule = xml.child(config, "Rule/DefaultRetention")
    if rule is not None:
        mode_name = xml.text(rule, "Mode", "")
        if mode_name not in ("GOVERNANCE", "COMPLIANCE"):
            raise S3Error("MalformedXML", "default retention Mode must be GOVERNANCE or COMPLIANCE")
        # any whole number is read (the metabase judges the period); beyond these bounds
        # it is simply too long, or too negative
        days, years = (
            xml.number(rule, name, least=-PERIOD_BOUND, most=PERIOD_BOUND, out_of_range=TOO_LONG)
            for name in ("Days", "Years")
        )
        if (days is None) == (years is None):
            raise S3Error("MalformedXML", "a DefaultRetention needs exactly one of Days and Years")
        default = DefaultRetention(RetentionMode[mode_name], days=days, years=years)
    await req.run(set_object_lock_configuration, req.db, req.bucket_location, default)
    return Response(status_code=200)
