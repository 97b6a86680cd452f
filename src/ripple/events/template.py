"""The templates of the transaction fast path (`ripple.events.batch`): the S3 event message
of one *shape* of one-mod transaction, written by `s3_events` itself and cut where the
values that differ from one such transaction to the next go (its holes).

`s3_events` maps the shape's first record twice: as it is, and with every varying value (the
key, size, eTag, versionId, commit time, and the request's ids, principal and address)
replaced by a marker of its own. The second message, cut at the markers, is the template;
filled with the first record's own values, it must give the first message, or the shape
gets no template. Pure: no I/O.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

import orjson

from ripple.changestream.tag import TransactionTag
from ripple.changestream.values import rfc3339_ns
from ripple.events.record import EventRecord, EventSettings, version_id
from ripple.events.s3 import s3_events
from ripple.events.sequencer import event_time, sequencer

__all__ = ["HOLES", "TAG_HOLES", "Shape", "Template", "template_of"]

# the holes a template may have; those whose value comes from the transaction tag (and are
# named as its members)
TAG_HOLES: Final = ("principal", "source_ip", "request_id", "host_id")
HOLES: Final = ("event_time", *TAG_HOLES, "key", "size", "etag", "version_id", "sequencer")


@dataclass(frozen=True)
class Shape:
    """What every transaction filled into one template has in common."""

    event_name: str | None  # None: no event
    project_id: str
    bucket: str
    stream_version: int
    insert: bool  # an INSERT (else a DELETE)
    size: bool  # the values have a size
    etag: bool  # the values or the tag have an eTag
    version_id: bool  # the event has a versionId made of the version and stream id


@dataclass(frozen=True)
class Template:
    """The message of one shape, cut at its holes: pieces[0] hole[0] pieces[1] … pieces[-1];
    and whether its values carry the object's metadata and tags (else those columns are
    null). `event_name` None: the shape makes no event."""

    event_name: str | None
    pieces: tuple[bytes, ...] = ()
    holes: tuple[str, ...] = ()
    metadata: bool = False
    tags: bool = False

    def fill(self, values: Mapping[str, str]) -> bytes:
        """The message of one transaction whose holes' values are `values`."""
        return self.pieces[0] + b"".join(
            values[hole].encode() + piece
            for hole, piece in zip(self.holes, self.pieces[1:], strict=True)
        )


def template_of(
    shape: Shape,
    mod: Mapping[str, Any],
    tag: str,
    commit_ns: int,
    holes: Mapping[str, str],
    *,
    owner_of: Callable[[str], str],
    settings: EventSettings,
    table: str = "objects",
) -> Template | None:
    """The template of `shape`, from one transaction of it (its one `mod`, `tag` and
    `commit_ns`, and its holes' values as the fast path computes them); None when the
    fast path cannot take the shape."""
    mod_type = "INSERT" if shape.insert else "DELETE"
    maps = _Mapper(owner_of, settings, table)
    real = maps.events(mod_type, mod, tag, commit_ns)
    if shape.event_name is None:
        return Template(None) if not real else None
    if len(real) != 1:
        return None
    (expected,) = real
    side = "new_values" if shape.insert else "old_values"
    markers = _Markers.new()
    marked_mod, marked_tag = markers.apply(mod, TransactionTag.decode(tag), side)
    made = maps.events(mod_type, marked_mod, marked_tag.encode(), markers.commit_ns)
    if len(made) != 1:
        return None
    cut = markers.cut(orjson.dumps(made[0].message))
    if cut is None:
        return None
    values = mod.get(side) or {}
    template = Template(
        shape.event_name, cut[0], cut[1], "user_metadata" in values, "tags" in values
    )
    # the check: filled with the transaction's own values, it is what s3_events made of it
    if not _agrees(template, shape, expected, holes, str(mod["keys"]["object_key"])):
        return None
    return template


