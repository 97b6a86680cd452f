"""The committed protobuf modules match `snapshotter.proto`, and the service is publish-only."""

from __future__ import annotations

from pathlib import Path

import pytest

import ripple.snapshotter.proto as proto_package
from ripple.snapshotter.proto import snapshotter_pb2
from ripple.snapshotter.proto.__main__ import generate

PROTO_DIR = Path(proto_package.__file__).parent
SERVICE = "ripple.snapshotter.v1.PubSubBasicInterface"


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The modules protoc writes from the committed .proto, under a fresh directory."""
    root = tmp_path_factory.mktemp("generated")
    generate(root)
    return root / "ripple" / "snapshotter" / "proto"


@pytest.mark.parametrize("name", ["snapshotter_pb2.py", "snapshotter_pb2.pyi"])
def test_generated_modules_are_current(regenerated: Path, name: str) -> None:
    fresh = regenerated / name
    assert fresh.is_file(), f"protoc wrote no {name}"
    committed = (PROTO_DIR / name).read_bytes()
    assert fresh.read_bytes() == committed, "stale: run python -m ripple.snapshotter.proto"


def test_generate_writes_only_the_modules_of_the_proto(regenerated: Path) -> None:
    assert sorted(p.name for p in regenerated.iterdir()) == [
        "snapshotter_pb2.py",
        "snapshotter_pb2.pyi",
    ]


def _service():
    return snapshotter_pb2.DESCRIPTOR.services_by_name["PubSubBasicInterface"]


def test_service_is_publish_only() -> None:
    service = _service()
    assert service.full_name == SERVICE
    assert sorted(m.name for m in service.methods) == ["Publish", "PublishBatch", "PublishStream"]
    assert "Subscribe" not in service.methods_by_name


def test_publish_is_unary() -> None:
    publish = _service().methods_by_name["Publish"]
    assert not publish.client_streaming
    assert not publish.server_streaming
    assert publish.input_type.full_name == "ripple.snapshotter.v1.PublishRequest"
    assert publish.output_type.full_name == "ripple.snapshotter.v1.PublishResponse"


def test_publish_stream_is_client_streaming() -> None:
    stream = _service().methods_by_name["PublishStream"]
    assert stream.client_streaming
    assert not stream.server_streaming
    assert stream.input_type.full_name == "ripple.snapshotter.v1.PublishRequest"
    assert stream.output_type.full_name == "ripple.snapshotter.v1.PublishStreamResponse"


def test_service_is_the_only_one_in_the_file() -> None:
    assert list(snapshotter_pb2.DESCRIPTOR.services_by_name) == ["PubSubBasicInterface"]
