"""The snapshotter's gRPC service: `ripple.snapshotter.v1.PubSubBasicInterface` over a
`Snapshotter`.

`Publish` answers once the event is in the write-ahead log. `PublishStream` is a session:
its events are published as they arrive (consecutive ones in one batch, one log fsync for
all of them), and its end — the client closing the stream, or cancelling it, or the
connection breaking — is the session's disconnect: the open pages of every writer it
published to are sealed and stored before the response. A bad request is
INVALID_ARGUMENT; a snapshotter that cannot log (closed, disk failing) is UNAVAILABLE.

There is no generated `_pb2_grpc` module: `serve_grpc` registers the methods with a
generic handler. With `GrpcTls` (`ripple.snapshotter.tls`) it serves TLS.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn

import grpc  # type: ignore[import-untyped]

from ripple.snapshotter.proto import (
    PublishBatchRequest,
    PublishBatchResponse,
    PublishRequest,
    PublishResponse,
    PublishStreamResponse,
)
from ripple.snapshotter.service import Publish, Snapshotter
from ripple.snapshotter.tls import GrpcTls
from ripple.snapshotter.wal import WalError

__all__ = [
    "MAX_PAYLOAD_BYTES",
    "SERVICE",
    "GrpcServerError",
    "PublishService",
    "parse_address",
    "serve_grpc",
]

log = logging.getLogger(__name__)

SERVICE = "ripple.snapshotter.v1.PubSubBasicInterface"
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024  # one event's payload; larger is INVALID_ARGUMENT
# room for the topic and attributes: a request past payload limit + this never reaches the
# servicer, gRPC itself answers RESOURCE_EXHAUSTED
_ENVELOPE_BYTES = 1024 * 1024
_MAX_BATCH = 500  # stream requests published with one log fsync at most
_QUEUE_DEPTH = 2 * _MAX_BATCH  # stream requests read ahead of the publishing…
_READ_AHEAD_BYTES = 32 * 1024 * 1024  # …and their payloads' bytes at most (one may be more)


class GrpcServerError(Exception):
    """The gRPC server cannot start: a malformed address, or one that cannot be bound."""


class _End:
    """The client closed its stream."""


class _Broken:
    """The stream broke: the client cancelled, or the connection is gone."""


class PublishService:
    """The servicer: `publish` (unary) and `publish_stream` (client streaming)."""

    def __init__(self, snapshotter: Snapshotter, max_payload_bytes: int = MAX_PAYLOAD_BYTES):
        self.snapshotter = snapshotter
        self.max_payload_bytes = max_payload_bytes

    def _invalid(self, request: PublishRequest) -> str | None:
        if not request.topic:
            return "topic (the writer id) must not be empty"
        if len(request.payload) > self.max_payload_bytes:
            return (
                f"payload of {len(request.payload)} bytes is over the limit of "
                f"{self.max_payload_bytes} bytes"
            )
        return None

    def publish(self, request: PublishRequest, context: Any) -> PublishResponse:
        problem = self._invalid(request)
        if problem is not None:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, problem)
        try:
            published = self.snapshotter.publish(
                request.topic, request.payload, dict(request.attributes)
            )
        except (WalError, RuntimeError) as e:
            _abort(context, grpc.StatusCode.UNAVAILABLE, str(e))
        return PublishResponse(message_id=published.message_id, sequence=published.sequence)

    def publish_batch(self, request: PublishBatchRequest, context: Any) -> PublishBatchResponse:
        """Events with their own ids and times (ripple's pipeline tasks), one log fsync for
        all of them; nothing of a batch with a bad event is published."""
        events: list[Publish] = []
        for item in request.events:
            problem = self._invalid(PublishRequest(topic=item.writer_id, payload=b""))
            if problem is None and len(item.event.payload) > self.max_payload_bytes:
                problem = f"payload over the limit of {self.max_payload_bytes} bytes"
            if problem is not None:
                _abort(context, grpc.StatusCode.INVALID_ARGUMENT, problem)
            event = item.event
            events.append(
                Publish(
                    item.writer_id,
                    event.payload,
                    dict(event.attributes),
                    event.event_id or None,
                    event.timestamp or None,
                )
            )
        try:
            if events:
                self.snapshotter.publish_many(events)
        except (WalError, RuntimeError) as e:
            _abort(context, grpc.StatusCode.UNAVAILABLE, str(e))
        return PublishBatchResponse(event_count=len(events))

    def publish_stream(
        self, requests: Iterator[PublishRequest], context: Any
    ) -> PublishStreamResponse:
        feed: queue.Queue[PublishRequest | _End | _Broken] = queue.Queue(_QUEUE_DEPTH)
        done = threading.Event()  # set when this handler stops taking from `feed`
        budget = _Budget(_READ_AHEAD_BYTES, done)
        reader = threading.Thread(
            target=_read, args=(requests, feed, done, budget), name="snapshotter-stream-reader"
        )
        reader.daemon = True
        reader.start()
        writers: set[str] = set()
        count = 0
        problem: tuple[Any, str] | None = None
        try:
            ended = False
            while not ended:
                batch: list[Publish] = []
                batch_bytes = 0
                item = feed.get()
                while True:
                    if isinstance(item, PublishRequest):
                        budget.release(len(item.payload))
                    if not isinstance(item, PublishRequest):
                        ended = True
                        if isinstance(item, _Broken):
                            log.info("snapshotter stream broken after %d events", count)
                        break
                    invalid = self._invalid(item)
                    if invalid is not None:
                        problem = (
                            grpc.StatusCode.INVALID_ARGUMENT,
                            f"request {count + len(batch) + 1} of the stream: {invalid}",
                        )
                        ended = True
                        break
                    batch.append(Publish(item.topic, item.payload, dict(item.attributes)))
                    batch_bytes += len(item.payload)
                    if len(batch) >= _MAX_BATCH or batch_bytes >= _READ_AHEAD_BYTES:
                        break
                    try:
                        item = feed.get_nowait()
                    except queue.Empty:
                        break
                if batch:
                    try:
                        self.snapshotter.publish_many(batch)
                    except (WalError, RuntimeError) as e:
                        problem = (grpc.StatusCode.UNAVAILABLE, str(e))
                        break
                    writers.update(p.writer_id for p in batch)
                    count += len(batch)
        finally:
            done.set()
            # the session's disconnect, however it ended: flush even a small buffer
            flushed = self.snapshotter.disconnect(writers)
        if problem is not None:
            _abort(context, *problem)
        return PublishStreamResponse(
            event_count=count, writer_ids=flushed.writer_ids, pages_written=flushed.pages_written
        )


def _abort(context: Any, code: Any, details: str) -> NoReturn:
    context.abort(code, details)  # raises
    raise AssertionError("unreachable: grpc's abort raises")


class _Budget:
    """Bytes a stream's reader may hold ahead of the publishing: `take` waits while they are
    over `limit` (a single larger request is let through alone), or until `done`."""

    def __init__(self, limit: int, done: threading.Event) -> None:
        self.limit = limit
        self.done = done
        self.used = 0
        self.cond = threading.Condition()

    def take(self, n: int) -> bool:
        with self.cond:
            while self.used and self.used + n > self.limit:
                if self.done.is_set():
                    return False
                self.cond.wait(0.1)
            self.used += n
            return True

    def release(self, n: int) -> None:
        with self.cond:
            self.used -= n
            self.cond.notify_all()


def _read(
    requests: Iterator[PublishRequest],
    feed: queue.Queue[PublishRequest | _End | _Broken],
    done: threading.Event,
    budget: _Budget,
) -> None:
    """Move a stream's requests to `feed`, then `_End` or `_Broken`, until `done`."""

    def put(item: PublishRequest | _End | _Broken) -> bool:
        while not done.is_set():
            try:
                feed.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    try:
        for request in requests:
            if not budget.take(len(request.payload)) or not put(request):
                return
    except Exception:  # grpc.RpcError when the client cancels
        put(_Broken())
    else:
        put(_End())


def parse_address(address: str) -> tuple[str, int]:
    """HOST:PORT (`[::1]:PORT` for IPv6) as (host, port), or `GrpcServerError`."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise GrpcServerError(f"gRPC address {address!r} must be HOST:PORT, e.g. 127.0.0.1:50051")
    return host, int(port)


def serve_grpc(
    snapshotter: Snapshotter,
    address: str,
    *,
    max_workers: int = 32,
    max_payload_bytes: int = MAX_PAYLOAD_BYTES,
    tls: GrpcTls | None = None,
) -> tuple[Any, int]:
    """A started gRPC server for `snapshotter` on `address` (port 0: any free port), and the
    port it is bound to; `GrpcServerError` if it cannot listen there. With `tls`, it serves
    TLS only.

    Each call or open stream holds one of `max_workers` threads while it runs."""
    parse_address(address)
    service = PublishService(snapshotter, max_payload_bytes)
    handler = grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Publish": grpc.unary_unary_rpc_method_handler(
                service.publish,
                request_deserializer=PublishRequest.FromString,
                response_serializer=PublishResponse.SerializeToString,
            ),
            "PublishBatch": grpc.unary_unary_rpc_method_handler(
                service.publish_batch,
                request_deserializer=PublishBatchRequest.FromString,
                response_serializer=PublishBatchResponse.SerializeToString,
            ),
            "PublishStream": grpc.stream_unary_rpc_method_handler(
                service.publish_stream,
                request_deserializer=PublishRequest.FromString,
                response_serializer=PublishStreamResponse.SerializeToString,
            ),
        },
    )
    server = grpc.server(
        ThreadPoolExecutor(max_workers, thread_name_prefix=f"snapshotter-{snapshotter.name}-grpc"),
        handlers=[handler],
        options=[
            ("grpc.max_receive_message_length", max_payload_bytes + _ENVELOPE_BYTES),
            ("grpc.so_reuseport", 0),  # a port in use is an error, not shared
        ],
    )
    try:
        if tls is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, tls.credentials())
    except RuntimeError:  # grpcio ≥ 1.60 raises where older versions returned 0
        port = 0
    if not port:
        server.stop(None)
        raise GrpcServerError(
            f"cannot listen for gRPC on {address}: the port is in use or the host is not "
            "an address of this machine; pass --address or set snapshotters.NAME.address "
            "to a free HOST:PORT"
        )
    server.start()
    return server, port
