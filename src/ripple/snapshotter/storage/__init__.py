"""Where pages go: the local filesystem (the embedded default) or any S3 endpoint.

`open_storage` makes the backend a snapshotter's settings name: `FilesystemStorage` under
`path` (`<dir>/pages` by default), or `S3Storage` from the `s3-*` keys (an empty string
means unset: boto3's usual region and credential sources, AWS's own endpoint).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ripple.snapshotter.storage.base import Storage, StorageError, StoredObject
from ripple.snapshotter.storage.filesystem import FilesystemStorage
from ripple.snapshotter.storage.s3 import S3Storage

if TYPE_CHECKING:
    from ripple.snapshotter.settings import SnapshotterSettings

__all__ = [
    "FilesystemStorage",
    "S3Storage",
    "Storage",
    "StorageError",
    "StoredObject",
    "open_storage",
]


def open_storage(settings: SnapshotterSettings) -> Storage:
    """The storage of `settings` (`ValueError` for an unknown `storage`)."""
    if settings.storage == "filesystem":
        return FilesystemStorage(settings.pages_path)
    if settings.storage == "s3":
        return S3Storage(
            bucket=settings.s3_bucket,
            prefix=settings.s3_prefix,
            endpoint_url=settings.s3_endpoint or None,
            region=settings.s3_region,
            access_key=settings.s3_access_key or None,
            secret_key=settings.s3_secret_key or None,
        )
    raise ValueError(
        f"snapshotters.{settings.name}.storage is {settings.storage!r}; use filesystem or s3"
    )
