"""Routing a batch's event rows: destinations chosen by event type and key, metadata and tag
filters, the notification's configuration id written into the message, attributes from the
columns, and the object's tags and metadata added for topics that ask for them."""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from ripple.notifications.registry import PROJECT_WIDE, Destination, Registry
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


def test_s3tags_rules_select_by_the_objects_tags() -> None:
    registry = Registry()
    registry.set_bucket(
        PROJECT,
        "photos",
        [
            Destination("prod", "prod", tags=(("env", "prod"), ("team", "ops"))),
            Destination("all", "everything"),
        ],
    )
    rows = [
        {
            **row("match.jpg"),
            "tags": orjson.dumps({"env": "prod", "team": "ops", "x": "y"}).decode(),
        },
        {**row("one-of-two.jpg"), "tags": orjson.dumps({"env": "prod"}).decode()},
        {**row("case.jpg"), "tags": orjson.dumps({"env": "Prod", "team": "ops"}).decode()},
        {**row("untagged.jpg"), "tags": "{}"},
        {**row("unknown.jpg"), "tags": None},  # a record from before the stream watched tags
    ]
    routed = route(rows, registry, batch_id=1)
    assert [d.attributes["key"] for d in routed.by_topic["prod"]] == ["match.jpg"]
    assert len(routed.by_topic["all"]) == 5
    # a destination that only filters by tags does not add them to the event
    assert routed.by_topic["prod"][0].event["s3"]["object"] == {
        "key": "match.jpg",
        "sequencer": "0A",
    }


def test_tag_and_metadata_rules_both_hold() -> None:
    registry = Registry()
    registry.set_bucket(
        PROJECT,
        "photos",
        [Destination("both", "both", metadata=(("color", "red"),), tags=(("env", "prod"),))],
    )
    red = orjson.dumps({"color": "red"}).decode()
    prod = orjson.dumps({"env": "prod"}).decode()
    rows = [
        {**row("yes"), "metadata": red, "tags": prod},
        {**row("no-tag"), "metadata": red, "tags": "{}"},
        {**row("no-meta"), "metadata": "{}", "tags": prod},
    ]
    routed = route(rows, registry, batch_id=1)
    assert [d.attributes["key"] for d in routed.by_topic["both"]] == ["yes"]


def test_topics_that_ask_get_tags_and_metadata_in_the_event() -> None:
    registry = Registry()
    registry.set_bucket(
        PROJECT,
        "photos",
        [
            Destination("plain", "plain"),
            Destination("tags", "tags", include_tags=True),
            Destination("both", "both", include_tags=True, include_metadata=True),
        ],
    )
    event = {
        **row("a b.jpg", version_id="00ff"),
        "metadata": orjson.dumps({"camera": "x100v", "album": "2026"}).decode(),
        "tags": orjson.dumps({"k": "v", "env": "prod"}).decode(),
    }
    routed = route([event], registry, batch_id=1)
    [plain], [tags], [both] = (routed.by_topic[t] for t in ("plain", "tags", "both"))
    obj = {"key": "a+b.jpg", "sequencer": "0A", "versionId": "00ff"}
    assert plain.event["s3"]["object"] == obj
    assert tags.event["s3"]["object"] == {
        **obj,
        "tags": [{"key": "env", "val": "prod"}, {"key": "k", "val": "v"}],
    }
    assert tags.event["s3"]["configurationId"] == "tags"
    assert orjson.loads(both.body) == {
        "Records": [
            {
                "eventName": "ObjectCreated:Put",
                "s3": {
                    "configurationId": "both",
                    "bucket": {"name": "photos"},
                    "object": {
                        "key": "a+b.jpg",
                        "sequencer": "0A",
                        "versionId": "00ff",
                        "metadata": [
                            {"key": "x-amz-meta-album", "val": "2026"},
                            {"key": "x-amz-meta-camera", "val": "x100v"},
                        ],
                        "tags": [{"key": "env", "val": "prod"}, {"key": "k", "val": "v"}],
                    },
                },
            }
        ]
    }
    assert both.attributes == plain.attributes


def test_asked_for_tags_an_object_without_any_gets_an_empty_list_and_unknown_ones_none() -> None:
    registry = Registry()
    registry.set_bucket(
        PROJECT, "photos", [Destination("t", "t", include_tags=True, include_metadata=True)]
    )
    none = {**row("none"), "metadata": "{}", "tags": "{}"}
    unknown = {**row("unknown"), "metadata": None, "tags": None}
    first, second = routed = route([none, unknown], registry, batch_id=1).by_topic["t"]
    assert first.event["s3"]["object"]["tags"] == []
    assert first.event["s3"]["object"]["metadata"] == []
    assert "tags" not in second.event["s3"]["object"]  # the record does not say
    assert "metadata" not in second.event["s3"]["object"]
    assert second.message == unknown["message"].replace(b"ObjectEvents", b"t")
    assert len(routed) == 2


def test_bucket_events_go_only_to_project_wide_destinations() -> None:
    """A bucket event goes to its project's project-wide destinations, never to a bucket's
    notifications; with none it is dropped without counting as unrouted (opt-in), and an
    object event never goes to a project-wide destination."""
    created = {**row(""), "event_name": "BucketCreated:Put", "event_id": "b0-1"}
    registry = Registry()
    registry.set_bucket(PROJECT, "photos", [Destination("bucket-topic")])
    before = metrics.EVENTS_UNROUTED._value.get()
    routed = route([created], registry, batch_id=1)
    assert routed.by_topic == {}
    assert routed.unrouted == 0
    assert metrics.EVENTS_UNROUTED._value.get() == before

    registry.set_bucket(
        PROJECT, PROJECT_WIDE, [Destination("project-topic", "ProjectEvents", ("s3:Bucket*",))]
    )
    assert route([created], registry, batch_id=2).by_topic == {}  # no such event type matches
    registry.set_bucket(
        PROJECT,
        PROJECT_WIDE,
        [Destination("project-topic", "ProjectEvents", ("s3:BucketCreated:*",))],
    )
    routed = route([created, row("a.jpg")], registry, batch_id=3)
    assert {t: [d.event_id for d in ds] for t, ds in routed.by_topic.items()} == {
        "project-topic": ["b0-1"],
        "bucket-topic": ["0-a.jpg"],
    }
    assert routed.by_topic["project-topic"][0].event["s3"]["configurationId"] == "ProjectEvents"


EVERYTHING = ("s3:ObjectCreated:*", "s3:ObjectRemoved:*", "s3:ObjectRenamed:*")


def test_each_destination_gets_a_rename_one_way() -> None:
    registry = Registry()
    registry.set_bucket(
        PROJECT,
        "photos",
        [
            Destination("s3-way", events=EVERYTHING),
            Destination("single", events=EVERYTHING, rename_events="single"),
        ],
    )
    removed = {**row("a"), "event_name": "ObjectRemoved:Delete", "rename": "s3"}
    created = {**row("b"), "event_id": "0-b", "rename": "s3"}
    renamed = {
        **row("b"),
        "event_id": "0-b-renamed",
        "event_name": "ObjectRenamed:Rename",
        "rename": "single",
    }
    plain = row("c")
    routed = route([removed, created, renamed, plain], registry, batch_id=1)
    assert {t: [d.event_id for d in ds] for t, ds in routed.by_topic.items()} == {
        "s3-way": ["0-a", "0-b", "0-c"],
        "single": ["0-b-renamed", "0-c"],
    }
