"""A client of the snapshotter's gRPC service (`ripple.snapshotter.grpc_server`).

`SnapshotterClient.publish` sends one event and returns once the snapshotter has it in its
write-ahead log. `SnapshotterClient.session()` opens a `PublishStream`: each
`ClientSession.publish` goes out on the stream at once (gRPC sends it from its own thread),
and `close()` ends the stream — the session's disconnect — returning once the snapshotter
has stored the pages of every writer the session published to. Every gRPC failure is a
`SnapshotterClientError` whose message is one line: the status code's name, then what the
server (or gRPC) said. `SnapshotterClient.of(settings)` connects as a snapshotter's settings
say: over TLS when its server has a certificate or the client has TLS settings.
"""

from __future__ import annotations

import queue
import ssl
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import grpc  # type: ignore[import-untyped]

from ripple.snapshotter.grpc_server import SERVICE
from ripple.snapshotter.proto import (
    BatchEvent,
    Event,
    PublishBatchRequest,
    PublishBatchResponse,
    PublishRequest,
    PublishResponse,
    PublishStreamResponse,
)
from ripple.snapshotter.service import Flushed, Publish, Published
from ripple.snapshotter.settings import SnapshotterSettings
from ripple.snapshotter.tls import read_pem
from ripple.tls import TlsError

__all__ = ["ClientSession", "SnapshotterClient", "SnapshotterClientError", "channel_credentials"]


class SnapshotterClientError(Exception):
    """A call failed; `code` is the gRPC status code's name (e.g. "UNAVAILABLE")."""

    def __init__(self, code: str, details: str) -> None:
        lines = details.strip().splitlines()
        self.code = code
        self.details = lines[0] if lines else ""
        super().__init__(f"{code}: {self.details}" if self.details else code)


def _error(e: Any) -> SnapshotterClientError:
    """A `grpc.RpcError` (which is also a `grpc.Call`) as a `SnapshotterClientError`."""
    code = e.code() if hasattr(e, "code") else None
    details = e.details() if hasattr(e, "details") else None
    return SnapshotterClientError(
        code.name if code is not None else "UNKNOWN", details or str(e) or type(e).__name__
    )


def channel_credentials(settings: SnapshotterSettings) -> Any | None:
    """What a client of the snapshotter `settings` describe connects with: None for plain
    text; else TLS trusting `tls-ca` (default: the system's roots), showing `tls-client-cert`
    and its key when set. `TlsError` naming the setting whose file cannot be used."""
    if not settings.client_tls:
        return None
    ca = settings.tls_ca
    roots = None if ca is None else read_pem(ca, settings.setting("tls-ca"), authorities=True)
    cert, key = settings.tls_client_cert, settings.tls_client_key
    if cert is None or key is None:
        return grpc.ssl_channel_credentials(root_certificates=roots)
    names = settings.setting("tls-client-cert"), settings.setting("tls-client-key")
    chain, private_key = read_pem(cert, names[0]), read_pem(key, names[1])
    try:  # a key that is not the certificate's fails here, not as a failed handshake
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(cert, key)
    except ssl.SSLError as e:
        raise TlsError(
            f"cannot use {names[0]} {str(cert)!r} with {names[1]} {str(key)!r}: "
            f"{e.reason or e} (PEM files, the key matching the certificate)"
        ) from None
    return grpc.ssl_channel_credentials(
        root_certificates=roots, private_key=private_key, certificate_chain=chain
    )


