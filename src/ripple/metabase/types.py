"""Metabase vocabulary: object statuses, versioning states, locations, objects, version IDs."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ripple.metabase.errors import InvalidVersionId

NULL_VERSION_ID = "null"


class Status(enum.IntEnum):
    """Row status codes (DESIGN.md "Objects and statuses")."""

    PENDING = 1
    COMMITTED_UNVERSIONED = 3
    COMMITTED_VERSIONED = 4
    DELETE_MARKER_VERSIONED = 5
    DELETE_MARKER_UNVERSIONED = 6

    @property
    def is_committed(self) -> bool:
        return self is not Status.PENDING

    @property
    def is_delete_marker(self) -> bool:
        return self in (Status.DELETE_MARKER_VERSIONED, Status.DELETE_MARKER_UNVERSIONED)

    @property
    def is_unversioned(self) -> bool:
        """The row is the key's "null" version (S3 version ID `null`)."""
        return self in (Status.COMMITTED_UNVERSIONED, Status.DELETE_MARKER_UNVERSIONED)


COMMITTED_STATUSES = tuple(s for s in Status if s.is_committed)
UNVERSIONED_STATUSES = (Status.COMMITTED_UNVERSIONED, Status.DELETE_MARKER_UNVERSIONED)


class Versioning(enum.IntEnum):
    """A bucket's versioning state. Once enabled it can be suspended, never unversioned."""

    UNVERSIONED = 0
    ENABLED = 1
    SUSPENDED = 2


class RetentionMode(enum.IntEnum):
    GOVERNANCE = 1
    COMPLIANCE = 2


@dataclass(frozen=True)
class Retention:
    mode: RetentionMode
    retain_until: datetime

    def active(self, now: datetime) -> bool:
        return now < self.retain_until


@dataclass(frozen=True)
class DefaultRetention:
    """A bucket's default retention: applied to new objects that carry none of their own."""

    mode: RetentionMode
    days: int | None = None
    years: int | None = None


@dataclass(frozen=True)
class BucketLocation:
    project_id: uuid.UUID
    bucket_name: str


@dataclass(frozen=True)
class ObjectLocation:
    project_id: uuid.UUID
    bucket_name: str
    object_key: str

    @property
    def bucket(self) -> BucketLocation:
        return BucketLocation(self.project_id, self.bucket_name)


@dataclass(frozen=True)
class Bucket:
    project_id: uuid.UUID
    name: str
    versioning: Versioning
    object_lock_enabled: bool
    default_retention: DefaultRetention | None
    created_at: datetime
    # the bucket ACL as stored, {"grants": [...]} (None: private; ripple.metabase.acl)
    acl: dict[str, Any] | None = None
    # the lifecycle rules as stored (None: no lifecycle configuration)
    lifecycle: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class Checksum:
    """A version's additional checksum, as S3 keeps one (x-amz-checksum-mode,
    GetObjectAttributes). `algorithm`: CRC32, CRC32C, CRC64NVME, SHA1 or SHA256; `type`:
    FULL_OBJECT (the checksum of the object's bytes) or COMPOSITE (a multipart object's
    checksum of its parts' binary checksums); `value`: base64 (for COMPOSITE without the
    `-<part count>` S3 shows after it); `parts`: a multipart object's part checksums, base64,
    in part order. A pending upload's row keeps only the algorithm and type it declared."""

    algorithm: str
    type: str
    value: str = ""
    parts: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        stored: dict[str, Any] = {"algorithm": self.algorithm, "type": self.type}
        if self.value:
            stored["value"] = self.value
        if self.parts:
            stored["parts"] = list(self.parts)
        return stored

    @classmethod
    def from_json(cls, stored: dict[str, Any] | None) -> Checksum | None:
        if not stored:
            return None
        return cls(
            str(stored["algorithm"]),
            str(stored["type"]),
            str(stored.get("value", "")),
            tuple(str(p) for p in stored.get("parts", ())),
        )


@dataclass(frozen=True)
class Object:
    """One row of the objects table: an object version, a delete marker or a pending upload."""

    project_id: uuid.UUID
    bucket_name: str
    object_key: str
    version: int
    stream_id: uuid.UUID
    status: Status
    created_at: datetime
    total_plain_size: int = 0
    etag: str = ""
    content_type: str = ""
    user_metadata: dict[str, str] = field(default_factory=dict)
    expires_at: datetime | None = None
    retention: Retention | None = None
    legal_hold: bool = False
    inline_data: bytes | None = None
    tags: dict[str, str] = field(default_factory=dict)  # object tags, in the order set
    # the object ACL as stored, {"grants": [...]} (None: private; ripple.metabase.acl)
    acl: dict[str, Any] | None = None
    # the sizes of its parts, for an object completed from a multipart upload; () otherwise
    part_sizes: tuple[int, ...] = ()
    # its additional checksum (None: written without one); a pending upload's: the
    # algorithm and type it declared
    checksum: Checksum | None = None

    @property
    def location(self) -> ObjectLocation:
        return ObjectLocation(self.project_id, self.bucket_name, self.object_key)

    @property
    def version_id(self) -> str:
        """The S3 version ID: `null` for unversioned rows, else one that is never reused."""
        if self.status.is_unversioned:
            return NULL_VERSION_ID
        return encode_version_id(self.version, self.stream_id)

    @property
    def is_delete_marker(self) -> bool:
        return self.status.is_delete_marker


@dataclass(frozen=True)
class VersionRef:
    """A decoded S3 version ID: `null`, or a version number bound to one stream."""

    version: int | None  # None: the null version
    stream_prefix: bytes = b""

    @property
    def is_null(self) -> bool:
        return self.version is None

    def matches(self, obj: Object) -> bool:
        if self.version is None:
            return obj.status.is_unversioned
        return (
            obj.version == self.version
            and not obj.status.is_unversioned
            and obj.stream_id.bytes.startswith(self.stream_prefix)
        )


def encode_version_id(version: int, stream_id: uuid.UUID) -> str:
    """32 hex digits: the version number, then half the stream id.

    Version numbers are reused when the newest version of a key is deleted and the key is
    written again; the stream id is not, so an old version ID never names a new object.
    """
    return version.to_bytes(8, "big", signed=True).hex() + stream_id.bytes[:8].hex()


def decode_version_id(version_id: str) -> VersionRef:
    """Parse an S3 version ID; a malformed one is `InvalidVersionId`."""
    if version_id == NULL_VERSION_ID:
        return VersionRef(None)
    try:
        raw = bytes.fromhex(version_id)
    except ValueError:
        raw = b""
    if len(raw) != 16:
        raise InvalidVersionId(version_id)
    version = int.from_bytes(raw[:8], "big", signed=True)
    if version <= 0:
        raise InvalidVersionId(version_id)
    return VersionRef(version, raw[8:])
