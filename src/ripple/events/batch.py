"""Event records of many one-change transactions at once, over Arrow columns: the fast path
of the pipeline's transform (`ripple.pipeline.transform`).

Most transactions are one change record holding one mod (a PUT, POST, copy, multipart
completion or DELETE of one key), whose S3 events differ only in a few values. The events of
one *shape* (`ripple.events.template.Shape`) are filled into one template, which `s3_events`
itself writes and checks (`ripple.events.template`), with each record's values computed
over whole columns (`ripple.events.columns`); so the message layout has one source,
`s3_events`. Every other record, and a batch the fast path cannot read, is left to
`s3_events`. Pure: no I/O.

What takes the fast path and what does not: docs/pipeline.md, "Transform".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Final

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ripple.changestream.tag import STRING_MEMBERS, Operation, TransactionTag
from ripple.events.columns import (
    STREAM_ID,
    as_bools,
    distinct,
    encode_keys,
    event_times,
    read_json_lines,
    sequencers,
    version_ids,
    whole,
)
from ripple.events.names import event_name
from ripple.events.record import EventSettings, object_metadata, object_tags
from ripple.events.template import TAG_HOLES, Shape, Template, template_of

__all__ = ["SimpleEvents", "Templates", "simple_events"]

# The operations whose one-mod records make one plain event (or none): no extra event, no
# system principal, no rename pairing. "" is a transaction without a tag.
_PLAIN: Final = (
    Operation.PUT,
    Operation.POST,
    Operation.COPY,
    Operation.COMPLETE_MULTIPART_UPLOAD,
    Operation.DELETE,
    Operation.DELETE_OBJECTS,
)
_OPERATIONS: Final = pa.array(sorted({"", *(op.value for op in _PLAIN)}))
_NO_MEMBERS = pa.struct([])  # an object whose members are not read: is it null or not
_VALUES = pa.struct(
    [
        ("status", pa.int64()),
        ("total_plain_size", pa.int64()),
        ("stream_id", pa.string()),
        ("etag", pa.string()),
        ("user_metadata", _NO_MEMBERS),
        ("tags", _NO_MEMBERS),
    ]
)
_KEYS = pa.struct(
    [
        ("project_id", pa.string()),
        ("bucket_name", pa.string()),
        ("object_key", pa.string()),
        ("version", pa.int64()),
    ]
)
_MOD = pa.struct([("keys", _KEYS), ("new_values", _VALUES), ("old_values", _VALUES)])
_MODS: Final = pa.schema([("m", pa.list_(_MOD))])
# Every member of the transaction tag is read (an object's only for whether it is there); a
# record whose tag has one the fast path does not use (a rename's, a lifecycle rule's, one
# added since) is left to `s3_events`.
_TAG: Final = pa.schema(
    [
        (f.name, pa.string() if f.name in STRING_MEMBERS else _NO_MEMBERS)
        for f in fields(TransactionTag)
    ]
)
_TAG_USED: Final = (*TAG_HOLES, "operation", "etag", "copy_source", "bucket_versioning")
_TAG_UNUSED: Final = tuple(name for name in _TAG.names if name not in _TAG_USED)
_UNSAFE_JSON: Final = r'[\x00-\x1f"\\]'  # what orjson would escape in a string
_NULL_VERSION_STATUSES: Final = pa.array([3, 6], pa.int64())
_VERSIONED_STATUSES: Final = pa.array([4, 5], pa.int64())


@dataclass(frozen=True)
class SimpleEvents:
    """What `simple_events` mapped: `handled` marks the input rows it took (each made one
    event, or none); `rows` is the input row of each event, in order; `columns` are the
    events' `project_id`, `bucket`, `key`, `event_name`, `sequencer`, `version_id`,
    `message` (binary), `metadata` and `tags`."""

    handled: np.ndarray
    rows: np.ndarray
    columns: dict[str, pa.Array]

    @staticmethod
    def none(n: int) -> SimpleEvents:
        return SimpleEvents(np.zeros(n, dtype=bool), np.zeros(0, dtype=np.int64), {})


@dataclass
class Templates:
    """The templates found so far, per shape (kept across a task's batches); None for a
    shape the fast path does not take."""

    settings: EventSettings
    owner_of: Callable[[str], str]
    table: str = "objects"
    known: dict[Shape, Template | None] = field(default_factory=dict)


def simple_events(
    records: pa.RecordBatch,
    mod_types: pa.Array,
    candidates: np.ndarray,
    templates: Templates,
) -> SimpleEvents:
    """Map the `candidates` rows of `records` (change records with the pipeline source's
    columns; each candidate is its transaction's only record in its partition) that the
    fast path can take. `mod_types` holds each row's `INSERT`, `DELETE` or `UPDATE`."""
    n = records.num_rows
    if templates.table != "objects" or n == 0:
        return SimpleEvents.none(n)
    insert = as_bools(pc.fill_null(pc.equal(mod_types, "INSERT"), False))
    delete = as_bools(pc.fill_null(pc.equal(mod_types, "DELETE"), False))
    picked = np.flatnonzero(candidates & (insert | delete))
    if len(picked) == 0:
        return SimpleEvents.none(n)
    every = len(picked) == n
    some = records if every else records.take(pa.array(picked))
    rows = _Rows.parse(some, pa.array(insert if every else insert[picked]))
    if rows is None:  # not what the writer writes: the general path will say what is wrong
        return SimpleEvents.none(n)
    taken, events, columns = _fill(rows, rows.eligible(), templates)
    handled = np.zeros(n, dtype=bool)
    handled[picked[taken]] = True
    return SimpleEvents(handled, picked[events], columns)


@dataclass
class _Rows:
    """The picked records' values, column by column. Only rows with one mod (`one_mod`)
    can be taken; the values of the others are another row's and mean nothing."""

    records: pa.RecordBatch
    is_insert: pa.Array
    one_mod: np.ndarray
    keys: pa.StructArray
    values: dict[str, pa.Array]
    tag: dict[str, pa.Array]  # each member of the transaction tag

    @staticmethod
    def parse(records: pa.RecordBatch, is_insert: pa.Array) -> _Rows | None:
        mods = records.column("mods")
        tags = pc.fill_null(records.column("transaction_tag"), "")
        try:
            parsed = read_json_lines(pc.binary_join_element_wise('{"m":', mods, "}\n", ""), _MODS)
            empty = pc.equal(pc.utf8_length(tags), 0)
            tag = read_json_lines(
                pc.binary_join_element_wise(pc.if_else(empty, "{}", tags), "\n", ""), _TAG
            )
        except pa.ArrowInvalid:
            return None
        if parsed.num_rows != len(mods) or tag.num_rows != len(tags):
            return None
        listed = whole(parsed.column("m"))
        one_mod = np.asarray(pc.fill_null(pc.list_value_length(listed), 0).to_numpy()) == 1
        flat = listed.flatten()
        if len(flat) == 0:
            return None
        offsets = np.frombuffer(listed.buffers()[1], dtype=np.int32)
        starts = offsets[listed.offset : listed.offset + len(listed)]
        first = flat.take(pa.array(np.where(one_mod, starts, 0)))
        new, old = pc.struct_field(first, "new_values"), pc.struct_field(first, "old_values")
        values = {
            name: pc.if_else(is_insert, pc.struct_field(new, name), pc.struct_field(old, name))
            for name in _VALUES.names
        }
        return _Rows(
            records,
            is_insert,
            one_mod,
            pc.struct_field(first, "keys"),
            {name: whole(value) for name, value in values.items()},
            {name: whole(tag.column(name)) for name in _TAG.names},
        )

    def key(self, name: str) -> pa.Array:
        return pc.struct_field(self.keys, name)

    def eligible(self) -> np.ndarray:
        """The rows the fast path takes (the others go to `s3_events`)."""
        operation = pc.fill_null(self.tag["operation"], "")
        bucket, key = self.key("bucket_name"), self.key("object_key")
        status = self.values["status"]
        stream_id = self.values["stream_id"]
        unsafe = pc.binary_join_element_wise(
            *(self.tag[name] for name in (*TAG_HOLES, "etag")),
            self.values["etag"],
            stream_id,
            "|",
            null_handling="replace",
        )
        refused = [
            pc.invert(pc.is_in(operation, _OPERATIONS)),
            # a member only `s3_events` reads
            *(pc.is_valid(self.tag[name]) for name in _TAG_UNUSED),
            # a copy onto itself is also a metadata update: two events
            pc.and_(
                pc.equal(operation, Operation.COPY.value),
                pc.equal(
                    pc.fill_null(self.tag["copy_source"], ""),
                    pc.binary_join_element_wise(bucket, "/", key, ""),
                ),
            ),
            # a null version's versionId depends on the bucket's versioning in the tag
            pc.and_(
                pc.is_in(status, _NULL_VERSION_STATUSES),
                pc.is_valid(self.tag["bucket_versioning"]),
            ),
            # a value JSON would escape
            pc.match_substring_regex(unsafe, _UNSAFE_JSON),
            # a versionId needs a canonical stream id and a version
            pc.and_(
                pc.and_(pc.is_in(status, _VERSIONED_STATUSES), pc.not_equal(stream_id, "")),
                pc.or_(
                    pc.invert(pc.match_substring_regex(stream_id, STREAM_ID)),
                    pc.is_null(self.key("version")),
                ),
            ),
            pc.is_null(self.key("project_id")),
            pc.is_null(bucket),
            pc.is_null(key),
        ]
        ok = self.one_mod.copy()
        for no in refused:
            ok &= ~as_bools(pc.fill_null(no, False))
        return ok

    def etags(self) -> pa.Array:
        """The eTag `s3_events` takes: the row's, else the tag's ("" for none)."""
        own = self.values["etag"]
        has_own = pc.fill_null(pc.not_equal(own, ""), False)
        return pc.fill_null(pc.if_else(has_own, own, self.tag["etag"]), "")

    def holes(self) -> dict[str, pa.Array]:
        """Every hole's value per row (as JSON text inside the template's quotes)."""
        commit_ns = self.records.column("commit_ns")
        stream_id = pc.fill_null(self.values["stream_id"], "")
        return {
            "event_time": event_times(commit_ns),
            **{name: pc.fill_null(self.tag[name], "") for name in TAG_HOLES},
            "key": encode_keys(self.key("object_key")),
            "size": pc.fill_null(pc.cast(self.values["total_plain_size"], pa.string()), ""),
            "etag": pc.utf8_trim(self.etags(), characters='"'),
            "version_id": version_ids(pc.fill_null(self.key("version"), 0), stream_id),
            "sequencer": sequencers(commit_ns),
        }

    def shapes(self) -> tuple[np.ndarray, list[Shape]]:
        """The rows' shapes, and each row's index among them."""
        versioned = pc.and_(
            pc.is_in(self.values["status"], _VERSIONED_STATUSES),
            pc.not_equal(pc.fill_null(self.values["stream_id"], ""), ""),
        )
        codes, found = distinct(
            _event_names(self),
            self.key("project_id"),
            self.key("bucket_name"),
            self.records.column("stream_version"),
            self.is_insert,
            pc.is_valid(self.values["total_plain_size"]),
            pc.not_equal(self.etags(), ""),
            pc.fill_null(versioned, False),
        )
        shapes = [
            Shape(name or None, project, bucket, version, insert, size, etag, version_id)
            for name, project, bucket, version, insert, size, etag, version_id in found
        ]
        return codes, shapes

    def subset(self, at: np.ndarray) -> _Rows:
        """These rows' values for the rows `at` only."""
        take = pa.array(at)
        return _Rows(
            self.records.take(take),
            self.is_insert.take(take),
            self.one_mod[at],
            self.keys.take(take),
            {name: value.take(take) for name, value in self.values.items()},
            {name: value.take(take) for name, value in self.tag.items()},
        )


def _event_names(rows: _Rows) -> pa.Array:
    """Each row's event name ("" for none): `event_name` of each distinct (mod type,
    status, operation)."""
    operation = pc.fill_null(rows.tag["operation"], "")
    codes, found = distinct(rows.is_insert, rows.values["status"], operation)
    names = [
        event_name("INSERT" if insert else "DELETE", status, Operation(op) if op else None) or ""
        for insert, status, op in found
    ]
    return pa.array(names, pa.string()).take(pa.array(codes))


def _fill(
    rows: _Rows, ok: np.ndarray, templates: Templates
) -> tuple[np.ndarray, np.ndarray, dict[str, pa.Array]]:
    """Fill each eligible row's template: the rows taken (with or without an event), the
    row of each event, and the events' columns. Rows of a shape without a template are
    not taken."""
    nothing = np.zeros(0, dtype=np.int64)
    eligible = np.flatnonzero(ok)
    if len(eligible) == 0:
        return nothing, nothing, {}
    rows = rows.subset(eligible)  # from here on, positions among the eligible rows
    codes, shapes = rows.shapes()
    holes = rows.holes()
    # as `s3_events`: a transaction without a source address has the system's name
    source = holes["source_ip"]
    holes["source_ip"] = pc.if_else(pc.equal(source, ""), templates.settings.system_name, source)
    taken: list[np.ndarray] = []
    parts: list[tuple[np.ndarray, dict[str, pa.Array]]] = []
    for code, shape in enumerate(shapes):
        at = np.flatnonzero(codes == code)
        if shape not in templates.known:
            templates.known[shape] = _template(rows, holes, int(at[0]), shape, templates)
        template = templates.known[shape]
        if template is None:
            continue
        taken.append(at)
        if template.event_name is not None:
            parts.append((at, _columns(rows, template, holes, at, shape)))
    done = eligible[np.concatenate(taken)] if taken else nothing
    if not parts:
        return done, nothing, {}
    order = np.concatenate([at for at, _ in parts])
    sort = pa.array(np.argsort(order, kind="stable"))
    columns = {
        name: pa.concat_arrays([cols[name] for _, cols in parts]).take(sort) for name in parts[0][1]
    }
    return done, eligible[np.sort(order, kind="stable")], columns


def _template(
    rows: _Rows, holes: dict[str, pa.Array], i: int, shape: Shape, templates: Templates
) -> Template | None:
    """The template of row `i`'s shape (`template_of`, from row `i` itself)."""
    (mod,) = orjson.loads(rows.records.column("mods")[i].as_py())
    return template_of(
        shape,
        mod,
        rows.records.column("transaction_tag")[i].as_py() or "",
        int(rows.records.column("commit_ns")[i].as_py()),
        {hole: column[i].as_py() for hole, column in holes.items()},
        owner_of=templates.owner_of,
        settings=templates.settings,
        table=templates.table,
    )


def _columns(
    rows: _Rows, template: Template, holes: dict[str, pa.Array], at: np.ndarray, shape: Shape
) -> dict[str, pa.Array]:
    """The event columns of the rows `at`, all of one shape."""
    take = pa.array(at)
    texts: list[str | pa.Array] = [template.pieces[0].decode()]
    for hole, piece in zip(template.holes, template.pieces[1:], strict=True):
        texts.extend((holes[hole].take(take), piece.decode()))
    n = len(at)
    version_id = holes["version_id"].take(take) if shape.version_id else pa.nulls(n, pa.string())
    return {
        "project_id": pa.array([shape.project_id] * n, pa.string()),
        "bucket": pa.array([shape.bucket] * n, pa.string()),
        "key": rows.key("object_key").take(take),
        "event_name": pa.array([shape.event_name] * n, pa.string()),
        "sequencer": holes["sequencer"].take(take),
        "version_id": version_id,
        "message": pc.cast(pc.binary_join_element_wise(*texts, ""), pa.binary()),
        "metadata": _object_data(rows, at, "user_metadata", template.metadata),
        "tags": _object_data(rows, at, "tags", template.tags),
    }


def _object_data(rows: _Rows, at: np.ndarray, column: str, carried: bool) -> pa.Array:
    """The routing column of the object's metadata or tags as JSON: "{}" for none, null
    when the shape's values do not carry the column; read from the mod for rows that have
    some (as `s3_events` reads them)."""
    n = len(at)
    if not carried:
        return pa.nulls(n, pa.string())
    some = np.flatnonzero(as_bools(pc.is_valid(rows.values[column].take(pa.array(at)))))
    if len(some) == 0:
        return pa.array(["{}"] * n, pa.string())
    out: list[str | None] = ["{}"] * n
    read = object_metadata if column == "user_metadata" else object_tags
    texts = rows.records.column("mods").take(pa.array(at[some])).to_pylist()
    inserts = rows.is_insert.take(pa.array(at[some])).to_pylist()
    for i, text, is_insert in zip(some.tolist(), texts, inserts, strict=True):
        (mod,) = orjson.loads(text)
        found = read(mod.get("new_values" if is_insert else "old_values") or {})
        out[i] = None if found is None else orjson.dumps(found).decode()
    return pa.array(out, pa.string())
