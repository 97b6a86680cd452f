"""The snapshotter's protobuf messages (generated from `snapshotter.proto`)."""

from ripple.snapshotter.proto.snapshotter_pb2 import (
    BatchEvent,
    Event,
    EventPage,
    PageMetadata,
    PublishBatchRequest,
    PublishBatchResponse,
    PublishRequest,
    PublishResponse,
    PublishStreamResponse,
    WalBatch,
    WalRecord,
)

__all__ = [
    "BatchEvent",
    "Event",
    "EventPage",
    "PageMetadata",
    "PublishBatchRequest",
    "PublishBatchResponse",
    "PublishRequest",
    "PublishResponse",
    "PublishStreamResponse",
    "WalBatch",
    "WalRecord",
]
