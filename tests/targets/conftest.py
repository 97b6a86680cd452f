"""Shared helpers for the target tests: realistic deliveries, no proxies on loopback, a
webhook receiver (`server`), and the destination guard made process-wide (`use`) with a
test DNS (`dns`).

`delivery(...)` builds one S3 event record (2.1) the way the pipeline does and wraps it in a
`Delivery`: body `{"Records":[event]}`, attributes eventName, bucket, key, sequencer.
"""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ripple.targets.base import Delivery
from ripple.targets.guard import DestinationGuard, set_default_guard
from tests.events.golden import s3_record
from tests.targets.webhook_server import HookServer

BUCKET = "photos"
SEQUENCER_BASE = 0x18EA07F04CD9E115  # 2026-11-21T10:15:30.123456789Z in UNIX ns

_PROXY_VARIABLES = (
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "grpc_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
)


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx and gRPC both honour proxy variables; these tests only talk to 127.0.0.1."""
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)


def event_record(
    key: str,
    *,
    bucket: str = BUCKET,
    n: int = 0,
    size: int = 1024,
    event_name: str = "ObjectCreated:Put",
) -> dict[str, Any]:
    """One S3 event record as ripple emits it; `n` shifts the sequencer and the time."""
    return s3_record(
        eventTime=f"2026-11-21T10:15:{30 + n % 30:02d}.123Z",
        eventName=event_name,
        userIdentity={"principalId": "1PublicProjectIdOfPhotos"},
        requestParameters={"sourceIPAddress": "127.0.0.1"},
        responseElements={"x-amz-request-id": f"req-{n}", "x-amz-id-2": "ripple"},
        bucket=bucket,
        obj={
            "key": key,
            "size": size,
            "eTag": hashlib.md5(f"{key}-{n}".encode()).hexdigest(),
            "sequencer": f"{SEQUENCER_BASE + n:016X}",
        },
    )


def delivery(key: str = "2026/cat.jpg", *, n: int = 0, **fields: Any) -> Delivery:
    """A delivery of `event_record(key, n=n, **fields)` with a stable event id."""
    event = event_record(key, n=n, **fields)
    s3 = event["s3"]
    sequencer = s3["object"]["sequencer"]
    return Delivery.of(
        f"{s3['bucket']['name']}-{sequencer}-{n}",
        event,
        {
            "eventName": event["eventName"],
            "bucket": s3["bucket"]["name"],
            "key": key,
            "sequencer": sequencer,
        },
        batch_id=7,
    )


@pytest.fixture
def server() -> Iterator[HookServer]:
    s = HookServer()
    yield s
    s.stop()


# the destination guard: made the process-wide one, and names it resolves -------------

Use = Callable[..., DestinationGuard]


@pytest.fixture
def use() -> Use:
    """Make a guard the process-wide one (production mode unless told otherwise)."""

    def make(allow: str = "", mode: str = "production") -> DestinationGuard:
        guard = DestinationGuard(allow, mode)
        set_default_guard(guard)
        return guard

    return make


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """A name -> addresses table `socket.getaddrinfo` answers from; change it to re-point."""
    table: dict[str, list[str]] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name.lower() in table:
            return [_info(a, int(port or 0)) for a in table[name.lower()]]
        if name == "localhost" or _literal(name):
            return real(host, port, *args, **kwargs)
        raise socket.gaierror(socket.EAI_NONAME, f"{name!r} is not in the test's DNS")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return table


def _literal(name: str) -> bool:
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in name else socket.AF_INET, name)
    except OSError:
        return False
    return True


def _info(address: str, port: int) -> tuple[Any, ...]:
    if ":" in address:
        return (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0))
    return (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))
