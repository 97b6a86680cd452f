"""The snapshotter's protobuf messages (generated from `snapshotter.proto`)."""

from ripple.snapshotter.proto.snapshotter_pb2 import (
    Event,
    EventPage,
    PageMetadata,
    PublishRequest,
    PublishResponse,
    PublishStreamResponse,
    WalBatch,
    WalRecord,
)

__all__ = [
    "Event",
    "EventPage",
    "PageMetadata",
    "PublishRequest",
    "PublishResponse",
    "PublishStreamResponse",
    "WalBatch",
    "WalRecord",
]
