"""Routing: each event to every destination of its bucket whose event types and key,
metadata and tag filters match it. An event whose bucket has no destination at all is logged
as a warning, counted (`ripple_events_unrouted_total`) and discarded; one that no filter
selects is simply not sent (as S3 does).

Bucket events (`BucketCreated:*`, `BucketRemoved:*`) go to the project-wide destinations of
their bucket's project (topics with `project-events`); without one they are dropped quietly:
they are opt-in, not unrouted.

A rename's events come both ways (`EventRecord.rename`): each destination gets those of its
topic's `rename-events` (`s3`: removed + created per key; `single`: one `ObjectRenamed:Rename`).

A destination whose topic sets `include-tags` / `include-metadata` gets its events with the
object's tags and user metadata added under `s3.object`, as another object store sends them:

    "tags": [{"key": "project", "val": "x"}],
    "metadata": [{"key": "x-amz-meta-camera", "val": "x100v"}]

each sorted by key; `[]` when the object has none, left out when the change record does not
say (the stream did not watch the column). They are added here, before delivery, so retries,
dead letters and pull subscriptions hold the same message.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ripple.events.buckets import is_bucket_event
from ripple.events.keys import decode_key
from ripple.notifications.registry import PROJECT_WIDE, Registry
from ripple.pipeline import metrics
from ripple.targets.base import Delivery

log = logging.getLogger(__name__)


@dataclass
class Routed:
    """One batch's deliveries per topic, and what had nowhere to go."""

    by_topic: dict[str, list[Delivery]] = field(default_factory=dict)
    unrouted: int = 0
    newest_commit_ns: int = 0


def event_attributes(event: Mapping[str, Any]) -> dict[str, str]:
    """Message attributes: what a subscriber filters on without parsing the body."""
    obj = event["s3"]["object"]
    attrs = {
        "eventName": event["eventName"],
        "bucket": event["s3"]["bucket"]["name"],
        "key": decode_key(obj["key"]),
        "sequencer": obj["sequencer"],
    }
    if obj.get("versionId"):
        attrs["versionId"] = obj["versionId"]
    return attrs


def delivery(event_id: str, event: Mapping[str, Any], batch_id: int) -> Delivery:
    """A delivery of an event given as a mapping (a queued or replayed one)."""
    return Delivery.of(event_id, event, event_attributes(event), batch_id)


def _attributes(row: Mapping[str, Any]) -> dict[str, str]:
    """`event_attributes` from the transform's columns, without parsing the message."""
    attrs = {
        "eventName": row["event_name"],
        "bucket": row["bucket"],
        "key": row["key"],
        "sequencer": row["sequencer"],
    }
    if row.get("version_id"):
        attrs["versionId"] = row["version_id"]
    return attrs


@functools.lru_cache(maxsize=256)
def _configuration_member(configuration_id: str) -> bytes:
    return b'"configurationId":' + orjson.dumps(configuration_id)


def _configured(message: bytes, configuration_id: str) -> bytes:
    """The message with `s3.configurationId` set to the notification's id. Only a real key
    can read `"configurationId":` in JSON (quotes inside strings are escaped), so when the
    message already says it, the bytes are used as they are."""
    if _configuration_member(configuration_id) in message:
        return message
    event = orjson.loads(message)
    event["s3"]["configurationId"] = configuration_id
    return orjson.dumps(event)


def with_object_data(
    message: bytes, metadata: Mapping[str, str] | None, tags: Mapping[str, str] | None
) -> bytes:
    """The event with `s3.object.metadata` (names with `x-amz-meta-`) and `s3.object.tags`
    added, each a list of `{"key", "val"}` sorted by key; one that is None is left out."""
    if metadata is None and tags is None:
        return message
    event = orjson.loads(message)
    obj = event["s3"]["object"]
    if metadata is not None:
        obj["metadata"] = [
            {"key": f"x-amz-meta-{name}", "val": value} for name, value in sorted(metadata.items())
        ]
    if tags is not None:
        obj["tags"] = [{"key": key, "val": value} for key, value in sorted(tags.items())]
    return orjson.dumps(event)


def route(rows: Iterable[Mapping[str, Any]], registry: Registry, batch_id: int) -> Routed:
    routed = Routed()
    for row in rows:
        routed.newest_commit_ns = max(routed.newest_commit_ns, row["commit_ns"])
        if is_bucket_event(row["event_name"]):  # only for projects that asked for them
            destinations = registry.destinations(uuid.UUID(row["project_id"]), PROJECT_WIDE)
            if not destinations:
                continue
        else:
            destinations = registry.destinations(uuid.UUID(row["project_id"]), row["bucket"])
        if not destinations:
            routed.unrouted += 1
            metrics.EVENTS_UNROUTED.inc()
            log.warning(
                "no destination for bucket %s key %s: event %s discarded",
                row["bucket"],
                row["key"],
                row["event_id"],
            )
            continue
        attributes: dict[str, str] | None = None
        metadata: dict[str, str] | None = None
        tags: dict[str, str] | None = None
        for destination in destinations:
            needs_metadata = destination.metadata or destination.include_metadata
            if needs_metadata and metadata is None and row.get("metadata"):
                metadata = orjson.loads(row["metadata"])
            if (destination.tags or destination.include_tags) and tags is None and row.get("tags"):
                tags = orjson.loads(row["tags"])
            rename = row.get("rename")
            if rename is not None and rename != destination.rename_events:
                continue  # the other way of telling this rename
            if not destination.wants(row["event_name"], row["key"], metadata, tags):
                continue
            if attributes is None:
                attributes = _attributes(row)
            message = _configured(row["message"], destination.configuration_id)
            if destination.include_metadata or destination.include_tags:
                message = with_object_data(
                    message,
                    metadata if destination.include_metadata else None,
                    tags if destination.include_tags else None,
                )
            routed.by_topic.setdefault(destination.topic, []).append(
                Delivery(row["event_id"], message, attributes, batch_id)
            )
            metrics.EVENTS_TRIGGERED.inc()
    return routed
