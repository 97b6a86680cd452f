"""Where pages go: the local filesystem (the embedded default) or any S3 endpoint."""

from ripple.snapshotter.storage.base import Storage, StorageError, StoredObject

__all__ = ["Storage", "StorageError", "StoredObject"]
