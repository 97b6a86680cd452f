"""Routing: each event to every destination of its bucket whose event types and key,
metadata and tag filters match it.

An event whose bucket has no destination at all is logged, counted
(`ripple_events_unrouted_total`) and discarded; one that no filter selects is simply not
sent, as in S3. Bucket events go only to their project's project-wide destinations (topics
with `project-events`), dropped quietly without one. A rename's events come both ways and
each destination gets those its topic's `rename-events` names; a topic's `include-tags` /
`include-metadata` add the object's tags and user metadata under `s3.object` here, before
delivery, so retries, dead letters and pull subscriptions hold the same message.

How routing runs over a task's columns: docs/pipeline.md, "Routing"; the added members:
docs/events.md, "Tags and metadata in events".
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ripple.events.buckets import is_bucket_event
from ripple.events.columns import distinct
from ripple.events.keys import decode_key
from ripple.events.names import matches
from ripple.notifications.registry import PROJECT_WIDE, Destination, Registry
from ripple.pipeline import metrics
from ripple.pipeline.transform import EVENT_SCHEMA
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
    """`route_table` of event rows given as mappings (of EVENT_SCHEMA's columns)."""
    return route_table(pa.Table.from_pylist(list(rows), schema=EVENT_SCHEMA), registry, batch_id)


def route_table(events: pa.Table, registry: Registry, batch_id: int) -> Routed:
    """Route a batch's events (EVENT_SCHEMA), column by column: the events of each bucket
    are matched against each of its destinations at once; each topic's deliveries keep the
    events' order."""
    routed = Routed()
    if events.num_rows == 0:
        return routed
    if events.schema != EVENT_SCHEMA:  # e.g. Spark's large string types
        events = events.cast(EVENT_SCHEMA)
    columns = _Columns(events.combine_chunks())
    routed.newest_commit_ns = int(pc.max(columns.array("commit_ns")).as_py())
    chosen: dict[str, list[tuple[np.ndarray, list[Delivery]]]] = {}
    for project, bucket, bucket_events, at in _buckets(columns):
        where = PROJECT_WIDE if bucket_events else bucket
        destinations = registry.destinations(uuid.UUID(project), where)
        if not destinations:
            # bucket events are only for projects that asked for them; a journaled bucket's
            # events may be only the journal's (ripple.pipeline.journal)
            if not bucket_events and not registry.is_journaled(uuid.UUID(project), bucket):
                _unrouted(columns, at)
                routed.unrouted += len(at)
            continue
        for destination in destinations:
            selected = at[_wanted(destination, columns, at)]
            if len(selected):
                deliveries = _deliveries(destination, columns, selected, batch_id)
                chosen.setdefault(destination.topic, []).append((selected, deliveries))
    for topic, parts in chosen.items():
        rows = np.concatenate([selected for selected, _ in parts])
        every = [d for _, deliveries in parts for d in deliveries]
        routed.by_topic[topic] = [every[i] for i in np.argsort(rows, kind="stable").tolist()]
        metrics.EVENTS_TRIGGERED.inc(len(every))
    return routed


class _Columns:
    """A batch's event columns, each turned into Python values once, when first needed."""

    def __init__(self, events: pa.Table) -> None:
        self.events = events
        self._values: dict[str, list[Any]] = {}

    def array(self, name: str) -> pa.Array:
        return self.events.column(name).combine_chunks()

    def values(self, name: str) -> list[Any]:
        if name not in self._values:
            self._values[name] = self.array(name).to_pylist()
        return self._values[name]


def _buckets(columns: _Columns) -> Iterator[tuple[str, str, bool, np.ndarray]]:
    """The rows of each (project, bucket) and kind of event (bucket events apart), in order
    of their first row."""
    names = pc.dictionary_encode(columns.array("event_name"))
    bucket_events = pa.array([is_bucket_event(n) for n in names.dictionary.to_pylist()])
    kind = pc.take(bucket_events, names.indices)
    codes, found = distinct(columns.array("project_id"), columns.array("bucket"), kind)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(found) + 1))
    for (project, bucket, is_bucket), start, end in zip(
        found, bounds[:-1].tolist(), bounds[1:].tolist(), strict=True
    ):
        yield project, bucket, is_bucket, order[start:end]


