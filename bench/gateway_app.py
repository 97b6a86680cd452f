"""Benchmark: the gateway's CPU per request without HTTP, by how its metabase operations run.

The S3 app (`ripple.gateway.app.create_app`) over a fresh metabase (SQLite in a temporary
directory, or PostgreSQL: a database `ripple_bench_<random>` created for the run and dropped
at its end), called in this process on uvloop with ASGI messages built by hand: `--requests`
presigned PUTs of `--size` bytes (botocore's SigV4 query signing, before the timed part),
then GETs of the same keys, `--concurrency` at a time (after a warm-up of 300 of each).
Reported: this process's CPU per request (`time.process_time`) and requests per second, for
each way of running the metabase operations (`--threads`, comma-separated):

  default   the gateway's own metabase threads (`ripple.gateway.threads.metabase_threads`)
  N         a pool of N threads
  inline    no thread hop: each operation called on the event loop (a lower bound; the
            gateway never does this, a commit's fsync would stop every request)

What it leaves out, `bench/gateway.py` measures: HTTP (a bare uvicorn with httptools and
uvloop costs ~0.05 ms per small request here) and other processes.

The last line is one JSON object: {way: {"put_cpu_ms", "get_cpu_ms", "put_per_s",
"get_per_s"}}.

    PYTHONPATH=src .venv/bin/python bench/gateway_app.py [--database sqlite|postgresql]
        [--requests 3000] [--concurrency 16] [--size 4096] [--threads default,1,2,32,inline]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import uvloop
from rich.console import Console

from common import fresh_postgres_database, spent
from ripple.gateway import threads
from ripple.gateway.app import create_app
from ripple.gateway.data import ObjectData
from ripple.gateway.ratelimit import RateLimit
from ripple.gateway.request import Services
from ripple.identity import Keyring, create_user
from ripple.metabase import Metabase
from ripple.metabase.migrate import upgrade
from s3load import presign

T = TypeVar("T")
console = Console(stderr=True)
URL = "http://127.0.0.1:9000"  # what the requests are signed for; nothing listens there
ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
WARMUP = 300


class Inline(threads.Workers):
    """Metabase operations called on the event loop: no thread hop."""

    def __init__(self) -> None:
        super().__init__(0, "inline")

    async def run(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        return fn(*args, **kwargs)


def workers_for(way: str, dialect: str) -> threads.Workers:
    if way == "inline":
        return Inline()
    count = threads.metabase_threads(dialect) if way == "default" else int(way)
    return threads.Workers(count, "gateway")


async def call(app: Any, method: str, target: bytes, body: bytes) -> int:
    """One request through the app; its status."""
    path, _, query = target.partition(b"?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path.decode(),
        "raw_path": path,
        "query_string": query,
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:9000"), (b"content-length", b"%d" % len(body))],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 9000),
        "state": {},
    }
    given = False
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal given
        if given:  # the app asks again only to see the client go: it never does
            await asyncio.Event().wait()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


async def phase(
    app: Any, method: str, targets: list[bytes], body: bytes, concurrency: int
) -> tuple[float, float]:
    """(CPU ms per request, requests per second); every request must answer 2xx."""
    pending = iter(targets)
    failed: list[int] = []

    async def client() -> None:
        for target in pending:
            status = await call(app, method, target, body)
            if status // 100 != 2:
                failed.append(status)

    with spent() as took:
        await asyncio.gather(*(client() for _ in range(concurrency)))
    if failed:
        raise RuntimeError(f"{method}: {len(failed)} requests failed, e.g. {failed[0]}")
    return took.cpu_s / len(targets) * 1000, len(targets) / took.wall_s


async def measure(
    services: Services, access: str, secret: str, way: str, args: argparse.Namespace
) -> dict[str, float]:
    services.workers = workers_for(way, services.db.dialect)
    app = create_app(services)
    bucket = f"bench-{uuid.uuid4().hex[:8]}"
    status = await call(app, "PUT", _bucket_target(access, secret, bucket), b"")
    if status != 200:
        raise RuntimeError(f"CreateBucket answered {status}")
    body = os.urandom(args.size)
    figures: dict[str, float] = {}
    for label, n in (("warm", WARMUP), ("timed", args.requests)):
        keys = [f"{label}-{i}" for i in range(n)]
        for method in ("PUT", "GET"):
            targets = presign(URL, access, secret, method, bucket, keys)
            sent = body if method == "PUT" else b""
            cpu_ms, per_s = await phase(app, method, targets, sent, args.concurrency)
            if label == "timed":
                figures[f"{method.lower()}_cpu_ms"] = round(cpu_ms, 3)
                figures[f"{method.lower()}_per_s"] = round(per_s, 1)
    return figures


def _bucket_target(access: str, secret: str, bucket: str) -> bytes:
    from botocore.auth import S3SigV4QueryAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest(method="PUT", url=f"{URL}/{bucket}")
    S3SigV4QueryAuth(Credentials(access, secret), "s3", "us-east-1", expires=3600).add_auth(request)
    parts = urlsplit(request.prepare().url)
    return f"{parts.path}?{parts.query}".encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--threads", default="default,1,2,32,inline")
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        if args.database == "sqlite":
            url = f"sqlite:///{tmp}/metabase.db"
        else:
            name = f"ripple_bench_{uuid.uuid4().hex[:12]}"
            url = stack.enter_context(fresh_postgres_database(ADMIN_URL, name))
        db = Metabase(url)
        stack.callback(db.dispose)
        upgrade(db)
        data_dir = Path(tmp)
        _, key, secret = create_user(db, data_dir, "bench")
        services = Services(
            db=db,
            data=ObjectData(data_dir / "objects"),
            keyring=Keyring(db, data_dir),
            deletes=RateLimit(db, "delete", 1e6, 1e6),
        )
        for way in args.threads.split(","):
            results[way] = uvloop.run(measure(services, key.access_key_id, secret, way, args))
            console.print(f"{args.database} {way}: {results[way]}", highlight=False)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
