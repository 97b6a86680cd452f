"""The request context: who asked what, from where, under which request id. It answers in
every response's `x-amz-request-id` / `x-amz-id-2` headers and goes into the change-stream
transaction tag, so events carry `userIdentity`, `requestParameters`, `responseElements`
and the object's `eTag`."""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass

from ripple.changestream.tag import Operation, TransactionTag


def new_request_id() -> str:
    """16 upper-case hex digits, as S3's request ids look."""
    return secrets.token_hex(8).upper()


def new_host_id() -> str:
    return base64.b64encode(secrets.token_bytes(48)).decode()


@dataclass
class RequestContext:
    request_id: str
    host_id: str
    source_ip: str
    principal: str = ""  # the project's public id, once the request is authenticated
    operation: str = ""  # the S3 operation, e.g. PutObject (for logs and metrics)

    @classmethod
    def new(cls, source_ip: str) -> RequestContext:
        return cls(new_request_id(), new_host_id(), source_ip)

    def tag(self, operation: Operation | None = None, etag: str = "") -> TransactionTag:
        """The transaction tag of a metabase write serving this request."""
        return TransactionTag(
            operation=operation,
            request_id=self.request_id,
            host_id=self.host_id,
            principal=self.principal,
            source_ip=self.source_ip,
            etag=etag,
        )

    @property
    def headers(self) -> dict[str, str]:
        return {"x-amz-request-id": self.request_id, "x-amz-id-2": self.host_id}
