"""Routing over the batch's columns (`route_table`) sends each destination exactly the
deliveries that routing event by event sends (`reference_route` below: the router as it was
before it worked on columns), in the same order, with the same messages and attributes."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ripple.events.buckets import is_bucket_event
from ripple.notifications.registry import PROJECT_WIDE, Destination, Registry
from ripple.pipeline.route import Routed, _configured, route_table, with_object_data
from ripple.pipeline.transform import EVENT_SCHEMA
from ripple.targets.base import Delivery

PROJECTS = [uuid.UUID(int=1), uuid.UUID(int=2)]
BUCKETS = ["photos", "logs", "empty"]
NAMES = [
    "ObjectCreated:Put",
    "ObjectCreated:Copy",
    "ObjectRemoved:Delete",
    "ObjectRemoved:DeleteMarkerCreated",
    "ObjectRenamed:Rename",
    "BucketCreated:Put",
]
TEXT = st.text(alphabet=st.sampled_from('ab "\\é/'), max_size=4)


def reference_route(rows: Sequence[Mapping[str, Any]], registry: Registry, batch_id: int) -> Routed:
    """Event by event, as the router did before it worked on columns."""
    routed = Routed()
    for row in rows:
        routed.newest_commit_ns = max(routed.newest_commit_ns, row["commit_ns"])
        project = uuid.UUID(row["project_id"])
        if is_bucket_event(row["event_name"]):
            destinations = registry.destinations(project, PROJECT_WIDE)
            if not destinations:
                continue
        else:
            destinations = registry.destinations(project, row["bucket"])
        if not destinations:
            routed.unrouted += 1
            continue
        metadata = orjson.loads(row["metadata"]) if row.get("metadata") else None
        tags = orjson.loads(row["tags"]) if row.get("tags") else None
        for destination in destinations:
            rename = row.get("rename")
            if rename is not None and rename != destination.rename_events:
                continue
            if not destination.wants(row["event_name"], row["key"], metadata, tags):
                continue
            attributes = {
                "eventName": row["event_name"],
                "bucket": row["bucket"],
                "key": row["key"],
                "sequencer": row["sequencer"],
            }
            if row.get("version_id"):
                attributes["versionId"] = row["version_id"]
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
    return routed


@st.composite
def destinations(draw: st.DrawFn) -> Destination:
    events = draw(
        st.sampled_from(
            [
                ("s3:ObjectCreated:*", "s3:ObjectRemoved:*"),
                ("s3:ObjectCreated:*",),
                ("s3:ObjectRemoved:Delete",),
                ("s3:ObjectRenamed:*", "s3:ObjectCreated:Put"),
                ("s3:BucketCreated:*",),
            ]
        )
    )
    return Destination(
        topic=draw(st.sampled_from(["t1", "t2"])),
        configuration_id=draw(st.sampled_from(["ObjectEvents", "Jpegs", 'odd "id"'])),
        events=events,
        prefix=draw(st.sampled_from(["", "a", "a/"])),
        suffix=draw(st.sampled_from(["", ".jpg"])),
        regex=draw(st.sampled_from([None, r"a.*", r".*\.jpg"])),
        metadata=draw(st.sampled_from([(), (("color", "red"),)])),
        tags=draw(st.sampled_from([(), (("env", "prod"),)])),
        include_tags=draw(st.booleans()),
        include_metadata=draw(st.booleans()),
        rename_events=draw(st.sampled_from(["s3", "single"])),
    )


@st.composite
def rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(min_value=0, max_value=15))):
        name = draw(st.sampled_from(NAMES))
        key = draw(st.sampled_from(["a/b.jpg", "a.txt", "b", "a/x y.jpg"]))
        event = {"eventName": name, "s3": {"configurationId": "ObjectEvents", "object": {}}}
        out.append(
            {
                "partition": i % 3,
                "position": i + 1,
                "commit_ns": 1_000 + draw(st.integers(0, 50)),
                "event_id": f"{i % 3}-{i:024X}",
                "project_id": str(draw(st.sampled_from(PROJECTS))),
                "bucket": draw(st.sampled_from(BUCKETS)),
                "key": "" if name.startswith("Bucket") else key,
                "event_name": name,
                "sequencer": f"{i:024X}",
                "version_id": draw(st.sampled_from([None, "", "00ff"])),
                "message": orjson.dumps(event),
                "metadata": draw(
                    st.one_of(
                        st.none(),
                        st.dictionaries(st.sampled_from(["color", "Color", "x"]), TEXT).map(
                            lambda d: orjson.dumps(d).decode()
                        ),
                    )
                ),
                "tags": draw(
                    st.one_of(
                        st.none(),
                        st.dictionaries(st.sampled_from(["env", "x"]), TEXT).map(
                            lambda d: orjson.dumps(d).decode()
                        ),
                    )
                ),
                "rename": draw(st.sampled_from([None, "s3", "single"])),
            }
        )
    return out


@st.composite
def registries(draw: st.DrawFn) -> Registry:
    registry = Registry()
    for project in PROJECTS:
        for bucket in [*BUCKETS[:2], PROJECT_WIDE]:
            if draw(st.booleans()):
                registry.set_bucket(project, bucket, draw(st.lists(destinations(), max_size=3)))
    return registry


def deliveries(routed: Routed) -> dict[str, list[tuple[Any, ...]]]:
    return {
        topic: [(d.event_id, d.message, dict(d.attributes), d.batch_id) for d in ds]
        for topic, ds in routed.by_topic.items()
    }


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=rows(), registry=registries())
def test_route_table_routes_as_event_by_event_routing(
    events: list[dict[str, Any]], registry: Registry
) -> None:
    expected = reference_route(events, registry, batch_id=7)
    got = route_table(pa.Table.from_pylist(events, schema=EVENT_SCHEMA), registry, batch_id=7)
    assert deliveries(got) == deliveries(expected)
    assert got.unrouted == expected.unrouted
    assert got.newest_commit_ns == expected.newest_commit_ns


def test_route_table_takes_spark_large_string_columns() -> None:
    """Spark can hand Arrow's large string and binary types to the handler."""
    registry = Registry()
    registry.set_bucket(PROJECTS[0], "photos", [Destination("t1")])
    event = {"eventName": "ObjectCreated:Put", "s3": {"configurationId": "ObjectEvents"}}
    row = {
        "partition": 0, "position": 1, "commit_ns": 5, "event_id": "0-1",
        "project_id": str(PROJECTS[0]), "bucket": "photos", "key": "k",
        "event_name": "ObjectCreated:Put", "sequencer": "01", "message": orjson.dumps(event),
    }  # fmt: skip
    large = pa.schema(
        [
            f.with_type(pa.large_string() if f.type == pa.string() else pa.large_binary())
            if f.type in (pa.string(), pa.binary())
            else f
            for f in EVENT_SCHEMA
        ]
    )
    routed = route_table(pa.Table.from_pylist([row], schema=large), registry, batch_id=1)
    assert [d.event_id for d in routed.by_topic["t1"]] == ["0-1"]
