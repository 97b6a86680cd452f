"""Load generators for bench/gateway.py, each in processes of its own (multiprocessing's
`spawn`), so that no client shares a GIL with another or with the server:

- the light client: URLs presigned with botocore's SigV4 query signing
  (`S3SigV4QueryAuth` over `AWSRequest`: only the host signed, the payload UNSIGNED-PAYLOAD)
  BEFORE the timed phase, then sent by a raw asyncio HTTP/1.1 client over keep-alive
  connections (no HTTP library: a request is one write, an answer is read by its
  Content-Length). It reports its own CPU, so that a run can show it is not the limit. To
  an https:// URL it speaks TLS (asyncio's, trusting only `ca_file`) over the same
  persistent connections: a connection's handshake (in the timed part, as a plain one's
  connect is) is followed by hundreds of requests, so a phase measures TLS's steady cost
  per request (record encryption and decryption), not handshakes;
- boto3 processes: one `put_object` after another for a fixed time, each process with its
  own boto3 client, as a real application sends them.

Both share the keys of a phase out ahead of time and report, per process: requests done,
errors by HTTP status, each request's latency, the first start and last end
(`time.monotonic`, one clock for every process), and the CPU the process spent in the timed
part (`common.spent`).

Imported as `from s3load import …`: running `python bench/gateway.py` puts bench/ on sys.path.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import ssl
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any
from urllib.parse import urlsplit

from common import spent  # bench/common.py (bench/ is on sys.path)

_spawn = mp.get_context("spawn")
REGION = "us-east-1"
STAGGER_S = 0.005  # between the light client's connections
START_TIMEOUT_S = 300.0  # spawned processes import boto3 on a busy 2-core machine


@dataclass
class Load:
    """What the processes of one timed phase did, together."""

    ops: int
    errors: Counter[int]  # HTTP status (0: no answer) -> how many
    latencies: list[float]
    start: float  # time.monotonic() of the first request
    end: float  # and of the last answer
    client_cpu_s: float
    prepare_cpu_s: float = 0.0  # the light client: presigning, before the timed part
    put_ns: dict[str, int] = field(default_factory=dict)  # boto3 eventing: key -> PUT return

    @property
    def seconds(self) -> float:
        return max(self.end - self.start, 1e-9)

    @property
    def ops_per_s(self) -> float:
        return self.ops / self.seconds

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _together(parts: Sequence[dict[str, Any]]) -> Load:
    errors: Counter[int] = Counter()
    put_ns: dict[str, int] = {}
    for part in parts:
        errors.update({int(k): v for k, v in part["errors"].items()})
        put_ns.update(part.get("put_ns", {}))
    return Load(
        ops=sum(p["ops"] for p in parts),
        errors=errors,
        latencies=[x for p in parts for x in p["latencies"]],
        start=min(p["start"] for p in parts),
        end=max(p["end"] for p in parts),
        client_cpu_s=sum(p["cpu_s"] for p in parts),
        prepare_cpu_s=sum(p.get("prepare_cpu_s", 0.0) for p in parts),
        put_ns=put_ns,
    )


class Clients:
    """Processes started with their share of a phase, each ready (its keys signed, or its
    client made and warmed up) before `go` starts them all at once."""

    def __init__(self, target: Any, shares: Sequence[tuple[Any, ...]]) -> None:
        self.pipes: list[Connection] = []
        self.processes = []
        self.done = _spawn.Array("q", len(shares), lock=False)  # requests so far, each
        for slot, share in enumerate(shares):
            ours, theirs = _spawn.Pipe()
            args = (*share, self.done, slot, theirs)
            process = _spawn.Process(target=target, args=args, daemon=True)
            process.start()
            theirs.close()
            self.pipes.append(ours)
            self.processes.append(process)
        try:
            for pipe in self.pipes:
                self._receive(pipe, START_TIMEOUT_S)  # "ready"
        except BaseException:
            self.close()
            raise

    def _receive(self, pipe: Connection, timeout: float) -> Any:
        if not pipe.poll(timeout):
            raise RuntimeError(f"a client process did not answer within {timeout:.0f} s")
        try:
            kind, value = pipe.recv()
        except EOFError:
            raise RuntimeError("a client process died") from None
        if kind == "failed":
            raise RuntimeError(f"a client process failed: {value}")
        return value

    def go(
        self,
        seconds: float | None = None,
        tick: Callable[[int], None] | None = None,
        timeout: float = 900.0,
    ) -> Load:
        """Start every process (for `seconds`, or until its share is done); their results
        together. `tick` is called with the requests done so far, about 5 times a second."""
        for pipe in self.pipes:
            pipe.send(seconds)
        results = []
        try:
            waiting, deadline = list(self.pipes), time.monotonic() + timeout
            while waiting:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the client processes did not end within {timeout} s")
                for ready in wait(waiting, timeout=0.2):
                    assert isinstance(ready, Connection)
                    results.append(self._receive(ready, 0))
                    waiting.remove(ready)
                if tick is not None:
                    tick(sum(self.done))
            return _together(results)
        finally:
            self.close()

    def close(self) -> None:
        for pipe in self.pipes:  # one still waiting for `go` reads the end of its pipe
            pipe.close()
        for process in self.processes:
            process.join(10)
            if process.exitcode is None:
                process.kill()
                process.join()


# --- the light client: presigned URLs over raw asyncio HTTP/1.1 ------------------------------


def presign(
    url: str, access: str, secret: str, method: str, bucket: str, keys: Sequence[str]
) -> list[bytes]:
    """The path and query of a presigned `method` request per key (valid for an hour)."""
    from botocore.auth import S3SigV4QueryAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    auth = S3SigV4QueryAuth(Credentials(access, secret), "s3", REGION, expires=3600)
    targets = []
    for key in keys:
        request = AWSRequest(method=method, url=f"{url}/{bucket}/{key}")
        auth.add_auth(request)
        target = urlsplit(request.prepare().url)
        targets.append(f"{target.path}?{target.query}".encode())
    return targets


async def _answer(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """One HTTP/1.1 answer: (status, body, whether the server keeps the connection)."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    lower = head.lower()
    keep = b"\r\nconnection: close" not in lower
    at = lower.find(b"\r\ncontent-length:")
    if at >= 0:
        length = int(lower[at + 17 : lower.index(b"\r\n", at + 2)])
        return status, await reader.readexactly(length) if length else b"", keep
    if b"\r\ntransfer-encoding: chunked" in lower:
        body = bytearray()
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            body += await reader.readexactly(size + 2)
            del body[-2:]
        await reader.readuntil(b"\r\n")  # no trailers are sent
        return status, bytes(body), keep
    return status, b"", keep


