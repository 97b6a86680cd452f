"""The transform without Spark (`ripple.pipeline.transform.BatchMapper`): its fast path for
one-record transactions (`ripple.events.batch`) makes exactly the events `s3_events` makes
(`events_of_rows`, transaction by transaction), column by column and in the same order,
whatever the records hold and however the task's records are cut into Arrow batches."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping
from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ripple.events.batch as batch
from ripple.changestream.definition import ModType
from ripple.changestream.tag import Operation, TransactionTag
from ripple.events import EventSettings
from ripple.pipeline.source import ARROW_SCHEMA
from ripple.pipeline.transform import EVENT_SCHEMA, BatchMapper
from tests.changestream.tags import MEMBERS, with_member
from tests.pipeline.reference import events_of_rows

PROJECTS = {str(uuid.UUID(int=1)): "owner-one", str(uuid.UUID(int=2)): 'owner "two"'}
SETTINGS = EventSettings(region="eu-west-1")
BASE_NS = 1_795_256_130_123_456_789

TEXT = st.text(
    alphabet=st.one_of(st.sampled_from('aZ09 _.-/*~+="\\\t'), st.characters(codec="utf-8")),
    max_size=12,
)
KEYS = st.one_of(
    st.from_regex(r"[a-z0-9/ ._-]{1,20}", fullmatch=True),  # most keys
    TEXT.filter(bool),
)
STREAM_IDS = st.one_of(
    st.uuids().map(str),
    st.uuids().map(lambda u: str(u).upper()),
    st.sampled_from(["", None]),
)
ETAGS = st.one_of(
    st.sampled_from(["d41d8cd98f00b204e9800998ecf8427e"] * 6 + ['"quoted"', '""', "", None]),
    TEXT,
)
OPERATIONS = st.sampled_from(
    [
        "put",
        "put",
        "put",
        "delete",
        "post",
        "copy",
        "complete-multipart-upload",
        "delete",
        "delete-objects",
        "rename",
        "lifecycle-expiration",
        "ttl-delete",
        "",
        None,
    ]
)


@st.composite
def tags(draw: st.DrawFn, bucket: str, key: str) -> str:
    members: dict[str, Any] = {}
    operation = draw(OPERATIONS)
    if operation is not None:
        members["operation"] = operation
    # (hypothesis draws the simplest choice most often: here, the common case)
    for name in ("request_id", "host_id", "principal", "source_ip"):
        if draw(st.integers(0, 3)) < 3:
            plain = st.from_regex(r"[A-Za-z0-9/+=:.]{4,16}", fullmatch=True)
            members[name] = draw(plain if draw(st.integers(0, 4)) < 4 else TEXT)
    if draw(st.integers(0, 3)) == 3:
        members["etag"] = draw(ETAGS.filter(lambda e: e is not None))
    if operation == "copy":
        members["copy_source"] = draw(st.sampled_from([f"{bucket}/{key}", "other/source"]))
    if operation == "rename":
        members["rename_from"] = "old/" + key
    if operation == "lifecycle-expiration":
        members["lifecycle_rule"] = "rule-1"
    if draw(st.integers(0, 3)) == 3:
        members["bucket_versioning"] = {bucket: draw(st.sampled_from(["Enabled", "Suspended"]))}
    return orjson.dumps(members).decode() if members or draw(st.booleans()) else ""


@st.composite
def mods(draw: st.DrawFn, mod_type: ModType, version: int, bucket: str) -> list[dict[str, Any]]:
    """The mods of one record, as the writer writes them. Stream version 1 watches fewer
    columns (no user metadata or tags), as a stream defined before migration 0009 did."""
    out = []
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        keys = {
            "project_id": draw(st.sampled_from(sorted(PROJECTS))),
            "bucket_name": bucket,
            "object_key": draw(KEYS),
            "version": draw(st.integers(min_value=-(1 << 40), max_value=1 << 62)),
        }
        values: dict[str, Any] = {
            "status": draw(st.sampled_from([3, 4, 3, 4, 5, 6, 1])),
            "total_plain_size": draw(st.one_of(st.none(), st.integers(0, 1 << 40))),
        }
        stream_id = draw(STREAM_IDS)
        if stream_id is not None:
            values["stream_id"] = stream_id
        values["etag"] = draw(ETAGS)
        if version == 2:
            values["user_metadata"] = draw(
                st.one_of(st.none(), st.dictionaries(TEXT, TEXT, max_size=2))
            )
            values["tags"] = draw(st.one_of(st.none(), st.dictionaries(TEXT, TEXT, max_size=2)))
        if mod_type is ModType.INSERT:
            out.append({"keys": keys, "new_values": values, "old_values": {}})
        elif mod_type is ModType.DELETE:
            out.append({"keys": keys, "new_values": {}, "old_values": values})
        else:
            old = {**values, "tags": {"was": "x"}} if version == 2 else dict(values)
            old["status"] = values["status"]
            out.append({"keys": keys, "new_values": values, "old_values": old})
    return out


@st.composite
def records(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Source rows of several transactions over 3 partitions, each partition's in position
    order, the partitions one after another (as the source reads them)."""
    by_partition: dict[int, list[dict[str, Any]]] = {0: [], 1: [], 2: []}
    for t in range(draw(st.integers(min_value=1, max_value=12))):
        partition = draw(st.sampled_from([0, 1, 2]))
        version = draw(st.sampled_from([2, 2, 2, 1]))
        bucket = draw(st.sampled_from(["photos", "logs"]))
        alone = st.sampled_from([[ModType.INSERT]] * 3 + [[ModType.DELETE], [ModType.UPDATE]])
        several = st.lists(st.sampled_from(list(ModType)), min_size=2, max_size=3, unique=True)
        kinds = draw(st.one_of(alone, alone, several))
        order = {ModType.DELETE: 0, ModType.UPDATE: 1, ModType.INSERT: 2}
        kinds.sort(key=order.__getitem__)
        first_key_of_mods: list[list[dict[str, Any]]] = [
            draw(mods(kind, version, bucket)) for kind in kinds
        ]
        key = first_key_of_mods[-1][0]["keys"]["object_key"]
        tag = draw(tags(bucket, key))
        rows = by_partition[partition]
        for sequence, (kind, record_mods) in enumerate(zip(kinds, first_key_of_mods, strict=True)):
            rows.append(
                {
                    "partition": partition,
                    "position": len(rows) + 1,
                    "commit_ns": BASE_NS + t * 1_000_003,
                    "transaction_id": f"{t:032x}",
                    "record_sequence": sequence,
                    "is_last_in_partition": sequence == len(kinds) - 1,
                    "mod_type": int(kind),
                    "mods": orjson.dumps(record_mods).decode(),
                    "transaction_tag": tag,
                    "is_system_transaction": False,
                    "stream_version": version,
                }
            )
    return list(itertools.chain.from_iterable(by_partition.values()))


