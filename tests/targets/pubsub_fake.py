"""A loopback stand-in for Google Pub/Sub's Publisher service, for the Pub/Sub target tests.

No Pub/Sub emulator can be installed here (Google's is a Java program that comes with the
Cloud SDK), so this gRPC server on 127.0.0.1 speaks the Publisher wire protocol in its place:
`google.pubsub.v1.Publisher/Publish`, with the request and response messages of the
proto-plus types that google-cloud-pubsub ships (`google.pubsub_v1.types`). The package has
no `*_pb2_grpc` servicer, so the method is registered with a generic handler.

It records every message it receives (topic, data, attributes, ordering key) and can be told
to fail the next N calls with a given gRPC status code.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import grpc
from google.pubsub_v1.types import PublishRequest, PublishResponse

SERVICE = "google.pubsub.v1.Publisher"


@dataclass(frozen=True)
class Received:
    topic: str
    data: bytes
    attributes: dict[str, str]
    ordering_key: str
    message_id: str


class FakePublisher:
    """`with FakePublisher() as fake:` serves on `fake.endpoint` ("127.0.0.1:<port>"), and
    on the Unix socket `unix` too when one is given."""

    def __init__(self, unix: str | None = None) -> None:
        self.messages: list[Received] = []
        self.calls = 0  # Publish RPCs received, failed ones included
        self._failures: list[tuple[grpc.StatusCode, str]] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server = grpc.server(ThreadPoolExecutor(max_workers=8))
        handler = grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "Publish": grpc.unary_unary_rpc_method_handler(
                    self._publish,
                    request_deserializer=PublishRequest.deserialize,
                    response_serializer=PublishResponse.serialize,
                )
            },
        )
        self._server.add_generic_rpc_handlers((handler,))
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"127.0.0.1:{self.port}"
        if unix is not None:
            self._server.add_insecure_port(f"unix:{unix}")

    def __enter__(self) -> FakePublisher:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(grace=None)

    def fail_next(self, n: int, code: grpc.StatusCode, details: str = "injected failure") -> None:
        """Answer the next `n` Publish calls with `code` (their messages are not recorded)."""
        with self._lock:
            self._failures.extend([(code, details)] * n)

    def _publish(self, request: PublishRequest, context: grpc.ServicerContext) -> PublishResponse:
        with self._lock:
            self.calls += 1
            failure = self._failures.pop(0) if self._failures else None
            if failure is None:
                ids = [str(next(self._ids)) for _ in request.messages]
                self.messages.extend(
                    Received(
                        topic=request.topic,
                        data=bytes(m.data),
                        attributes=dict(m.attributes),
                        ordering_key=m.ordering_key,
                        message_id=message_id,
                    )
                    for m, message_id in zip(request.messages, ids, strict=True)
                )
        if failure is not None:
            context.abort(*failure)
        return PublishResponse(message_ids=ids)
