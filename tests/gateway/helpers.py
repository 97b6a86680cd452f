"""What the gateway's tests share besides the fixtures of conftest.py: boto3 clients (for a
gateway in a process of its own, another user, nobody), boto3's errors read, objects and
data files as the metabase and the disk hold them, topics and notifications set up the way
boto3 cannot, requests boto3 has no operation for, and the pubsub REST API signed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import boto3
import botocore
import httpx
import orjson
import pytest
import sqlalchemy as sa
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from ripple.changestream.schema import change_records
from ripple.identity import create_user
from ripple.metabase import Metabase, ObjectLocation
from ripple.metabase.put_object import put_object
from ripple.metabase.rows import new_stream_id
from ripple.notifications.store import StoredTopic, topic_arn
from tests.gateway.conftest import Running

REGION = "us-east-1"

# --- clients ----------------------------------------------------------------------------------


def client(url: str, access: str, secret: str, **config: Any) -> Any:
    """A boto3 S3 client (path-style, no retries) for the gateway at `url`."""
    return boto3.client(
        "s3",
        endpoint_url=url,
        region_name=REGION,
        aws_access_key_id=access,
        aws_secret_access_key=secret,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, **config),
    )


def second_user(gateway: Running, name: str = "bob") -> tuple[str, Any]:
    """Another project's public id, and a boto3 client signing as it."""
    _, key, secret = create_user(gateway.services.db, gateway.data_dir, name)
    return str(key.project_public_id), gateway.client(key.access_key_id, secret)


def anonymous(gateway: Running) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=gateway.url,
        region_name=REGION,
        config=Config(
            signature_version=botocore.UNSIGNED,
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1},
        ),
    )


def code_of(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def status_of(error: pytest.ExceptionInfo[ClientError]) -> int:
    return int(error.value.response["ResponseMetadata"]["HTTPStatusCode"])


# --- objects ----------------------------------------------------------------------------------


def seed(gateway: Running, bucket: str, keys: list[str]) -> None:
    """Objects written straight into the metabase (no PutObject), their key as their data."""
    for key in keys:
        data = key.encode()
        put_object(
            gateway.services.db,
            ObjectLocation(gateway.key.project_id, bucket, key),
            stream_id=new_stream_id(),
            size=len(data),
            etag="0" * 32,
            inline_data=data,
        )


def data_files(root: Path) -> list[Path]:
    """Committed data files (not temporaries or parts)."""
    objects = root / "objects"
    return [p for p in objects.rglob("*") if p.is_file() and p.parts[-4] == "objects"]


# --- notifications ----------------------------------------------------------------------------


def make_topic(gateway: Running, name: str, endpoint: str, **arguments: str) -> StoredTopic:
    key = gateway.key
    arn = topic_arn(REGION, str(key.project_public_id), name)
    return gateway.services.eventing.put_topic(
        key.project_id, name, arn, endpoint, arguments, "test"
    )


def signed_put(gateway: Running, path: str, body: bytes) -> httpx.Response:
    request = AWSRequest(
        method="PUT",
        url=gateway.url + path,
        data=body,
        headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"},
    )
    S3SigV4Auth(Credentials(gateway.key.access_key_id, gateway.secret), "s3", REGION).add_auth(
        request
    )
    return httpx.put(gateway.url + path, content=body, headers=dict(request.headers.items()))


def signed_request(
    gateway: Running,
    method: str,
    path: str,
    body: bytes = b"",
    *,
    access_key: str | None = None,
    secret: str | None = None,
) -> httpx.Response:
    """Any request, signed (by the gateway's user unless another key is given), for what
    boto3 has no operation for; the body is sent as UNSIGNED-PAYLOAD."""
    request = AWSRequest(
        method=method,
        url=gateway.url + path,
        data=body,
        headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"},
    )
    credentials = Credentials(access_key or gateway.key.access_key_id, secret or gateway.secret)
    S3SigV4Auth(credentials, "s3", REGION).add_auth(request)
    return httpx.request(
        method, gateway.url + path, content=body, headers=dict(request.headers.items())
    )


def with_tag_rules(s3: Any, rules: list[tuple[str, str]]) -> None:
    """Make the client's next PutBucketNotificationConfiguration carry these S3Tags rules."""
    xml = "".join(
        f"<FilterRule><Name>{name}</Name><Value>{value}</Value></FilterRule>"
        for name, value in rules
    )

    def add_rules(request: Any, **_: Any) -> None:
        body: bytes = request.data
        request.data = body.replace(b"</Filter>", f"<S3Tags>{xml}</S3Tags></Filter>".encode())
        for header in list(request.headers):
            if header.lower() == "content-md5" or header.lower().startswith("x-amz-checksum-"):
                del request.headers[header]

    s3.meta.events.register_first(
        "before-sign.s3.PutBucketNotificationConfiguration", add_rules, unique_id="s3tags"
    )


@dataclass
class PubSub:
    """Signed requests to one gateway's pubsub API with one access key."""

    url: str
    access_key: str
    secret: str

    def __call__(
        self, method: str, path: str, params: dict[str, str | None] | None = None
    ) -> httpx.Response:
        """`params` values of None are bare flags (`?events`, `?ack`)."""
        query = "&".join(
            quote(k, safe="-_.~") + ("" if v is None else "=" + quote(v, safe="-_.~"))
            for k, v in (params or {}).items()
        )
        path = quote(path, safe="/-_.~")  # as S3 clients encode paths: ':' is %3A
        url = f"{self.url}/_ripple/pubsub/{path}" + (f"?{query}" if query else "")
        request = AWSRequest(
            method=method, url=url, headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"}
        )
        S3SigV4Auth(Credentials(self.access_key, self.secret), "s3", REGION).add_auth(request)
        return httpx.request(method, url, headers=dict(request.headers.items()))

    def ok(self, method: str, path: str, params: dict[str, str | None] | None = None) -> Any:
        response = self(method, path, params)
        assert response.status_code == 200, response.text
        return response.json() if response.content else None


def recorded_request_ids(db: Metabase) -> list[str]:
    """The request ids of the objects' change records, in the order they were written."""
    c = change_records.c
    with db.read() as conn:
        rows = conn.execute(
            sa.select(c.transaction_tag).where(c.stream_name == "bucket_eventing")
        ).all()
    return [orjson.loads(row.transaction_tag)["request_id"] for row in rows]