def _unrouted(columns: _Columns, at: np.ndarray) -> None:
    metrics.EVENTS_UNROUTED.inc(len(at))
    buckets, keys, ids = (columns.values(n) for n in ("bucket", "key", "event_id"))
    for i in at.tolist():
        log.warning(
            "no destination for bucket %s key %s: event %s discarded", buckets[i], keys[i], ids[i]
        )


def _wanted(destination: Destination, columns: _Columns, at: np.ndarray) -> np.ndarray:
    """Which of the rows `at` (one bucket's) the destination gets: a rename's events the
    way its topic tells renames, event types, key filters over the columns; regex,
    metadata and tag rules row by row (`Destination.wants`)."""
    take = pa.array(at)
    rename = columns.array("rename").take(take)
    names = columns.array("event_name").take(take)
    keys = columns.array("key").take(take)
    present = pc.unique(names).to_pylist()
    types = [n for n in present if any(matches(p, n) for p in destination.events)]
    want = pc.and_(
        pc.is_in(names, pa.array(types, pa.string())),
        pc.fill_null(pc.equal(rename, destination.rename_events), True),
    )
    if destination.prefix:
        want = pc.and_(want, pc.starts_with(keys, destination.prefix))
    if destination.suffix:
        want = pc.and_(want, pc.ends_with(keys, destination.suffix))
    wanted = np.asarray(pc.fill_null(want, False).to_numpy(zero_copy_only=False), dtype=bool)
    if destination.regex is not None or destination.metadata or destination.tags:
        all_names, all_keys = columns.values("event_name"), columns.values("key")
        metadata, tags = columns.values("metadata"), columns.values("tags")
        for j in np.flatnonzero(wanted).tolist():
            i = int(at[j])
            wanted[j] = destination.wants(
                all_names[i], all_keys[i], _loads(metadata[i]), _loads(tags[i])
            )
    return wanted


def _loads(text: str | None) -> dict[str, str] | None:
    return orjson.loads(text) if text else None


def _deliveries(
    destination: Destination, columns: _Columns, rows: np.ndarray, batch_id: int
) -> list[Delivery]:
    """A delivery of each of the rows to the destination: the message with its notification's
    configuration id (and the object's tags and metadata if its topic asks)."""
    messages = _configured_all(columns.array("message").take(pa.array(rows)), destination)
    if destination.include_metadata or destination.include_tags:
        metadata, tags = columns.values("metadata"), columns.values("tags")
        messages = [
            with_object_data(
                message,
                _loads(metadata[i]) if destination.include_metadata else None,
                _loads(tags[i]) if destination.include_tags else None,
            )
            for message, i in zip(messages, rows.tolist(), strict=True)
        ]
    ids, names, buckets, keys, sequencers, versions = (
        columns.values(n)
        for n in ("event_id", "event_name", "bucket", "key", "sequencer", "version_id")
    )
    out = []
    for message, i in zip(messages, rows.tolist(), strict=True):
        attributes = {
            "eventName": names[i],
            "bucket": buckets[i],
            "key": keys[i],
            "sequencer": sequencers[i],
        }
        if versions[i]:
            attributes["versionId"] = versions[i]
        out.append(Delivery(ids[i], message, attributes, batch_id))
    return out


def _configured_all(messages: pa.Array, destination: Destination) -> list[bytes]:
    """`_configured` of every message: over the column when they all name the same
    configuration id (as the transform writes them), one by one otherwise."""
    wanted = _configuration_member(destination.configuration_id)
    first: bytes = messages[0].as_py()
    if wanted in first and pc.all(pc.match_substring(messages, wanted.decode())).as_py():
        return list(messages.to_pylist())
    member = _member_of(first)
    if member is not None and pc.all(pc.match_substring(messages, member.decode())).as_py():
        replaced = pc.replace_substring(
            messages, member.decode(), wanted.decode(), max_replacements=1
        )
        return list(replaced.to_pylist())
    return [_configured(m, destination.configuration_id) for m in messages.to_pylist()]


def _member_of(message: bytes) -> bytes | None:
    """The `"configurationId":…` member of an event record as its bytes."""
    configuration_id = orjson.loads(message).get("s3", {}).get("configurationId")
    return None if configuration_id is None else _configuration_member(str(configuration_id))
