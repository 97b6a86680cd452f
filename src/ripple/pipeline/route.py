"""Routing: each event to every destination of its bucket whose event types and key filters
match it. An event whose bucket has no destination at all is logged as a warning, counted
(`ripple_events_unrouted_total`) and discarded; one that no filter selects is simply not
sent (as S3 does).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ripple.events.keys import decode_key
from ripple.notifications.registry import Registry
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
    """An event on its way: the message `{"Records":[event]}` and its attributes."""
    return Delivery(
        event_id=event_id,
        event=event,
        body=orjson.dumps({"Records": [event]}),
        attributes=event_attributes(event),
        batch_id=batch_id,
    )


def route(rows: Iterable[Mapping[str, Any]], registry: Registry, batch_id: int) -> Routed:
    routed = Routed()
    for row in rows:
        routed.newest_commit_ns = max(routed.newest_commit_ns, row["commit_ns"])
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
        event: dict[str, Any] | None = None
        for destination in destinations:
            if not destination.wants(row["event_name"], row["key"]):
                continue
            if event is None:
                event = orjson.loads(row["message"])
            message = event
            if event["s3"]["configurationId"] != destination.configuration_id:
                message = {**event, "s3": {**event["s3"]}}
                message["s3"]["configurationId"] = destination.configuration_id
            routed.by_topic.setdefault(destination.topic, []).append(
                delivery(row["event_id"], message, batch_id)
            )
            metrics.EVENTS_TRIGGERED.inc()
    return routed
