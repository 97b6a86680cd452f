"""The gRPC publish service and its client, over a real snapshotter in the test's directory:
what is acknowledged ends up in pages, a stream's end (or its cancellation) is a disconnect,
and bad requests or a closed snapshotter are the status codes the service promises."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest

from ripple.snapshotter.client import SnapshotterClient, SnapshotterClientError
from ripple.snapshotter.grpc_server import SERVICE, GrpcServerError, _Budget, serve_grpc
from ripple.snapshotter.pages import decode
from ripple.snapshotter.proto import EventPage, PublishRequest, PublishStreamResponse
from ripple.snapshotter.service import Publish, Published, Snapshotter
from ripple.snapshotter.settings import SnapshotterSettings
from tests.waiting import wait_for


def stored_pages(settings: SnapshotterSettings) -> list[EventPage]:
    """Every page the filesystem storage holds (temporary files skipped), decoded."""
    files = sorted(
        p for p in settings.pages_path.rglob("*") if p.is_file() and not p.name.startswith(".tmp-")
    )
    return [decode(p.read_bytes()) for p in files]


def stored_payloads(settings: SnapshotterSettings, writer: str) -> list[bytes]:
    pages = [p for p in stored_pages(settings) if p.metadata.writer_id == writer]
    pages.sort(key=lambda p: p.metadata.page_sequence)
    return [e.payload for p in pages for e in p.events]


@pytest.fixture
def snapshotter(snapshot_settings: SnapshotterSettings) -> Iterator[Snapshotter]:
    with Snapshotter.open(snapshot_settings) as snapshotter:
        yield snapshotter


@pytest.fixture
def server(snapshotter: Snapshotter) -> Iterator[tuple[Any, int]]:
    server, port = serve_grpc(snapshotter, "127.0.0.1:0")
    yield server, port
    server.stop(None)


@pytest.fixture
def client(server: tuple[Any, int]) -> Iterator[SnapshotterClient]:
    with SnapshotterClient(f"127.0.0.1:{server[1]}", timeout=30) as client:
        yield client


def test_a_published_event_is_in_a_page_after_a_flush(
    client: SnapshotterClient, snapshotter: Snapshotter, snapshot_settings: SnapshotterSettings
) -> None:
    published = [
        client.publish("w", f"event {i}".encode(), {"type": "click", "n": str(i)}) for i in range(5)
    ]

    assert stored_pages(snapshot_settings) == []  # acknowledged, still buffered
    assert snapshotter.flush() == 1
    [page] = stored_pages(snapshot_settings)
    assert page.metadata.writer_id == "w"
    assert [e.payload for e in page.events] == [f"event {i}".encode() for i in range(5)]
    assert [dict(e.attributes) for e in page.events] == [
        {"type": "click", "n": str(i)} for i in range(5)
    ]
    assert [p.sequence for p in published] == [0, 1, 2, 3, 4]
    assert [e.sequence for e in page.events] == [0, 1, 2, 3, 4]
    assert len({p.message_id for p in published}) == 5
    assert [e.event_id for e in page.events] == [p.message_id for p in published]


def test_message_ids_stay_unique_across_pages(
    client: SnapshotterClient, snapshotter: Snapshotter
) -> None:
    first = [client.publish("w", b"a") for _ in range(3)]
    snapshotter.flush()
    second = [client.publish("w", b"b") for _ in range(3)]

    assert [p.sequence for p in second] == [0, 1, 2]  # a new page starts again at 0
    assert len({p.message_id for p in first + second}) == 6


def test_a_batch_keeps_its_event_ids_and_times_and_lands_whole(
    client: SnapshotterClient, snapshotter: Snapshotter, snapshot_settings: SnapshotterSettings
) -> None:
    """PublishBatch, as the pipeline's workers archive through the driver: each event keeps
    the id and time it was given, writers apart; a batch with one bad event publishes none
    of it."""
    events = [
        Publish("photos", b"put a", {"eventName": "ObjectCreated:Put"}, "0-A", 1_700_000_000_000),
        Publish("logs", b"put b", None, "3-B", 1_700_000_000_500),
        Publish("photos", b"del a", None, "0-C", 1_700_000_001_000),
    ]
    assert client.publish_batch(events) == 3
    with pytest.raises(SnapshotterClientError) as failure:
        client.publish_batch([Publish("photos", b"lost", None, "0-D", 1), Publish("", b"x")])
    assert failure.value.code == "INVALID_ARGUMENT"

    snapshotter.flush()
    pages = {p.metadata.writer_id: p for p in stored_pages(snapshot_settings)}
    assert [(e.event_id, e.timestamp, e.payload) for e in pages["photos"].events] == [
        ("0-A", 1_700_000_000_000, b"put a"),
        ("0-C", 1_700_000_001_000, b"del a"),
    ]
    assert dict(pages["photos"].events[0].attributes) == {"eventName": "ObjectCreated:Put"}
    assert [e.event_id for e in pages["logs"].events] == ["3-B"]


def test_an_empty_topic_is_invalid_argument(client: SnapshotterClient) -> None:
    with pytest.raises(SnapshotterClientError) as failure:
        client.publish("", b"payload")
    assert failure.value.code == "INVALID_ARGUMENT"
    assert str(failure.value) == "INVALID_ARGUMENT: topic (the writer id) must not be empty"


def test_a_payload_over_the_limit_is_invalid_argument(snapshotter: Snapshotter) -> None:
    server, port = serve_grpc(snapshotter, "127.0.0.1:0", max_payload_bytes=1024)
    try:
        with SnapshotterClient(f"127.0.0.1:{port}") as client:
            assert client.publish("w", b"x" * 1024).sequence == 0
            with pytest.raises(SnapshotterClientError) as failure:
                client.publish("w", b"x" * 1025)
            assert failure.value.code == "INVALID_ARGUMENT"
            assert "1025 bytes is over the limit of 1024 bytes" in str(failure.value)
            # far past the limit, gRPC refuses the message before the service sees it
            with pytest.raises(SnapshotterClientError) as failure:
                client.publish("w", b"x" * (2 * 1024 * 1024))
            assert failure.value.code == "RESOURCE_EXHAUSTED"
    finally:
        server.stop(None)
    assert snapshotter.buffers_health()["total_buffered_events"] == 1


def test_a_stream_end_stores_its_pages_before_the_response(
    client: SnapshotterClient, snapshotter: Snapshotter, snapshot_settings: SnapshotterSettings
) -> None:
    assert snapshot_settings.max_events == 1000  # no trigger but the disconnect
    assert snapshot_settings.max_age_seconds == 300
    with client.session() as session:
        for i in range(3):
            session.publish("w1", f"one {i}".encode())
        session.publish("w2", b"two", {"k": "v"})
        # it streams: the snapshotter has the events while the session is still open
        wait_for(
            lambda: snapshotter.buffers_health()["total_buffered_events"] == 4,
            "the streamed events in the buffers",
        )
        assert stored_pages(snapshot_settings) == []
        flushed = session.close()

    # at response time, no flush and no waiting: the pages are in storage
    assert stored_payloads(snapshot_settings, "w1") == [b"one 0", b"one 1", b"one 2"]
    assert stored_payloads(snapshot_settings, "w2") == [b"two"]
    assert flushed.writer_ids == ["w1", "w2"]
    assert flushed.pages_written == 2
    assert session.event_count == 4
    assert snapshotter.buffers_health()["active_writers"] == 0


def test_a_stream_leaves_other_writers_buffered(
    client: SnapshotterClient, snapshotter: Snapshotter, snapshot_settings: SnapshotterSettings
) -> None:
    client.publish("other", b"unary")
    with client.session() as session:
        session.publish("mine", b"streamed")
    assert session.close().writer_ids == ["mine"]  # closing again answers the same

    assert stored_payloads(snapshot_settings, "mine") == [b"streamed"]
    assert stored_payloads(snapshot_settings, "other") == []
    assert snapshotter.buffers_health()["active_writers"] == 1


def test_a_cancelled_stream_still_gets_its_events_into_a_page(
    client: SnapshotterClient, snapshotter: Snapshotter, snapshot_settings: SnapshotterSettings
) -> None:
    session = client.session()
    for i in range(3):
        session.publish("w", f"event {i}".encode())
    wait_for(
        lambda: snapshotter.buffers_health()["total_buffered_events"] == 3,
        "the streamed events in the buffers",
    )
    session.cancel()

    wait_for(
        lambda: stored_payloads(snapshot_settings, "w") == [b"event 0", b"event 1", b"event 2"],
        "the cancelled session's page in storage",
    )
    with pytest.raises(SnapshotterClientError, match=r"^CANCELLED"):
        session.close()


def test_a_stream_broken_by_an_exception_in_the_with_is_flushed(
    client: SnapshotterClient, snapshotter: Snapshotter, snapshot_settings: SnapshotterSettings
) -> None:
    def fail_mid_session() -> None:
        with client.session() as session:
            session.publish("w", b"before the error")
            wait_for(lambda: snapshotter.buffers_health()["total_buffered_events"] == 1)
            raise KeyError("the application failed")

    with pytest.raises(KeyError):
        fail_mid_session()

    wait_for(
        lambda: stored_payloads(snapshot_settings, "w") == [b"before the error"],
        "the broken session's page in storage",
    )


def test_an_invalid_request_ends_the_stream_but_flushes_what_came_before(
    client: SnapshotterClient, snapshot_settings: SnapshotterSettings
) -> None:
    session = client.session()
    session.publish("w", b"good")
    session.publish("", b"bad")
    with pytest.raises(SnapshotterClientError) as failure:
        session.close()
    assert failure.value.code == "INVALID_ARGUMENT"
    assert "request 2 of the stream: topic (the writer id) must not be empty" in str(failure.value)
    assert stored_payloads(snapshot_settings, "w") == [b"good"]


def test_publishing_after_close_is_unavailable(
    client: SnapshotterClient, snapshotter: Snapshotter, snapshot_settings: SnapshotterSettings
) -> None:
    client.publish("w", b"before")
    snapshotter.close()
    assert stored_payloads(snapshot_settings, "w") == [b"before"]  # close flushed it

    with pytest.raises(SnapshotterClientError) as failure:
        client.publish("w", b"after")
    assert failure.value.code == "UNAVAILABLE"
    assert "closed" in str(failure.value)
    session = client.session()
    session.publish("w", b"streamed after")
    with pytest.raises(SnapshotterClientError, match=r"^UNAVAILABLE: .*closed"):
        session.close()


def test_the_wire_format_is_the_protos_service(server: tuple[Any, int]) -> None:
    """A client that knows only the .proto (method paths and messages) can call it."""
    with grpc.insecure_channel(f"127.0.0.1:{server[1]}") as channel:
        stream = channel.stream_unary(
            f"/{SERVICE}/PublishStream",
            request_serializer=PublishRequest.SerializeToString,
            response_deserializer=PublishStreamResponse.FromString,
        )
        requests = [PublishRequest(topic=f"w{i % 2}", payload=b"p") for i in range(5)]
        response = stream(iter(requests), timeout=30)
    assert response.event_count == 5
    assert list(response.writer_ids) == ["w0", "w1"]
    assert response.pages_written == 2


def test_a_port_in_use_is_a_one_line_error(snapshotter: Snapshotter) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(GrpcServerError) as failure:
            serve_grpc(snapshotter, f"127.0.0.1:{port}")
    message = str(failure.value)
    assert f"127.0.0.1:{port}" in message
    assert "\n" not in message
    with pytest.raises(GrpcServerError, match="must be HOST:PORT"):
        serve_grpc(snapshotter, "no-port")


def test_no_server_is_a_one_line_unavailable() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with (
        SnapshotterClient(f"127.0.0.1:{port}", timeout=10) as client,
        pytest.raises(SnapshotterClientError) as failure,
    ):
        client.publish("w", b"nobody listens")
    assert failure.value.code == "UNAVAILABLE"
    assert "\n" not in str(failure.value)


def test_published_is_the_service_type(client: SnapshotterClient) -> None:
    published = client.publish("w", b"x")
    assert isinstance(published, Published)
    assert published._asdict() == {"message_id": "0-0", "sequence": 0}


def test_a_stream_reads_ahead_a_bounded_number_of_bytes() -> None:
    done = threading.Event()
    budget = _Budget(100, done)
    assert budget.take(60)
    taken: list[bool] = []
    reader = threading.Thread(target=lambda: taken.append(budget.take(60)))
    reader.start()
    reader.join(0.2)
    assert reader.is_alive()  # 120 bytes would be over the 100 allowed: it waits
    budget.release(60)
    reader.join(5)
    assert taken == [True]
    budget.release(60)
    assert budget.take(1000)  # one larger request alone is let through
    stuck = threading.Thread(target=lambda: taken.append(budget.take(1)))
    stuck.start()
    done.set()  # the handler stopped: the reader gives up instead of waiting forever
    stuck.join(5)
    assert taken == [True, False]
