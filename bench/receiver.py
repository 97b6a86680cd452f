"""A loopback webhook receiver for the benchmarks: an asyncio HTTP/1.1 keep-alive server in its
own process that answers every POST with 200 and records when each event arrived (by the
`X-Ripple-Event-Id` header), plus a pipelining raw client that measures its own ceiling, so
a benchmark can show the receiver is never what limits it. Traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import http.client
import multiprocessing as mp
import time
from typing import Any

import orjson

_OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"


class _Receipts:
    """What the receiver got: the first receipt of every event id, with the event's key."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.seen: set[str] = set()
        self.ids: list[str] = []
        self.keys: list[str] = []
        self.ns: list[int] = []
        self.requests = 0
        self.last_new_ns = 0

    def event(self, event_id: str, body: bytes) -> None:
        now = time.time_ns()
        self.requests += 1
        try:  # the work a real receiver does at least: parse the message
            key = orjson.loads(body)["Records"][0]["s3"]["object"]["key"]
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
            key = ""
        if event_id not in self.seen:
            self.seen.add(event_id)
            self.ids.append(event_id)
            self.keys.append(key)
            self.ns.append(now)
            self.last_new_ns = now

    def control(self, method: bytes, path: bytes) -> bytes:
        if path == b"/_stats":
            body = orjson.dumps(
                {"unique": len(self.ids), "requests": self.requests, "last_ns": self.last_new_ns}
            )
        elif path == b"/_dump":
            body = orjson.dumps({"ids": self.ids, "keys": self.keys, "ns": self.ns})
        elif path == b"/_reset" and method == b"POST":
            self.reset()
            body = b"{}"
        else:
            return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


class _Http(asyncio.Protocol):
    """A minimal HTTP/1.1 server connection: keep-alive, pipelining, Content-Length bodies."""

    def __init__(self, receipts: _Receipts) -> None:
        self.receipts = receipts
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        out: list[bytes] = []
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                break
            lines = bytes(buffer[:end]).split(b"\r\n")
            length, event_id = 0, ""
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"x-ripple-event-id":
                    event_id = value.strip().decode()
            if len(buffer) < end + 4 + length:
                break
            body = bytes(buffer[end + 4 : end + 4 + length])
            del buffer[: end + 4 + length]
            method, path, _ = lines[0].split(b" ", 2)
            if path.startswith(b"/_"):
                out.append(self.receipts.control(method, path))
            else:
                self.receipts.event(event_id, body)
                out.append(_OK)
        if out and self.transport is not None:
            self.transport.write(b"".join(out))


def _receiver_main(ports: Any) -> None:
    async def serve() -> None:
        receipts = _Receipts()
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: _Http(receipts), "127.0.0.1", 0, backlog=1024, reuse_address=True
        )
        ports.send(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


class Receiver:
    """The receiver process and its control calls (over HTTP, on 127.0.0.1)."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")
        ours, theirs = ctx.Pipe()
        self.process = ctx.Process(target=_receiver_main, args=(theirs,), daemon=True)
        self.process.start()
        if not ours.poll(60):
            raise RuntimeError("the HTTP receiver did not start")
        self.port: int = ours.recv()
        self.url = f"http://127.0.0.1:{self.port}/events"

    def _call(self, method: str, path: str) -> Any:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, path)
            return orjson.loads(conn.getresponse().read())
        finally:
            conn.close()

    def stats(self) -> dict[str, int]:
        return self._call("GET", "/_stats")  # type: ignore[no-any-return]

    def dump(self) -> dict[str, list[Any]]:
        return self._call("GET", "/_dump")  # type: ignore[no-any-return]

    def reset(self) -> None:
        self._call("POST", "/_reset")

    def close(self) -> None:
        self.process.terminate()
        self.process.join(10)


def _raw_client_main(
    port: int, body: bytes, connections: int, depth: int, seconds: float, out: Any
) -> None:
    """The receiver's ceiling: `connections` keep-alive connections, each sending `depth`
    pipelined POSTs and then reading their answers, for `seconds`."""

    async def one(c: int, deadline: float) -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        block = b"".join(
            b"POST /events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"X-Ripple-Event-Id: ceiling-%d-%d\r\nContent-Length: %d\r\n\r\n%s"
            % (c, i, len(body), body)
            for i in range(depth)
        )
        done = 0
        while time.monotonic() < deadline:
            writer.write(block)
            await reader.readexactly(len(_OK) * depth)
            done += depth
        writer.close()
        return done

    async def run() -> tuple[int, float]:
        start = time.monotonic()
        counts = await asyncio.gather(*(one(c, start + seconds) for c in range(connections)))
        return sum(counts), time.monotonic() - start

    out.put(asyncio.run(run()))


def receiver_ceiling(receiver: Receiver, body: bytes, seconds: float) -> float:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(
        target=_raw_client_main, args=(receiver.port, body, 4, 32, seconds, out), daemon=True
    )
    proc.start()
    count, elapsed = out.get(timeout=seconds + 120)
    proc.join(30)
    receiver.reset()
    return count / elapsed
