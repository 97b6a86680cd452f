"""Routing a batch's event rows: destinations chosen by event type and key filters, the
notification's configuration id written into the message, attributes from the columns."""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from ripple.notifications.registry import Destination, Registry
from ripple.pipeline import metrics
from ripple.pipeline.route import event_attributes, route

PROJECT = uuid.uuid4()


def row(key: str, name: str = "ObjectCreated:Put", version_id: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"key": key.replace(" ", "+"), "sequencer": "0A"}
    if version_id:
        obj["versionId"] = version_id
    event = {
        "eventName": name,
        "s3": {"configurationId": "ObjectEvents", "object": obj, "bucket": {"name": "photos"}},
    }
    return {
        "partition": 0,
        "position": 5,
        "commit_ns": 7,
        "event_id": f"0-{key}",
        "project_id": str(PROJECT),
        "bucket": "photos",
        "key": key,
        "event_name": name,
        "sequencer": "0A",
        "version_id": version_id,
        "message": orjson.dumps(event),
    }


def test_each_matching_destination_gets_the_event_with_its_configuration_id() -> None:
    registry = Registry()
    registry.set_bucket(
        PROJECT,
        "photos",
        [
            Destination("all"),
            Destination("jpegs", "Jpegs", ("s3:ObjectCreated:*",), "", ".jpg"),
            Destination("removed", "Gone", ("s3:ObjectRemoved:*",)),
        ],
    )
    routed = route([row("red cat.jpg", version_id="00ff"), row("b.txt")], registry, batch_id=3)
    assert {t: [d.event_id for d in ds] for t, ds in routed.by_topic.items()} == {
        "all": ["0-red cat.jpg", "0-b.txt"],
        "jpegs": ["0-red cat.jpg"],
    }
    [jpeg] = routed.by_topic["jpegs"]
    assert jpeg.event["s3"]["configurationId"] == "Jpegs"
    assert jpeg.batch_id == 3
    first = routed.by_topic["all"][0]
    assert first.message == row("red cat.jpg", version_id="00ff")["message"]  # bytes as made
    assert orjson.loads(first.body) == {"Records": [first.event]}
    assert (
        first.attributes
        == event_attributes(first.event)
        == {
            "eventName": "ObjectCreated:Put",
            "bucket": "photos",
            "key": "red cat.jpg",
            "sequencer": "0A",
            "versionId": "00ff",
        }
    )
    assert routed.newest_commit_ns == 7


def test_a_bucket_without_destinations_is_counted_as_unrouted() -> None:
    before = metrics.EVENTS_UNROUTED._value.get()
    routed = route([row("a"), row("b")], Registry(), batch_id=1)
    assert routed.by_topic == {}
    assert routed.unrouted == 2
    assert metrics.EVENTS_UNROUTED._value.get() == before + 2


def test_s3metadata_rules_select_by_the_objects_user_metadata() -> None:
    registry = Registry()
    registry.set_bucket(
        PROJECT,
        "photos",
        [
            Destination("red", "reds", metadata=(("x-amz-meta-Color", "red"),)),
            Destination("all", "everything"),
        ],
    )
    red = {**row("a.jpg"), "metadata": orjson.dumps({"color": "red"}).decode()}
    blue = {**row("b.jpg"), "metadata": orjson.dumps({"color": "blue"}).decode()}
    unknown = {**row("c.jpg"), "metadata": None}  # a record from before the stream watched it
    routed = route([red, blue, unknown], registry, batch_id=1)
    assert [d.attributes["key"] for d in routed.by_topic["red"]] == ["a.jpg"]
    assert [d.attributes["key"] for d in routed.by_topic["all"]] == ["a.jpg", "b.jpg", "c.jpg"]
