"""Pages as objects in a bucket of any S3 endpoint (backend "s3"), through boto3.

Every key is stored under the storage's prefix (`""` or ending in "/": `pages` becomes
`pages/`), which listings strip again. A page's content type and metadata are the object's
`Content-Type` and user metadata (`x-amz-meta-*`); `head` returns them, `list` does not
(ListObjectsV2 does not say them: its content types are empty). An S3 PUT replaces an
object all or nothing, so readers never see part of a page.

boto3 retries once (`max_attempts` 2) and gives up on a connection or a read after 10 s;
the writer's own retries and dead letters do the rest. With an endpoint URL (ripple's own
gateway, MinIO…), requests use path-style addressing. Every failure is a `StorageError`
naming the bucket, the object key and the cause, e.g. `s3 storage bucket 'pages': put
a/b.pb: NoSuchBucket: The specified bucket does not exist`; a missing key has
`missing=True`. `head` cannot tell a missing bucket from a missing key (a HEAD answer has no
body), so both are None. boto3 is imported when the first `S3Storage` is made, not with
this module.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ripple.snapshotter.storage.base import StorageError, StoredObject

__all__ = ["S3Storage", "normalise_prefix"]

_MISSING_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
_TIMEOUT_SECONDS = 10.0


def normalise_prefix(prefix: str) -> str:
    """`""`, or the prefix without a leading "/" and with one trailing "/"."""
    stripped = prefix.strip("/")
    return f"{stripped}/" if stripped else ""


def _one_line(text: str) -> str:
    return " ".join(text.split())


class S3Storage:
    """Pages in `bucket` under `prefix`; `client` (a boto3 S3 client) replaces the one made
    from the other arguments, and is then the caller's to close."""

    backend = "s3"

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        endpoint_url: str | None = None,
        region: str = "us-east-1",
        access_key: str | None = None,
        secret_key: str | None = None,
        client: Any = None,
        *,
        page_size: int = 1000,
    ) -> None:
        if not bucket:
            raise ValueError("s3 storage needs a bucket name")
        if page_size < 1:
            raise ValueError(f"s3 storage page_size must be 1 or more, got {page_size}")
        self.bucket = bucket
        self.prefix = normalise_prefix(prefix)
        self.endpoint_url = endpoint_url
        self.page_size = page_size
        self._owns_client = client is None
        if client is None:
            client = self._make_client(endpoint_url, region, access_key, secret_key)
        self._client = client

    def __repr__(self) -> str:
        where = f", endpoint_url={self.endpoint_url!r}" if self.endpoint_url else ""
        return f"S3Storage(bucket={self.bucket!r}, prefix={self.prefix!r}{where})"

    def _make_client(
        self,
        endpoint_url: str | None,
        region: str,
        access_key: str | None,
        secret_key: str | None,
    ) -> Any:
        import boto3.session  # type: ignore[import-untyped]
        from botocore.config import Config  # type: ignore[import-untyped]
        from botocore.exceptions import BotoCoreError  # type: ignore[import-untyped]

        config = Config(
            retries={"max_attempts": 2, "mode": "standard"},
            connect_timeout=_TIMEOUT_SECONDS,
            read_timeout=_TIMEOUT_SECONDS,
            s3={"addressing_style": "path"} if endpoint_url else {},
        )
        try:
            # A session of its own: boto3's default session is not safe to share between
            # threads while clients are being made.
            return boto3.session.Session().client(
                "s3",
                endpoint_url=endpoint_url or None,
                region_name=region or None,
                aws_access_key_id=access_key or None,
                aws_secret_access_key=secret_key or None,
                config=config,
            )
        except (BotoCoreError, ValueError) as e:
            raise StorageError(
                f"s3 storage bucket {self.bucket!r}: open: {_one_line(str(e))}"
            ) from e

    # -- the Storage protocol -------------------------------------------------------------

    def put(
        self, key: str, data: bytes, content_type: str, metadata: Mapping[str, str]
    ) -> StoredObject:
        name = self._name("put", key)
        with self._errors("put", name):
            answer = self._client.put_object(
                Bucket=self.bucket,
                Key=name,
                Body=data,
                ContentType=content_type,
                Metadata=dict(metadata),
            )
        return StoredObject(
            key=key,
            size=len(data),
            last_modified=time.time(),
            etag=str(answer.get("ETag", "")).strip('"'),
            content_type=content_type,
            metadata=dict(metadata),
        )

    def get(self, key: str) -> bytes:
        name = self._name("get", key)
        with self._errors("get", name):
            body = self._client.get_object(Bucket=self.bucket, Key=name)["Body"]
            try:
                data: bytes = body.read()
            finally:
                body.close()
        return data

    def head(self, key: str) -> StoredObject | None:
        name = self._name("head", key)
        try:
            with self._errors("head", name):
                answer = self._client.head_object(Bucket=self.bucket, Key=name)
        except StorageError as e:
            if e.missing:
                return None
            raise
        return StoredObject(
            key=key,
            size=int(answer.get("ContentLength", 0)),
            last_modified=answer["LastModified"].timestamp(),
            etag=str(answer.get("ETag", "")).strip('"'),
            content_type=str(answer.get("ContentType", "")),
            metadata=dict(answer.get("Metadata", {})),
        )

    def delete(self, key: str) -> None:
        name = self._name("delete", key)
        with self._errors("delete", name):
            self._client.delete_object(Bucket=self.bucket, Key=name)

    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        """Every object whose key (after the storage's prefix) starts with `prefix`, in key
        order, read `page_size` keys per request."""
        paginator = self._client.get_paginator("list_objects_v2")
        pages = paginator.paginate(
            Bucket=self.bucket,
            Prefix=self.prefix + prefix,
            PaginationConfig={"PageSize": self.page_size},
        )
        with self._errors("list", self.prefix + prefix):
            for page in pages:
                for item in page.get("Contents", ()):
                    yield StoredObject(
                        key=str(item["Key"])[len(self.prefix) :],
                        size=int(item.get("Size", 0)),
                        last_modified=item["LastModified"].timestamp(),
                        etag=str(item.get("ETag", "")).strip('"'),
                    )

    def close(self) -> None:
        """Close the client this storage made (not one it was given)."""
        if self._owns_client:
            self._client.close()

    # -- helpers --------------------------------------------------------------------------

    def _name(self, op: str, key: str) -> str:
        """The object key of `key`: the storage's prefix, then the key."""
        if not key:
            raise StorageError(f"s3 storage bucket {self.bucket!r}: {op} '': a key is not empty")
        return self.prefix + key

    @contextmanager
    def _errors(self, op: str, name: str) -> Iterator[None]:
        """botocore's exceptions (and the network's) as `StorageError`."""
        from botocore.exceptions import BotoCoreError, ClientError

        where = f"s3 storage bucket {self.bucket!r}: {op} {name or repr(name)}"
        try:
            yield
        except ClientError as e:
            error = e.response.get("Error", {})
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            code = str(error.get("Code") or status or "error")
            message = str(error.get("Message") or "")
            cause = f"{code}: {message}" if message and message != code else code
            missing = code in _MISSING_CODES
            raise StorageError(f"{where}: {_one_line(cause)}", missing=missing) from e
        except (BotoCoreError, OSError) as e:
            raise StorageError(f"{where}: {_one_line(str(e) or type(e).__name__)}") from e