async def _drive(
    host: str,
    port: int,
    method: bytes,
    targets: Sequence[bytes],
    body: bytes,
    connections: int,
    done: Any,
    slot: int,
    tls: ssl.SSLContext | None = None,
) -> dict[str, Any]:
    """Every target once, over `connections` keep-alive connections sharing the list (with
    `tls`, TLS connections, `host` the name checked in the certificate); `done[slot]`: how
    many so far."""
    next_target = iter(targets)
    latencies: list[float] = []
    errors: Counter[int] = Counter()
    lengths: Counter[int] = Counter()
    head = method + b" "
    tail = b" HTTP/1.1\r\nHost: %s:%d\r\n" % (host.encode(), port)
    tail += b"Content-Length: %d\r\n\r\n%s" % (len(body), body) if body else b"\r\n"

    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if tls is None:
            return await asyncio.open_connection(host, port)
        return await asyncio.open_connection(host, port, ssl=tls, server_hostname=host)

    async def one(c: int) -> None:
        # a connection every STAGGER_S, while the others already send: a gateway process
        # busy with those is slower to accept it than an idle one (the kernel wakes every
        # process waiting on the shared socket; the first to call accept() takes it)
        await asyncio.sleep(c * STAGGER_S)
        reader, writer = await connect()
        for target in next_target:
            start = time.perf_counter()
            writer.write(head + target + tail)
            try:
                status, answer, keep = await _answer(reader)
            except (OSError, asyncio.IncompleteReadError):
                status, answer, keep = 0, b"", False
            latencies.append(time.perf_counter() - start)
            done[slot] = len(latencies)
            if status // 100 != 2:
                errors[status] += 1
            elif method == b"GET":
                lengths[len(answer)] += 1
            if not keep:
                writer.close()
                reader, writer = await connect()
        writer.close()

    start = time.monotonic()
    await asyncio.gather(*(one(c) for c in range(connections)))
    end = time.monotonic()
    return {
        "ops": len(latencies) - sum(errors.values()),
        "errors": dict(errors),
        "latencies": latencies,
        "start": start,
        "end": end,
        "lengths": dict(lengths),
    }


