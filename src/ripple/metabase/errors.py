"""Metabase errors. Each carries the S3 error code the gateway answers with."""

from __future__ import annotations


class MetabaseError(Exception):
    """Base of every error an operation raises for bad input or a refused change."""

    code = "InternalError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(MetabaseError):
    code = "InvalidArgument"


class InvalidVersionId(InvalidArgument):
    def __init__(self, version_id: str) -> None:
        super().__init__(
            f"invalid version id specified: {version_id!r}; use `null` or an ID that "
            "ListObjectVersions returned"
        )


class InvalidTag(InvalidArgument):
    """An object tag S3 would refuse: key or value too long, bad characters, `aws:` prefix,
    a key given twice."""

    code = "InvalidTag"


class TooManyTags(InvalidArgument):
    """More than 10 tags on one object (S3 answers `BadRequest`)."""

    code = "BadRequest"


class ProjectNotFound(MetabaseError):
    code = "InvalidAccessKeyId"


class BucketNotFound(MetabaseError):
    code = "NoSuchBucket"


class BucketAlreadyExists(MetabaseError):
    """Another project holds the name (S3 bucket names are global)."""

    code = "BucketAlreadyExists"


class BucketAlreadyOwnedByYou(BucketAlreadyExists):
    code = "BucketAlreadyOwnedByYou"


class BucketNotEmpty(MetabaseError):
    code = "BucketNotEmpty"


class InvalidBucketState(MetabaseError):
    code = "InvalidBucketState"


class InvalidRetentionPeriod(InvalidArgument):
    """A default retention of no time, negative time, or more than S3 allows."""

    code = "InvalidRetentionPeriod"


class ObjectLockNotEnabled(MetabaseError):
    """Retention or legal hold on a bucket created without object lock."""

    code = "InvalidRequest"


class ObjectNotFound(MetabaseError):
    """No such key, or its latest version is a delete marker (`delete_marker` says which)."""

    code = "NoSuchKey"

    def __init__(self, message: str, *, delete_marker: bool = False, version_id: str = "") -> None:
        super().__init__(message)
        self.delete_marker = delete_marker
        self.version_id = version_id


class VersionNotFound(ObjectNotFound):
    code = "NoSuchVersion"


class PendingObjectNotFound(MetabaseError):
    code = "NoSuchUpload"


class MethodNotAllowed(MetabaseError):
    """The operation does not apply to what the version is (e.g. a delete marker)."""

    code = "MethodNotAllowed"


class ObjectLocked(MetabaseError):
    """Object lock forbids the change: a legal hold or an active retention period."""

    code = "AccessDenied"


class InvalidDeleteRequest(MetabaseError):
    """A DeleteObjects request that cannot be run at all: no items, or more than 1000."""

    code = "MalformedXML"


class ConflictRetry(MetabaseError):
    """A concurrent writer kept winning the same key; the caller may try again."""

    code = "OperationAborted"


class CommitTooLate(MetabaseError):
    """A write transaction reached its commit after the deadline its caller set
    (`Metabase.commit_deadline`), and was rolled back."""

    code = "SlowDown"


class MalformedLifecycle(MetabaseError):
    """A lifecycle configuration S3 cannot read: no rules, a bad Status, Filter and Prefix
    together (or neither), an Expiration with none or several of Days, Date and
    ExpiredObjectDeleteMarker."""

    code = "MalformedXML"


class InvalidLifecycleRequest(MetabaseError):
    """A lifecycle rule S3 refuses as a request: no action, tags with an action that cannot
    filter on them, a tag key given twice."""

    code = "InvalidRequest"


class LifecycleNotFound(MetabaseError):
    code = "NoSuchLifecycleConfiguration"


class LifecycleNotImplemented(MetabaseError):
    """A lifecycle action ripple does not have: transitions (it has one storage class)."""

    code = "NotImplemented"


class InvalidRenameRequest(InvalidArgument):
    """A RenameObject that cannot be run: a versioned bucket, the same key twice, a key
    ending with `/`, prefixes that are empty, not `/`-terminated or overlapping."""

    code = "InvalidRequest"


class PreconditionFailed(MetabaseError):
    """A conditional request whose condition does not hold (HTTP 412)."""

    code = "PreconditionFailed"


class ConditionalRequestConflict(MetabaseError):
    """A conditional write that held when the request arrived, but a concurrent write to the
    key won before it could commit (HTTP 409): the client retries."""

    code = "ConditionalRequestConflict"


class TooManyKeysToRename(InvalidRenameRequest):
    """A prefix rename over more keys than the configured limit (`s3.max-rename-keys`)."""


class DestinationPrefixNotEmpty(MetabaseError):
    """A prefix rename whose destination prefix already holds keys (HTTP 409)."""

    code = "DestinationPrefixNotEmpty"
