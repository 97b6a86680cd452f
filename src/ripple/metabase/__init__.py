"""The metabase: object metadata with S3 versioning and object lock.

One module per operation (put, upload, commit, copy, get, list, list versions,
delete, delete version, DeleteObjects, versioning, retention, legal hold, tagging), each a
function taking the `Metabase` handle. Semantics live here; the gateway only translates the wire.
"""

from ripple.metabase.bucket_versioning import set_bucket_versioning
from ripple.metabase.buckets import (
    create_bucket,
    delete_bucket,
    get_bucket_info,
    list_buckets,
    set_object_lock_configuration,
)
from ripple.metabase.commit_object import commit_object
from ripple.metabase.copy_object import CopyResult, copy_object
from ripple.metabase.db import Metabase
from ripple.metabase.delete_object import DeleteResult, delete_object
from ripple.metabase.delete_object_version import delete_object_version
from ripple.metabase.delete_objects import (
    MAX_DELETE_OBJECTS,
    DeletedObject,
    DeleteObjectsError,
    DeleteObjectsItem,
    DeleteObjectsResult,
    delete_objects,
)
from ripple.metabase.get_object import get_object
from ripple.metabase.legal_hold import get_object_legal_hold, put_object_legal_hold
from ripple.metabase.lifecycle import (
    delete_bucket_lifecycle,
    get_bucket_lifecycle,
    put_bucket_lifecycle,
)
from ripple.metabase.lifecycle_run import LifecycleResult, run_lifecycle
from ripple.metabase.list_objects import ListObjectsResult, list_objects
from ripple.metabase.list_versions import ListVersionsResult, VersionEntry, list_object_versions
from ripple.metabase.object_tagging import (
    check_tags,
    delete_object_tagging,
    get_object_tagging,
    put_object_tagging,
)
from ripple.metabase.projects import Project, create_project, get_project, list_projects
from ripple.metabase.rename_object import (
    PrefixRenameResult,
    RenameConditions,
    RenameResult,
    rename_object,
    rename_prefix,
)
from ripple.metabase.retention import get_object_retention, put_object_retention
from ripple.metabase.store_committed import CommitResult
from ripple.metabase.types import (
    Bucket,
    BucketLocation,
    Checksum,
    DefaultRetention,
    Object,
    ObjectLocation,
    Retention,
    RetentionMode,
    Status,
    Versioning,
)
from ripple.metabase.write_condition import WriteCondition, check_write_condition, etag_matches

__all__ = [
    "MAX_DELETE_OBJECTS",
    "Bucket",
    "BucketLocation",
    "Checksum",
    "CommitResult",
    "CopyResult",
    "DefaultRetention",
    "DeleteObjectsError",
    "DeleteObjectsItem",
    "DeleteObjectsResult",
    "DeleteResult",
    "DeletedObject",
    "LifecycleResult",
    "ListObjectsResult",
    "ListVersionsResult",
    "Metabase",
    "Object",
    "ObjectLocation",
    "PrefixRenameResult",
    "Project",
    "RenameConditions",
    "RenameResult",
    "Retention",
    "RetentionMode",
    "Status",
    "VersionEntry",
    "Versioning",
    "WriteCondition",
    "check_tags",
    "check_write_condition",
    "commit_object",
    "copy_object",
    "create_bucket",
    "create_project",
    "delete_bucket",
    "delete_bucket_lifecycle",
    "delete_object",
    "delete_object_tagging",
    "delete_object_version",
    "delete_objects",
    "etag_matches",
    "get_bucket_info",
    "get_bucket_lifecycle",
    "get_object",
    "get_object_legal_hold",
    "get_object_retention",
    "get_object_tagging",
    "get_project",
    "list_buckets",
    "list_object_versions",
    "list_objects",
    "list_projects",
    "put_bucket_lifecycle",
    "put_object_legal_hold",
    "put_object_retention",
    "put_object_tagging",
    "rename_object",
    "rename_prefix",
    "run_lifecycle",
    "set_bucket_versioning",
    "set_object_lock_configuration",
]