def _light_main(
    url: str,
    access: str,
    secret: str,
    method: str,
    bucket: str,
    keys: Sequence[str],
    size: int,
    connections: int,
    ca_file: str | None,
    done: Any,
    slot: int,
    pipe: Connection,
) -> None:
    try:
        with spent() as preparing:
            targets = presign(url, access, secret, method, bucket, keys)
            body = os.urandom(size) if method == "PUT" else b""
        pipe.send(("ready", None))
        pipe.recv()
        parts = urlsplit(url)
        https = parts.scheme == "https"
        host, port = parts.hostname or "127.0.0.1", parts.port or (443 if https else 80)
        tls = ssl.create_default_context(cafile=ca_file) if https else None
        with spent() as driving:
            result = asyncio.run(
                _drive(host, port, method.encode(), targets, body, connections, done, slot, tls)
            )
        result["cpu_s"] = driving.cpu_s
        result["prepare_cpu_s"] = preparing.cpu_s
        if method == "GET" and set(result.pop("lengths")) - {size}:
            raise RuntimeError(f"GET answered bodies not of {size} bytes")
        pipe.send(("done", result))
    except Exception as e:
        pipe.send(("failed", f"{type(e).__name__}: {e}"))


def light(
    url: str,
    access: str,
    secret: str,
    method: str,
    bucket: str,
    keys: Sequence[str],
    *,
    size: int,
    processes: int,
    connections: int,
    ca_file: str | None = None,
) -> Clients:
    """`processes` light clients, each with `connections` connections, that `method` the
    keys (shared out round-robin) once `go` is called; presigned by then. To an https://
    `url`, over TLS trusting the certificate authority in `ca_file` only (PEM)."""
    share = (url, access, secret, method, bucket)
    return Clients(
        _light_main,
        [(*share, keys[p::processes], size, connections, ca_file) for p in range(processes)],
    )


# --- boto3 in processes ------------------------------------------------------------------


def boto3_client(
    url: str, access: str, secret: str, service: str = "s3", ca_file: str | None = None
) -> Any:
    """A client of `url`; to an https:// one, trusting the authority in `ca_file` only."""
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(
        service,
        endpoint_url=url,
        region_name=REGION,
        aws_access_key_id=access,
        aws_secret_access_key=secret,
        verify=ca_file,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def _boto3_main(
    url: str,
    access: str,
    secret: str,
    bucket: str,
    prefix: str,
    size: int,
    warm: int,
    record: bool,
    done: Any,
    slot: int,
    pipe: Connection,
) -> None:
    try:
        from botocore.exceptions import BotoCoreError, ClientError

        s3 = boto3_client(url, access, secret)
        body = os.urandom(size)
        for i in range(warm):  # the client's connection, and (eventing) the pipeline
            s3.put_object(Bucket=bucket, Key=f"warm-{prefix}-{i:04d}", Body=body)
        pipe.send(("ready", None))
        seconds = pipe.recv()
        latencies: list[float] = []
        errors: Counter[int] = Counter()
        put_ns: dict[str, int] = {}
        with spent() as putting:
            start = time.monotonic()
            deadline = start + seconds
            i = 0
            while time.monotonic() < deadline:
                key = f"{prefix}-{i:07d}"
                i += 1
                t = time.perf_counter()
                try:
                    s3.put_object(Bucket=bucket, Key=key, Body=body)
                except ClientError as e:
                    errors[int(e.response["ResponseMetadata"].get("HTTPStatusCode", 0))] += 1
                    continue
                except BotoCoreError:
                    errors[0] += 1
                    continue
                finally:
                    latencies.append(time.perf_counter() - t)
                    done[slot] = len(latencies)
                if record:
                    put_ns[key] = time.time_ns()
            end = time.monotonic()
        pipe.send(
            (
                "done",
                {
                    "ops": len(latencies) - sum(errors.values()),
                    "errors": dict(errors),
                    "latencies": latencies,
                    "start": start,
                    "end": end,
                    "cpu_s": putting.cpu_s,
                    "put_ns": put_ns,
                },
            )
        )
    except Exception as e:
        pipe.send(("failed", f"{type(e).__name__}: {e}"))


def boto3_puts(
    url: str,
    access: str,
    secret: str,
    bucket: str,
    *,
    phase: str,
    size: int,
    processes: int,
    warm: int,
    record: bool,
) -> Clients:
    """`processes` boto3 processes that PUT `size`-byte objects into `bucket` (keys
    PHASE-P-NNNNNNN) for the seconds given to `go`; each has PUT `warm` objects first.
    `record`: keep each key's PUT return time (`time.time_ns`)."""
    return Clients(
        _boto3_main,
        [
            (url, access, secret, bucket, f"{phase}-{p}", size, warm, record)
            for p in range(processes)
        ],
    )