@st.composite
def one_shape(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Many one-record transactions of mostly the same shape, their values drawn anew for
    each: the rows after a shape's first are filled into the template the first made, so
    this is where a value the template cannot hold would show."""
    rows = []
    operation = draw(st.sampled_from(["put", "copy", "delete"]))
    mod_type = ModType.DELETE if operation == "delete" else ModType.INSERT
    for i in range(draw(st.integers(min_value=2, max_value=25))):
        key = draw(KEYS)
        members: dict[str, Any] = {"operation": operation, "request_id": draw(TEXT)}
        if operation == "copy":
            members["copy_source"] = draw(st.sampled_from(["src/x", f"photos/{key}"]))
        if draw(st.booleans()):
            members["bucket_versioning"] = {"photos": "Suspended"}
        if draw(st.booleans()):
            members["etag"] = draw(ETAGS.filter(lambda e: e is not None))
        values = {
            "status": draw(st.sampled_from([3, 4])),
            "total_plain_size": draw(st.integers(0, 1 << 40)),
            "stream_id": draw(STREAM_IDS),
            "etag": draw(ETAGS),
            "user_metadata": draw(st.one_of(st.none(), st.dictionaries(TEXT, TEXT, max_size=2))),
            "tags": None,
        }
        keys = {"project_id": str(uuid.UUID(int=1)), "bucket_name": "photos",
                "object_key": key, "version": draw(st.integers(-(1 << 40), 1 << 62))}  # fmt: skip
        side = ("new_values", "old_values")[mod_type is ModType.DELETE]
        mod = {"keys": keys, "new_values": {}, "old_values": {}, side: values}
        rows.append(
            {
                "partition": 0,
                "position": i + 1,
                "commit_ns": BASE_NS + i * 999_999,
                "transaction_id": f"{i:032x}",
                "record_sequence": 0,
                "is_last_in_partition": True,
                "mod_type": int(mod_type),
                "mods": orjson.dumps([mod]).decode(),
                "transaction_tag": orjson.dumps(members).decode(),
                "is_system_transaction": False,
                "stream_version": 2,
            }
        )
    return rows


def mapped(rows: list[dict[str, Any]], cuts: list[int], *, fast: bool) -> pa.Table:
    mapper = BatchMapper(PROJECTS.__getitem__, SETTINGS, fast=fast)
    table = pa.Table.from_pylist(rows, schema=ARROW_SCHEMA)
    bounds = [0, *sorted(set(cuts)), len(rows)]
    out = [mapper.map(table.slice(a, b - a).combine_chunks().to_batches()[0]) for a, b in
           itertools.pairwise(bounds) if b > a]  # fmt: skip
    mapper.finish()
    return pa.Table.from_batches(out, schema=EVENT_SCHEMA)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=records(), data=st.data())
def test_the_fast_path_makes_the_events_s3_events_makes(
    rows: list[dict[str, Any]], data: st.DataObject
) -> None:
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(rows)), max_size=2))
    # the reference: every transaction through s3_events, record by record, no Arrow batches
    reference = list(events_of_rows(rows, PROJECTS.__getitem__, SETTINGS))
    general = mapped(rows, [], fast=False)
    fast = mapped(rows, cuts, fast=True)
    assert general.to_pylist() == pa.Table.from_pylist(reference, schema=EVENT_SCHEMA).to_pylist()
    assert fast.to_pylist() == general.to_pylist()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=one_shape())
def test_the_fast_path_fills_a_shape_with_any_values(rows: list[dict[str, Any]]) -> None:
    assert mapped(rows, [], fast=True).to_pylist() == mapped(rows, [], fast=False).to_pylist()


def put(i: int, key: str, *, tag: str = '{"operation":"put","request_id":"R"}') -> dict[str, Any]:
    mod = {
        "keys": {"project_id": str(uuid.UUID(int=1)), "bucket_name": "photos",
                 "object_key": key, "version": 7},
        "new_values": {"status": 3, "total_plain_size": 5, "stream_id": str(uuid.UUID(int=9)),
                       "etag": "e" * 32, "user_metadata": None, "tags": None},
        "old_values": {},
    }  # fmt: skip
    return {
        "partition": 0,
        "position": i + 1,
        "commit_ns": BASE_NS + i,
        "transaction_id": f"{i:032x}",
        "record_sequence": 0,
        "is_last_in_partition": True,
        "mod_type": int(ModType.INSERT),
        "mods": orjson.dumps([mod]).decode(),
        "transaction_tag": tag,
        "is_system_transaction": False,
        "stream_version": 2,
    }


def test_puts_take_the_fast_path_through_one_template() -> None:
    """Not a test of speed: that the common case does take the fast path (a template per
    shape, found once for the task), which the equality test above cannot tell."""
    mapper = BatchMapper(PROJECTS.__getitem__, SETTINGS)
    rows = [put(i, f"photos/{i}.jpg") for i in range(50)]
    out = mapper.map(pa.Table.from_pylist(rows, schema=ARROW_SCHEMA).to_batches()[0])
    assert out.num_rows == 50
    assert len(mapper.templates.known) == 1
    (template,) = mapper.templates.known.values()
    assert template is not None
    assert template.holes == ("event_time", "principal", "source_ip", "request_id", "host_id",
                              "key", "size", "etag", "sequencer")  # fmt: skip
    message = orjson.loads(out.column("message")[7].as_py())
    assert message["s3"]["object"]["key"] == "photos/7.jpg"
    assert message["responseElements"]["x-amz-request-id"] == "R"


def test_a_shape_whose_template_fails_its_check_goes_the_general_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A template whose check fails (here: the array eventTime is wrong) is not used: the
    events are still right, made by `s3_events`."""

    wrong = batch.event_times
    monkeypatch.setattr(batch, "event_times", lambda ns: pa.array(["x"] * len(wrong(ns))))
    rows = [put(i, f"k{i}") for i in range(5)]
    mapper = BatchMapper(PROJECTS.__getitem__, SETTINGS)
    out = mapper.map(pa.Table.from_pylist(rows, schema=ARROW_SCHEMA).to_batches()[0])
    assert list(mapper.templates.known.values()) == [None]
    assert out.to_pylist() == mapped(rows, [], fast=False).to_pylist()


@pytest.mark.parametrize("member", MEMBERS)
def test_the_fast_path_reads_each_tag_member(member: str) -> None:
    """Every member of the transaction tag reaches the fast path, and two puts that differ
    only in it make the events `s3_events` makes (a member the fast path ignored would be
    filled into the second from the first one's template)."""
    request = TransactionTag(Operation.PUT, request_id="R")
    tags = [with_member(member, n, request) for n in (0, 1)]
    rows = [put(n, f"k{n}", tag=tag.encode()) for n, tag in enumerate(tags)]
    records = pa.Table.from_pylist(rows, schema=ARROW_SCHEMA).to_batches()[0]
    parsed = batch._Rows.parse(records, pa.array([True, True]))
    assert parsed is not None
    for n, tag in enumerate(tags):
        read, value = parsed.tag[member][n].as_py(), getattr(tag, member)
        if isinstance(value, Mapping):  # an object: read only for whether it is there
            assert read is not None
        else:
            assert read == value
    assert mapped(rows, [], fast=True).to_pylist() == mapped(rows, [], fast=False).to_pylist()


def test_records_ending_inside_a_transaction_are_an_error() -> None:
    row = put(0, "k") | {"is_last_in_partition": False}
    mapper = BatchMapper(PROJECTS.__getitem__, SETTINGS)
    mapper.map(pa.Table.from_pylist([row], schema=ARROW_SCHEMA).to_batches()[0])
    with pytest.raises(RuntimeError, match="inside a transaction"):
        mapper.finish()
