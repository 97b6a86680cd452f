"""S3 errors as the gateway answers them: a code, an HTTP status and a message.

Every refusal the gateway makes is an `S3Error`; the app turns it into S3's error XML
(`Code`, `Message`, `Resource`, `RequestId`). Metabase errors carry their S3 code and are
mapped here with `from_metabase`. Anything not implemented is `NotImplemented` (501),
never a 500.
"""

from __future__ import annotations

from ripple.metabase.errors import MetabaseError, ObjectNotFound
from ripple.metabase.get_object import DeleteMarkerVersion
from ripple.notifications.errors import NotificationError

# S3's HTTP status for each error code the gateway uses.
STATUS: dict[str, int] = {
    "AccessDenied": 403,
    "BadDigest": 400,
    "BucketAlreadyExists": 409,
    "BucketAlreadyOwnedByYou": 409,
    "BucketNotEmpty": 409,
    "ConditionalRequestConflict": 409,
    "EntityTooLarge": 400,
    "EntityTooSmall": 400,
    "IncompleteBody": 400,
    "InternalError": 500,
    "InvalidAccessKeyId": 403,
    "InvalidArgument": 400,
    "InvalidBucketName": 400,
    "InvalidBucketState": 409,
    "InvalidDigest": 400,
    "InvalidPart": 400,
    "InvalidPartOrder": 400,
    "InvalidPartNumber": 416,
    "InvalidRange": 416,
    "InvalidRequest": 400,
    "InvalidRetentionPeriod": 400,
    "InvalidTag": 400,
    "InvalidObjectState": 403,
    "KeyTooLongError": 400,
    "MalformedXML": 400,
    "MaxMessageLengthExceeded": 400,
    "MethodNotAllowed": 405,
    "MissingContentLength": 411,
    "MissingSecurityHeader": 400,
    "NoSuchBucket": 404,
    "NoSuchJournalConfiguration": 404,  # ripple's: a bucket without a journal
    "NoSuchKey": 404,
    "NoSuchNotification": 404,
    "NoSuchObjectLockConfiguration": 404,
    "NoSuchUpload": 404,
    "NoSuchVersion": 404,
    "NotImplemented": 501,
    "ObjectLockConfigurationNotFoundError": 404,
    "NoSuchObjectLegalHold": 404,
    "NoSuchObjectRetention": 404,
    "OperationAborted": 409,
    "PreconditionFailed": 412,
    "RequestTimeTooSkewed": 403,
    "SignatureDoesNotMatch": 403,
    "SlowDown": 503,
    "XAmzContentSHA256Mismatch": 400,
    "AuthorizationHeaderMalformed": 400,
    "AuthorizationQueryParametersError": 400,
    "InvalidChunkSizeError": 400,
    "BadRequest": 400,
    "NoSuchLifecycleConfiguration": 404,
    "DestinationPrefixNotEmpty": 409,  # ripple's prefix rename: the destination holds keys
}


class S3Error(Exception):
    """An S3 error response. `headers` are added to the response (e.g. x-amz-delete-marker)."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        resource: str = "",
        headers: dict[str, str] | None = None,
        extra: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status if status is not None else STATUS.get(code, 400)
        self.resource = resource
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})  # more members of the <Error> element


def not_implemented(what: str) -> S3Error:
    return S3Error("NotImplemented", f"{what} is not implemented by ripple")


def from_notifications(error: NotificationError) -> S3Error:
    """The S3 error a refused notification configuration answers with."""
    return S3Error(error.code, error.message, extra=error.extra)


def from_metabase(error: MetabaseError, resource: str = "") -> S3Error:
    """The S3 error a metabase refusal answers with."""
    headers: dict[str, str] = {}
    if isinstance(error, ObjectNotFound) and error.delete_marker:
        headers["x-amz-delete-marker"] = "true"
        if error.version_id:
            headers["x-amz-version-id"] = error.version_id
    if isinstance(error, DeleteMarkerVersion):
        headers["x-amz-delete-marker"] = "true"
        headers["x-amz-version-id"] = error.marker.version_id
    return S3Error(error.code, error.message, resource=resource, headers=headers)
