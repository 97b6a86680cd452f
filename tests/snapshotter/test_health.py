"""The health and metrics server, over HTTP, of a real snapshotter in the test's directory:
the fields the RFC's health checks list, values that follow what was published, 503 when
a backend fails, and the Prometheus metrics the RFC names."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ripple.snapshotter.health import HealthServer, HealthServerError
from ripple.snapshotter.service import Snapshotter
from ripple.snapshotter.settings import SnapshotterSettings

BUFFER_FIELDS = {
    "active_writers",
    "total_buffered_events",
    "total_buffer_size_bytes",
    "oldest_buffer_age_seconds",
    "writers_exceeding_age_limit",
}
STORAGE_FIELDS = {
    "backend",
    "status",
    "last_write_success",
    "write_success_rate",
    "avg_write_latency_ms",
}
INDEX_FIELDS = {
    "backend",
    "status",
    "last_publish_success",
    "publish_success_rate",
    "index_entry_count",
}


def settings_in(directory: Path, **values: object) -> SnapshotterSettings:
    """A snapshotter of its own name, so the metrics of other tests' snapshotters (same
    process, same registry) never mix with its own."""
    return SnapshotterSettings.embedded(
        directory,
        f"health-{uuid.uuid4().hex[:8]}",
        retry_base_seconds=0.01,
        retry_max_seconds=0.02,
        max_retries=2,
        **values,
    )


@pytest.fixture
def snapshotter(tmp_path: Path) -> Iterator[Snapshotter]:
    with Snapshotter.open(settings_in(tmp_path)) as snapshotter:
        yield snapshotter


@pytest.fixture
def http(snapshotter: Snapshotter) -> Iterator[httpx.Client]:
    with (
        HealthServer(snapshotter, "127.0.0.1:0") as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        yield client


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples called `name` in a Prometheus text exposition, by sorted labels."""
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def test_buffers_follow_what_is_published(http: httpx.Client, snapshotter: Snapshotter) -> None:
    empty = http.get("/health/buffers")
    assert empty.status_code == 200
    assert empty.json().keys() >= BUFFER_FIELDS
    assert {k: empty.json()[k] for k in BUFFER_FIELDS} == dict.fromkeys(BUFFER_FIELDS, 0)

    snapshotter.publish("w", b"x" * 100)
    snapshotter.publish("w", b"y" * 100)
    snapshotter.publish("v", b"z")
    body = http.get("/health/buffers").json()
    assert body["active_writers"] == 2
    assert body["total_buffered_events"] == 3
    assert body["total_buffer_size_bytes"] > 201  # the payloads and their event envelopes
    assert body["oldest_buffer_age_seconds"] >= 0
    assert body["writers_exceeding_age_limit"] == 0

    snapshotter.flush()
    assert http.get("/health/buffers").json()["total_buffered_events"] == 0


def test_storage_and_index_report_the_writes(http: httpx.Client, snapshotter: Snapshotter) -> None:
    storage = http.get("/health/storage").json()
    index = http.get("/health/index").json()
    assert storage.keys() >= STORAGE_FIELDS
    assert index.keys() >= INDEX_FIELDS
    assert storage["backend"] == "filesystem"
    assert index["backend"] == "sqlite"
    assert storage["last_write_success"] is None
    assert index["index_entry_count"] == 0

    snapshotter.publish("w", b"event")
    assert snapshotter.flush() == 1
    storage_response = http.get("/health/storage")
    assert storage_response.status_code == 200
    storage = storage_response.json()
    assert storage["status"] == "healthy"
    assert storage["write_success_rate"] == 1.0
    assert storage["avg_write_latency_ms"] > 0
    assert datetime.fromisoformat(storage["last_write_success"]).tzinfo is not None
    index = http.get("/health/index").json()
    assert index["status"] == "healthy"
    assert index["publish_success_rate"] == 1.0
    assert index["index_entry_count"] == 1
    assert datetime.fromisoformat(index["last_publish_success"]).tzinfo is not None


def test_health_gathers_the_three_checks(http: httpx.Client, snapshotter: Snapshotter) -> None:
    snapshotter.publish("w", b"event")
    response = http.get("/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "healthy"
    assert body["snapshotter"] == snapshotter.name
    assert body["buffers"].keys() >= BUFFER_FIELDS
    assert body["storage"].keys() >= STORAGE_FIELDS
    assert body["index"].keys() >= INDEX_FIELDS
    assert body["buffers"]["total_buffered_events"] == 1


def test_a_failing_storage_is_503(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_bytes(b"")  # pages cannot go under a file
    with (
        Snapshotter.open(settings_in(tmp_path, path=blocker)) as snapshotter,
        HealthServer(snapshotter, "127.0.0.1:0") as server,
        httpx.Client(base_url=server.url, timeout=30) as http,
    ):
        snapshotter.publish("w", b"event")
        assert snapshotter.flush() == 0  # to the dead letters

        storage = http.get("/health/storage")
        assert storage.status_code == 503
        assert storage.json()["status"] == "unhealthy"
        assert storage.json()["write_success_rate"] == 0.0
        whole = http.get("/health")
        assert whole.status_code == 503
        assert whole.json()["status"] == "unhealthy"
        assert http.get("/health/buffers").status_code == 200
        assert http.get("/health/buffers").json()["dead_letter_pages"] == 1


def test_metrics_name_the_rfcs_series(http: httpx.Client, snapshotter: Snapshotter) -> None:
    me = (("snapshotter", snapshotter.name),)
    writer = (("snapshotter", snapshotter.name), ("writer_id", "w"))
    before = http.get("/metrics")
    assert before.status_code == 200
    assert before.headers["content-type"].startswith("text/plain")
    assert writer not in samples(before.text, "snapshotter_buffer_size_bytes")

    snapshotter.publish("w", b"x" * 50)
    during = http.get("/metrics").text
    assert 'writer_id="w"' in during
    size = snapshotter.buffers_health()["total_buffer_size_bytes"]
    assert samples(during, "snapshotter_buffer_size_bytes")[writer] == size
    assert samples(during, "snapshotter_buffer_event_count")[writer] == 1
    assert samples(during, "snapshotter_events_published_total")[me] == 1

    snapshotter.flush()
    after = http.get("/metrics").text
    assert samples(after, "snapshotter_page_writes_total")[me] == 1
    assert writer not in samples(after, "snapshotter_buffer_size_bytes")


def test_a_port_in_use_is_a_one_line_error(snapshotter: Snapshotter) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(HealthServerError) as failure:
            HealthServer(snapshotter, f"127.0.0.1:{port}")
    assert f"127.0.0.1:{port}" in str(failure.value)
    assert "\n" not in str(failure.value)
    with pytest.raises(HealthServerError, match="must be HOST:PORT"):
        HealthServer(snapshotter, "9102")


def test_stop_closes_the_port(snapshotter: Snapshotter) -> None:
    server = HealthServer(snapshotter, "127.0.0.1:0")
    server.start()
    assert httpx.get(f"{server.url}/health/buffers", timeout=30).status_code == 200
    server.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/health/buffers", timeout=30)
