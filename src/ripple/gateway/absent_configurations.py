"""Bucket configurations ripple does not keep (policies, CORS, website, encryption, bucket
tags, replication, public access blocks, ownership controls, logging, acceleration, request
payment), read and deleted as S3 answers for a bucket that has none: GET is the
configuration's not-found error (or its empty document, for the three S3 always answers),
DELETE is 204. Putting one is still `501 NotImplemented`: ripple cannot keep its promise.
"""

from __future__ import annotations

from starlette.responses import Response

from ripple.gateway import xml
from ripple.gateway.errors import S3Error
from ripple.gateway.request import S3Request
from ripple.gateway.routes import operation
from ripple.metabase import get_bucket_info

# sub-resource -> (S3's operation name, the error GET answers when the bucket has none)
MISSING: dict[str, tuple[str, str, str]] = {
    "policy": ("BucketPolicy", "NoSuchBucketPolicy", "The bucket policy does not exist"),
    "policyStatus": (
        "BucketPolicyStatus",
        "NoSuchBucketPolicy",
        "The bucket policy does not exist",
    ),
    "cors": ("BucketCors", "NoSuchCORSConfiguration", "The CORS configuration does not exist"),
    "website": (
        "BucketWebsite",
        "NoSuchWebsiteConfiguration",
        "The specified bucket does not have a website configuration",
    ),
    "encryption": (
        "BucketEncryption",
        "ServerSideEncryptionConfigurationNotFoundError",
        "The server side encryption configuration was not found (ripple does not encrypt)",
    ),
    "tagging": ("BucketTagging", "NoSuchTagSet", "The TagSet does not exist"),
    "replication": (
        "BucketReplication",
        "ReplicationConfigurationNotFoundError",
        "The replication configuration was not found",
    ),
    "publicAccessBlock": (
        "PublicAccessBlock",
        "NoSuchPublicAccessBlockConfiguration",
        "The public access block configuration was not found",
    ),
    "ownershipControls": (
        "BucketOwnershipControls",
        "OwnershipControlsNotFoundError",
        "The bucket ownership controls were not found",
    ),
}

# sub-resource -> (S3's operation name, the document S3 answers when nothing is configured)
EMPTY: dict[str, tuple[str, str, list[tuple[str, str]]]] = {
    "logging": ("BucketLogging", "BucketLoggingStatus", []),
    "accelerate": ("BucketAccelerateConfiguration", "AccelerateConfiguration", []),
    "requestPayment": (
        "BucketRequestPayment",
        "RequestPaymentConfiguration",
        [("Payer", "BucketOwner")],
    ),
}


def _register_missing(subresource: str, name: str, code: str, message: str) -> None:
    async def get(req: S3Request) -> Response:
        await req.run(get_bucket_info, req.db, req.bucket_location)  # NoSuchBucket first
        raise S3Error(code, message, status=404, extra={"BucketName": req.bucket or ""})

    async def delete(req: S3Request) -> Response:
        await req.run(get_bucket_info, req.db, req.bucket_location)
        return Response(status_code=204)  # nothing to delete is done

    operation("GET", "bucket", subresource, f"Get{name}", "read")(get)
    if subresource != "policyStatus":
        operation("DELETE", "bucket", subresource, f"Delete{name}", "write")(delete)


def _register_empty(subresource: str, name: str, root: str, members: list[tuple[str, str]]) -> None:
    async def get(req: S3Request) -> Response:
        await req.run(get_bucket_info, req.db, req.bucket_location)
        document = xml.document(root)
        xml.add_all(document, members)
        return xml.response(document)

    operation("GET", "bucket", subresource, f"Get{name}", "read")(get)


for _sub, (_name, _code, _message) in MISSING.items():
    _register_missing(_sub, _name, _code, _message)
for _sub, (_name, _root, _members) in EMPTY.items():
    _register_empty(_sub, _name, _root, _members)
