"""Requests sent as they are, signed with the gateway user's key but never rewritten by an
SDK: what hostile-input and wire-format tests send, and how they read S3's error XML."""

from __future__ import annotations

import base64
import hashlib
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote, urlencode

import httpx
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from tests.gateway.conftest import Running
from tests.waiting import wait_for

FILE_SIZE = 64 * 1024 + 4096  # a body over the inline limit (64 KiB): kept in a data file


def raw_request(
    gateway: Running,
    method: str,
    path: str,
    params: dict[str, str] | None = None,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    *,
    content_md5: bool = False,
) -> httpx.Response:
    """A request signed with the gateway user's key, sent as is (no SDK rewriting);
    `content_md5` adds the body's Content-MD5, which some S3 operations require."""
    headers = dict(headers or {})
    if content_md5:
        headers["Content-MD5"] = base64.b64encode(hashlib.md5(body).digest()).decode()
    # spaces as %20, never `+`: what botocore signs is what the gateway must read
    query = urlencode(params or {}, quote_via=quote)
    url = gateway.url + path + (f"?{query}" if query else "")
    request = AWSRequest(method=method, url=url, data=body, headers=headers)
    credentials = Credentials(gateway.key.access_key_id, gateway.secret)
    S3SigV4Auth(credentials, "s3", "us-east-1").add_auth(request)
    prepared = request.prepare()
    # header values go out as their UTF-8 bytes, as botocore sends them
    sent = {name: str(value).encode() for name, value in prepared.headers.items()}
    return httpx.request(method, prepared.url, content=body, headers=sent)


def error_code(response: httpx.Response) -> str:
    """The `<Code>` of an S3 error response ("" when there is none)."""
    return ET.fromstring(response.content).findtext("Code") or ""


def signed_headers(
    gateway: Running, method: str, path: str, headers: dict[str, str]
) -> dict[str, str]:
    """Headers that sign a request whose body is sent as UNSIGNED-PAYLOAD (so a test can
    stream the body as it likes, e.g. slowly)."""
    request = AWSRequest(method=method, url=gateway.url + path, headers=headers)
    request.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    credentials = Credentials(gateway.key.access_key_id, gateway.secret)
    S3SigV4Auth(credentials, "s3", "us-east-1").add_auth(request)
    return dict(request.prepare().headers)


@contextmanager
def put_held_midway(
    gateway: Running, path: str, headers: dict[str, str], size: int = 3_000_000
) -> Iterator[list[httpx.Response]]:
    """A PUT of `size` bytes to `path`, signed with `headers` (UNSIGNED-PAYLOAD), held after
    its first 1.5 MB until the block ends. On entry the gateway is storing that first part
    (a file appeared in objects/tmp: the request passed every check made before its body);
    after the block, the list holds the answer."""
    body = b"x" * size
    release = threading.Event()
    answered: list[httpx.Response] = []

    def slowly() -> Iterator[bytes]:
        yield body[:1_500_000]  # a batch the gateway writes to a file before the rest arrives
        release.wait(30)
        yield body[1_500_000:]

    headers = {**signed_headers(gateway, "PUT", path, {**headers, "Content-Length": str(size)})}
    sender = threading.Thread(
        target=lambda: answered.append(
            httpx.put(gateway.url + path, content=slowly(), headers=headers)
        )
    )
    spool = gateway.data_dir / "objects" / "tmp"
    sender.start()
    try:
        wait_for(lambda: any(spool.iterdir()), what="the body to be spooled", timeout=30)
        yield answered
    finally:
        release.set()
        sender.join(30)