class SnapshotterClient:
    """A channel to the snapshotter at `address` (HOST:PORT); `close()` or `with` ends it.
    With `credentials` (`channel_credentials`), over TLS.

    `timeout` (seconds) bounds each `publish`; `None` waits as long as it takes."""

    @classmethod
    def of(
        cls, settings: SnapshotterSettings, address: str | None = None, timeout: float | None = 30.0
    ) -> SnapshotterClient:
        """A client of the snapshotter `settings` describe, at `address` (default: its
        `address`), over TLS when they say so; `TlsError` for a file it cannot use."""
        return cls(address or settings.address, timeout, credentials=channel_credentials(settings))

    def __init__(
        self, address: str, timeout: float | None = 30.0, *, credentials: Any | None = None
    ) -> None:
        self.address = address
        self.timeout = timeout
        self._channel = (
            grpc.insecure_channel(address)
            if credentials is None
            else grpc.secure_channel(address, credentials)
        )
        self._publish = self._channel.unary_unary(
            f"/{SERVICE}/Publish",
            request_serializer=PublishRequest.SerializeToString,
            response_deserializer=PublishResponse.FromString,
        )
        self._publish_batch = self._channel.unary_unary(
            f"/{SERVICE}/PublishBatch",
            request_serializer=PublishBatchRequest.SerializeToString,
            response_deserializer=PublishBatchResponse.FromString,
        )
        self._publish_stream = self._channel.stream_unary(
            f"/{SERVICE}/PublishStream",
            request_serializer=PublishRequest.SerializeToString,
            response_deserializer=PublishStreamResponse.FromString,
        )

    def publish(
        self, topic: str, payload: bytes, attributes: Mapping[str, str] | None = None
    ) -> Published:
        """Publish one event to writer `topic`; returns once it is in the write-ahead log."""
        request = PublishRequest(topic=topic, payload=payload, attributes=attributes)
        try:
            response = self._publish(request, timeout=self.timeout)
        except grpc.RpcError as e:
            raise _error(e) from None
        return Published(response.message_id, response.sequence)

    def publish_batch(self, events: Sequence[Publish]) -> int:
        """Publish events with their own ids and times (ripple's `PublishBatch`); returns
        once all are in the write-ahead log, with how many there were."""
        request = PublishBatchRequest(
            events=[
                BatchEvent(
                    writer_id=e.writer_id,
                    event=Event(
                        event_id=e.event_id or "",
                        timestamp=e.timestamp or 0,
                        payload=e.payload,
                        attributes=dict(e.attributes or {}),
                    ),
                )
                for e in events
            ]
        )
        try:
            response = self._publish_batch(request, timeout=self.timeout)
        except grpc.RpcError as e:
            raise _error(e) from None
        return int(response.event_count)

    def session(self) -> ClientSession:
        """A `PublishStream` session, open until `close()` (or the end of the `with`)."""
        return ClientSession(self._publish_stream)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> SnapshotterClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


_END = object()


class ClientSession:
    """One `PublishStream`. `publish` queues an event that gRPC sends right away; `close`
    ends the stream and waits for the snapshotter's flush; `cancel` abandons it (the
    snapshotter still flushes what it received). Leaving a `with` by an exception cancels."""

    def __init__(self, stream_unary: Any) -> None:
        self._queue: queue.Queue[object] = queue.Queue()
        self._future = stream_unary.future(self._requests())
        self._closed = False
        self.event_count: int | None = None  # the server's count, once closed

    def _requests(self) -> Iterator[PublishRequest]:
        while (item := self._queue.get()) is not _END:
            if not isinstance(item, PublishRequest):
                raise TypeError(f"not a PublishRequest: {type(item).__name__}")
            yield item

    def publish(
        self, topic: str, payload: bytes, attributes: Mapping[str, str] | None = None
    ) -> None:
        """Send one event on the stream. Events are acknowledged together by `close()`; if
        the stream already failed, `SnapshotterClientError` says why."""
        if self._closed:
            raise SnapshotterClientError("FAILED_PRECONDITION", "the session is closed")
        if self._future.done():  # the server ended the stream early (e.g. a bad request)
            self.close()  # raises what it said
            raise SnapshotterClientError("FAILED_PRECONDITION", "the server ended the stream")
        self._queue.put(PublishRequest(topic=topic, payload=payload, attributes=attributes))

    def close(self, timeout: float | None = None) -> Flushed:
        """End the stream; returns once the snapshotter has stored the session's pages."""
        if not self._closed:
            self._closed = True
            self._queue.put(_END)
        try:
            response = self._future.result(timeout=timeout)
        except grpc.RpcError as e:
            raise _error(e) from None
        except grpc.FutureCancelledError:
            raise SnapshotterClientError("CANCELLED", "the session was cancelled") from None
        except grpc.FutureTimeoutError:
            raise SnapshotterClientError(
                "DEADLINE_EXCEEDED", f"no answer to the session's end within {timeout} s"
            ) from None
        self.event_count = response.event_count
        return Flushed(list(response.writer_ids), response.pages_written)

    def cancel(self) -> None:
        """Abandon the stream at once; the snapshotter flushes whatever it received."""
        self._closed = True
        self._future.cancel()
        self._queue.put(_END)  # let gRPC's request thread finish

    def __enter__(self) -> ClientSession:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.cancel()