def _agrees(
    template: Template, shape: Shape, expected: EventRecord, holes: Mapping[str, str], key: str
) -> bool:
    version = holes["version_id"] if shape.version_id else None
    return (
        template.fill(holes) == orjson.dumps(expected.message)
        and expected.event_name == shape.event_name
        and expected.sequencer == holes["sequencer"]
        and expected.message["s3"]["object"].get("versionId") == version
        and (expected.project_id, expected.bucket) == (shape.project_id, shape.bucket)
        and expected.key == key
        and expected.rename is None
        and (expected.metadata is not None) == template.metadata
        and (expected.tags is not None) == template.tags
    )


@dataclass(frozen=True)
class _Mapper:
    owner_of: Callable[[str], str]
    settings: EventSettings
    table: str

    def events(self, mod_type: str, mod: Any, tag: str, commit_ns: int) -> list[EventRecord]:
        """What `s3_events` makes of a one-record transaction of this one mod."""
        record = {
            "commit_timestamp": rfc3339_ns(commit_ns),  # as the reader's `change_record`
            "record_sequence": "00000000",
            "server_transaction_id": "0",
            "is_last_record_in_transaction_in_partition": True,
            "table_name": self.table,
            "mods": [mod],
            "mod_type": mod_type,
            "transaction_tag": tag,
        }
        return s3_events([record], owners=self.owner_of, settings=self.settings)


@dataclass(frozen=True)
class _Markers:
    """Values unique enough to be found again in a message: one per hole."""

    text: dict[str, str]  # hole → the marker string in the record
    size: int
    commit_ns: int
    version: int
    stream_id: str

    @staticmethod
    def new() -> _Markers:
        return _Markers(
            text={hole: f"rpl{hole[:2]}{secrets.token_hex(10)}" for hole in HOLES},
            size=10**17 + secrets.randbelow(9 * 10**17),
            commit_ns=7 * 10**18 + secrets.randbelow(10**18),
            version=(1 << 62) + secrets.randbelow(1 << 61),
            stream_id=str(uuid.uuid4()),
        )

    def apply(
        self, mod: Mapping[str, Any], tag: TransactionTag, side: str
    ) -> tuple[dict[str, Any], TransactionTag]:
        """The mod and tag with the markers in place of their varying values (`side`: the
        values the event is made from, `new_values` or `old_values`)."""
        values = dict(mod.get(side) or {})
        if values.get("total_plain_size") is not None:
            values["total_plain_size"] = self.size
        if values.get("etag") or tag.etag:
            values["etag"] = self.text["etag"]
        if values.get("stream_id"):
            values["stream_id"] = self.stream_id
        keys = dict(mod["keys"])
        keys["object_key"] = self.text["key"]
        if keys.get("version") is not None:
            keys["version"] = self.version
        marked: dict[str, Any] = {name: self.text[name] for name in TAG_HOLES}
        marked_tag = replace(tag, etag="", **marked)
        return {**mod, "keys": keys, side: values}, marked_tag

    def cut(self, message: bytes) -> tuple[tuple[bytes, ...], tuple[str, ...]] | None:
        """The message's pieces and holes, cut at the markers; None if one is found more
        than once."""
        found: dict[str, bytes] = {
            "event_time": event_time(self.commit_ns).encode(),
            "sequencer": sequencer(self.commit_ns, 0).encode(),
            "size": str(self.size).encode(),
            "version_id": version_id(self.version, self.stream_id).encode(),
            **{hole: self.text[hole].encode() for hole in (*TAG_HOLES, "key", "etag")},
        }
        at: list[tuple[int, str, int]] = []
        for hole, marker in found.items():
            count = message.count(marker)
            if count > 1:
                return None
            if count == 1:
                at.append((message.index(marker), hole, len(marker)))
        at.sort()
        pieces: list[bytes] = []
        start = 0
        for offset, _, length in at:
            pieces.append(message[start:offset])
            start = offset + length
        pieces.append(message[start:])
        return tuple(pieces), tuple(hole for _, hole, _ in at)
