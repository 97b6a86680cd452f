"""Properties of the change stream over random operation sequences, on SQLite and PostgreSQL.

1. The S3 events made from `bucket_eventing` follow each key's state: per key, sequencers
   strictly increase, the last event agrees with the key's latest row, and replaying the
   key's events gives the versions the table has; each operation sends exactly the events
   S3 would (created, removed, delete marker; an overwrite sends one), with the version IDs
   the metabase reported and URL-encoded keys; pending uploads send none.
2. The stream is complete: replaying a NEW_ROW stream over every column that matters
   rebuilds the objects table, in every bucket, with or without eventing; `bucket_eventing`
   holds only the eventing buckets' inserts and deletes, and replaying it rebuilds them.

Each example starts from an empty metabase (the `db` fixture empties it once per test, so
the examples of one test reset it themselves) and a clock that moves one second per
operation.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ripple.changestream.schema import (
    change_offsets,
    change_partitions,
    change_records,
)
from ripple.changestream.tag import Operation, TransactionTag
from ripple.changestream.tail import transactions
from ripple.changestream.values import encode, type_code
from ripple.events import (
    OBJECT_CREATED_COMPLETE_MULTIPART_UPLOAD,
    OBJECT_CREATED_COPY,
    OBJECT_CREATED_PUT,
    OBJECT_METADATA_UPDATE,
    OBJECT_REMOVED_DELETE,
    OBJECT_REMOVED_DELETE_MARKER_CREATED,
    EventRecord,
    decode_key,
    encode_key,
    s3_events,
)
from ripple.metabase import (
    BucketLocation,
    DeleteObjectsItem,
    Metabase,
    Object,
    ObjectLocation,
    Project,
    Retention,
    RetentionMode,
    Versioning,
    commit_object,
    copy_object,
    create_bucket,
    create_project,
    delete_object,
    delete_object_version,
    delete_objects,
    put_object_legal_hold,
    put_object_retention,
    set_bucket_versioning,
)
from ripple.metabase.errors import (
    InvalidBucketState,
    MetabaseError,
    ObjectLocked,
    ObjectNotFound,
)
from ripple.metabase.rows import object_from_row
from ripple.metabase.schema import buckets, objects, projects
from ripple.metabase.types import COMMITTED_STATUSES, Status, encode_version_id
from tests.changestream.conftest import Eventing, read_all
from tests.metabase.objects import begin_object, commit_inline_object

T0 = datetime(2026, 3, 1, tzinfo=UTC)
KEYS = ("a", "red flower.jpg", "ü/x")
ENCODED = {"a": "a", "red flower.jpg": "red+flower.jpg", "ü/x": "%C3%BC/x"}
INITIAL = ("unversioned", "enabled", "suspended")
# What `everything` watches: every non-key column whose value the table's state depends on.
WATCHED = (
    "stream_id",
    "status",
    "total_plain_size",
    "etag",
    "legal_hold",
    "retention_mode",
    "retain_until",
    "expires_at",
)
EVENTING_COLUMNS = (
    "status",
    "total_plain_size",
    "stream_id",
    "user_metadata",
    "tags",
    "acl",
    "retention_mode",
    "retain_until",
    "legal_hold",
    "etag",
)

PROPERTY = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

# (key, event name, versionId or None, size or None): one expected S3 event
Expected = tuple[str, str, str | None, int | None]
Op = tuple[Any, ...]


def reset(db: Metabase) -> None:
    """Empty the metabase and every stream's records, as the `db` fixture does per test."""
    with db.write() as conn:
        for emptied in (objects, buckets, projects, change_records, change_offsets):
            conn.execute(sa.delete(emptied))
        conn.execute(
            sa.update(change_partitions).values(
                next_position=0, last_commit_ns=0, last_transaction=None
            )
        )


# --- random operation sequences ---------------------------------------------------------------


def operation(bucket_names: Sequence[str], keys: Sequence[str], *, lock: bool) -> Any:
    """One operation on a bucket of `bucket_names`; with `lock`, also object lock settings
    and time passing (so retention can expire)."""
    bucket = st.sampled_from(bucket_names)
    key = st.sampled_from(keys)
    size = st.integers(min_value=0, max_value=64)
    pick = st.integers(min_value=0, max_value=7)  # which current row, modulo how many
    mode = st.none() | st.just("null") | pick  # DeleteObjects item: no version, null, a row
    put = st.tuples(st.just("put"), bucket, key, size, st.booleans())
    delete = st.tuples(st.just("delete"), bucket, key)
    delete_version = st.tuples(st.just("delete_version"), bucket, key, pick, st.booleans())
    delete_many = st.tuples(
        st.just("delete_objects"),
        bucket,
        st.lists(st.tuples(key, mode), min_size=1, max_size=4),
        st.booleans(),
    )
    ops = [  # repeated: drawn more often
        put,
        put,
        put,
        st.tuples(st.just("upload"), bucket, key, size),
        st.tuples(st.just("pending"), bucket, key, st.booleans()),
        st.tuples(st.just("finish"), bucket, key, size),
        st.tuples(st.just("copy"), bucket, key, bucket, key),
        delete,
        delete,
        delete_version,
        delete_version,
        delete_many,
        delete_many,
        st.tuples(st.just("versioning"), bucket, st.booleans()),
    ]
    if lock:
        locked = st.just("locked") | bucket
        retention = st.none() | st.tuples(
            st.sampled_from(RetentionMode), st.integers(min_value=1, max_value=3)
        )
        hold = st.tuples(st.just("legal_hold"), locked, key, st.booleans(), st.none() | pick)
        retain = st.tuples(st.just("retention"), locked, key, retention, st.none() | pick)
        ops += [hold, hold, retain, retain, st.tuples(st.just("tick"), st.integers(1, 3))]
    return st.one_of(ops)


@st.composite
def event_scenarios(draw: st.DrawFn) -> tuple[list[str], str, list[Op]]:
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True))
    initial = draw(st.sampled_from(INITIAL))
    ops = draw(st.lists(operation(["events"], keys, lock=False), min_size=2, max_size=16))
    return keys, initial, ops


@st.composite
def replay_scenarios(
    draw: st.DrawFn,
) -> tuple[list[str], dict[str, str], bool, list[Op]]:
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique=True))
    initial = {name: draw(st.sampled_from(INITIAL)) for name in ("evented", "quiet")}
    locked_eventing = draw(st.booleans())
    names = ["evented", "quiet", "locked"]
    # every key in every bucket first, so that most operations find something to change
    ops: list[Op] = [("put", bucket, key, 1, False) for bucket in names for key in keys]
    ops += draw(st.lists(operation(names, keys, lock=True), min_size=1, max_size=18))
    return keys, initial, locked_eventing, ops


# --- running them, and what S3 would send for each ------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Run:
    """Applies operations in one project, and notes what events each should send."""

    db: Metabase
    project: Project
    clock: Clock
    versioning: dict[str, Versioning] = field(default_factory=dict)
    pending: dict[tuple[str, str], list[Object]] = field(default_factory=dict)
    expected: dict[str, list[Expected]] = field(default_factory=dict)  # request id -> events
    delete_order: dict[str, list[tuple[str, str | None]]] = field(default_factory=dict)
    begun: int = 0  # pending rows inserted (begin_object transactions)
    ever_committed: set[tuple[str, str]] = field(default_factory=set)

    def bucket(self, name: str, initial: str, *, lock: bool = False) -> None:
        loc = BucketLocation(self.project.id, name)
        made = create_bucket(self.db, loc, object_lock_enabled=lock)
        state = made.versioning
        if initial in ("enabled", "suspended") and not lock:
            state = set_bucket_versioning(self.db, loc, enabled=True).versioning
        if initial == "suspended" and not lock:
            state = set_bucket_versioning(self.db, loc, enabled=False).versioning
        self.versioning[name] = state

    def loc(self, bucket: str, key: str) -> ObjectLocation:
        return ObjectLocation(self.project.id, bucket, key)

    def committed(self, bucket: str, key: str) -> list[Object]:
        """The key's committed rows, newest first."""
        with self.db.read() as conn:
            rows = conn.execute(
                sa.select(objects)
                .where(
                    objects.c.project_id == self.project.id,
                    objects.c.bucket_name == bucket,
                    objects.c.object_key == key.encode("utf-8"),
                    objects.c.status.in_([int(s) for s in COMMITTED_STATUSES]),
                )
                .order_by(objects.c.version.desc())
            ).all()
        return [object_from_row(r) for r in rows]

    def version_id(self, bucket: str, key: str, pick: int) -> str:
        """The version ID of one of the key's rows; one of no row if it has none."""
        rows = self.committed(bucket, key)
        if not rows:
            return encode_version_id(pick + 1, uuid.uuid4())  # well formed, names nothing
        return rows[pick % len(rows)].version_id

    def vid(self, bucket: str, row: Object) -> str | None:
        """The versionId an event of `row` carries: none in an unversioned bucket."""
        return None if self.versioning[bucket] is Versioning.UNVERSIONED else row.version_id

    def apply(self, index: int, op: Op) -> None:
        rid = f"op{index}"
        tag = TransactionTag(request_id=rid)
        name = op[0]
        if name == "tick":
            self.clock.now += timedelta(days=op[1])
            return
        self.clock.now += timedelta(seconds=1)
        bucket = op[1]
        expected: list[Expected] = []
        if name == "put":
            _, _, key, size, expires = op
            data = b"x" * size
            result = commit_inline_object(
                self.db,
                self.loc(bucket, key),
                data,
                etag=hashlib.md5(data).hexdigest(),
                expires_at=self.clock.now + timedelta(hours=1) if expires else None,
                tag=tag,
            )
            expected.append(self.created(bucket, key, OBJECT_CREATED_PUT, result.object))
        elif name in ("upload", "finish"):
            _, _, key, size = op
            if name == "upload":
                pending = begin_object(self.db, self.loc(bucket, key))
                self.begun += 1
            elif self.pending.get((bucket, key)):
                pending = self.pending[(bucket, key)].pop(0)
            else:
                return
            result = commit_object(
                self.db,
                pending,
                size=size,
                etag="0" * 32,
                tag=TransactionTag(operation=Operation.COMPLETE_MULTIPART_UPLOAD, request_id=rid),
            )
            created = OBJECT_CREATED_COMPLETE_MULTIPART_UPLOAD
            expected.append(self.created(bucket, key, created, result.object))
        elif name == "pending":
            _, _, key, expires = op
            expires_at = self.clock.now + timedelta(hours=1) if expires else None
            row = begin_object(self.db, self.loc(bucket, key), expires_at=expires_at)
            self.pending.setdefault((bucket, key), []).append(row)
            self.begun += 1
        elif name == "copy":
            _, source_bucket, source_key, bucket, key = op
            source, destination = self.loc(source_bucket, source_key), self.loc(bucket, key)
            try:
                copied = copy_object(
                    self.db,
                    source,
                    destination,
                    metadata_directive="REPLACE" if source == destination else "COPY",
                    tag=tag,
                )
            except ObjectNotFound:
                return  # no source, or its latest version is a delete marker
            expected.append(self.created(bucket, key, OBJECT_CREATED_COPY, copied.object))
            if source == destination:  # a copy onto itself also updates metadata
                update = self.created(bucket, key, OBJECT_METADATA_UPDATE, copied.object)
                expected.append(update)
        elif name == "delete":
            key = op[2]
            deleted = delete_object(self.db, self.loc(bucket, key), tag=tag)
            if deleted.marker is not None:  # replaces the null version, if it removed one
                marker = deleted.marker
                expected.append(
                    (key, OBJECT_REMOVED_DELETE_MARKER_CREATED, self.vid(bucket, marker), None)
                )
            else:
                expected += [(key, OBJECT_REMOVED_DELETE, None, None) for _ in deleted.removed]
        elif name == "delete_version":
            _, _, key, pick, bypass = op
            version_id = self.version_id(bucket, key, pick)
            try:
                deleted = delete_object_version(
                    self.db,
                    self.loc(bucket, key),
                    version_id,
                    bypass_governance=bypass,
                    can_bypass_governance=bypass,
                    tag=tag,
                )
            except ObjectLocked:
                return
            assert [r.version_id for r in deleted.removed] in ([], [version_id])
            expected += [
                (key, OBJECT_REMOVED_DELETE, self.vid(bucket, r), None) for r in deleted.removed
            ]
        elif name == "delete_objects":
            expected += self.delete_objects(rid, bucket, op[2], op[3], tag)
        elif name == "versioning":
            try:
                changed = set_bucket_versioning(
                    self.db, BucketLocation(self.project.id, bucket), enabled=op[2]
                )
            except InvalidBucketState:
                return  # object lock: never suspended
            self.versioning[bucket] = changed.versioning
        elif name == "legal_hold":
            _, _, key, on, pick = op
            version_id = None if pick is None else self.version_id(bucket, key, pick)
            try:
                put_object_legal_hold(self.db, self.loc(bucket, key), on, version_id=version_id)
            except MetabaseError:
                return  # no object lock, a delete marker, no such version
        elif name == "retention":
            _, _, key, setting, pick = op
            version_id = None if pick is None else self.version_id(bucket, key, pick)
            retention = None
            if setting is not None:
                retention = Retention(setting[0], self.clock.now + timedelta(days=setting[1]))
            try:
                put_object_retention(
                    self.db,
                    self.loc(bucket, key),
                    retention,
                    version_id=version_id,
                    bypass_governance=True,
                    can_bypass_governance=True,
                )
            except MetabaseError:
                return  # no object lock, a delete marker, compliance kept, no such version
        else:
            raise AssertionError(f"unknown operation {name!r}")
        if expected:
            self.expected[rid] = expected
        self.note_committed()

    def created(self, bucket: str, key: str, event: str, row: Object) -> Expected:
        assert row.status in (Status.COMMITTED_UNVERSIONED, Status.COMMITTED_VERSIONED)
        return (key, event, self.vid(bucket, row), row.total_plain_size)

    def delete_objects(
        self,
        rid: str,
        bucket: str,
        wanted: list[tuple[str, Any]],
        bypass: bool,
        tag: TransactionTag,
    ) -> list[Expected]:
        items = []
        for key, mode in wanted:
            version_id = mode if mode in (None, "null") else self.version_id(bucket, key, mode)
            items.append(DeleteObjectsItem(key, version_id))
        before = self.snapshot(bucket)
        result = delete_objects(
            self.db,
            BucketLocation(self.project.id, bucket),
            items,
            bypass_governance=bypass,
            can_bypass_governance=bypass,
            tag=tag,
        )
        assert all(e.code == "AccessDenied" for e in result.errors), result.errors
        # The net change, from the table: items may remove a marker an earlier item of the
        # same request made (suspended: `k`, then `k` version null), which then never
        # reaches the table; and "null" names different rows before and after.
        after = self.snapshot(bucket)
        removed = [row for at, row in before.items() if at not in after]
        markers = [row for at, row in after.items() if at not in before]
        assert {identity(r) for r in removed} == {identity(r) for r in result.removed}
        assert all(row.is_delete_marker for row in markers)
        # Only a new null version (a null marker, when suspended) replaces a row: the old
        # null version. S3 sends no ObjectRemoved:Delete for what a write replaces.
        new_null = {row.object_key for row in markers if row.status.is_unversioned}
        deleted = [
            row
            for row in result.removed
            if not (row.status.is_unversioned and row.object_key in new_null)
        ]
        expected: list[Expected] = [
            (row.object_key, OBJECT_REMOVED_DELETE, self.vid(bucket, row), None) for row in deleted
        ]
        expected += [
            (row.object_key, OBJECT_REMOVED_DELETE_MARKER_CREATED, self.vid(bucket, row), None)
            for row in markers
        ]
        # the deletes in request order
        reported = {(row.object_key, row.version_id): row for row in deleted}
        in_order = dict.fromkeys(
            (d.key, d.deleted_version_id)
            for d in result.deleted
            if (d.key, d.deleted_version_id) in reported
        )
        assert len(in_order) == len(deleted)
        self.delete_order[rid] = [
            (key, self.vid(bucket, reported[(key, vid)])) for key, vid in in_order
        ]
        return expected

    def snapshot(self, bucket: str) -> dict[tuple[str, int, uuid.UUID], Object]:
        """The bucket's committed rows."""
        with self.db.read() as conn:
            rows = conn.execute(
                sa.select(objects).where(
                    objects.c.project_id == self.project.id,
                    objects.c.bucket_name == bucket,
                    objects.c.status.in_([int(s) for s in COMMITTED_STATUSES]),
                )
            ).all()
        found = [object_from_row(r) for r in rows]
        return {identity(row): row for row in found}

    def note_committed(self) -> None:
        with self.db.read() as conn:
            rows = conn.execute(
                sa.select(objects.c.bucket_name, objects.c.object_key)
                .where(
                    objects.c.project_id == self.project.id,
                    objects.c.status.in_([int(s) for s in COMMITTED_STATUSES]),
                )
                .distinct()
            ).all()
        self.ever_committed |= {(r.bucket_name, bytes(r.object_key).decode()) for r in rows}


def identity(row: Object) -> tuple[str, int, uuid.UUID]:
    return (row.object_key, row.version, row.stream_id)


def start(db: Metabase) -> Run:
    reset(db)
    clock = Clock()
    db.clock = clock
    return Run(db, create_project(db, "property"), clock)


def describe(ops: Sequence[Op]) -> str:
    return "\n".join(f"  op{i}: {op!r}" for i, op in enumerate(ops))


def obj(event: EventRecord) -> dict[str, Any]:
    body: dict[str, Any] = event.message["s3"]["object"]
    return body


# --- 1. events follow the object's state ------------------------------------------------------


@PROPERTY
@given(scenario=event_scenarios())
def test_events_follow_each_keys_state(
    db: Metabase, eventing: Eventing, scenario: tuple[list[str], str, list[Op]]
) -> None:
    keys, initial, ops = scenario
    run = start(db)
    eventing.buckets.clear()
    eventing.enable(run.project.id, "events")
    run.bucket("events", initial)
    for i, op in enumerate(ops):
        run.apply(i, op)

    records = read_all(db)
    owners = {str(run.project.id): str(run.project.public_id)}
    events: list[EventRecord] = []
    by_request: dict[str, list[EventRecord]] = defaultdict(list)
    pending_only = 0
    for group in transactions(records):
        made = s3_events(group, owners=owners)
        mods = [(r["mod_type"], m) for r in group for m in r["mods"]]
        statuses = {
            (m["new_values"] if kind == "INSERT" else m["old_values"])["status"] for kind, m in mods
        }
        if statuses == {int(Status.PENDING)}:  # (c) pending rows alone make no events
            assert made == [], describe(ops)
            pending_only += 1
        names = [e.event_name for e in made]
        # deletes before delete markers (DeleteObjects: DELETE mods, then INSERT mods)
        if OBJECT_REMOVED_DELETE_MARKER_CREATED in names:
            first_marker = names.index(OBJECT_REMOVED_DELETE_MARKER_CREATED)
            assert OBJECT_REMOVED_DELETE not in names[first_marker:], describe(ops)
        for event in made:
            by_request[event.message["responseElements"]["x-amz-request-id"]].append(event)
        events += made
    # beginning an upload is its own transaction (recorded or, as transaction exclusion
    # allows, not), never one that makes events
    assert pending_only <= run.begun, describe(ops)

    # each operation sent what S3 would, with the version IDs the metabase reported
    assert set(by_request) <= set(run.expected), describe(ops)
    for rid, want in run.expected.items():
        got = [
            (e.key, e.event_name, obj(e).get("versionId"), obj(e).get("size"))
            for e in by_request.get(rid, [])
        ]
        assert sorted(got, key=repr) == sorted(want, key=repr), f"{rid}\n{describe(ops)}"
        if rid in run.delete_order:
            deletes = [(k, v) for k, name, v, _ in got if name == OBJECT_REMOVED_DELETE]
            assert deletes == run.delete_order[rid], f"{rid}\n{describe(ops)}"

    last: dict[str, EventRecord] = {}
    for event in events:
        # (d) keys URL-encoded as S3 does, and decoded back to the key
        assert event.key in keys
        assert obj(event)["key"] == ENCODED[event.key] == encode_key(event.key)
        assert decode_key(obj(event)["key"]) == event.key
        assert event.message["s3"]["bucket"]["name"] == "events"
        assert event.message["s3"]["bucket"]["ownerIdentity"]["principalId"] == str(
            run.project.public_id
        )
        # (e) no versionId in a bucket never versioned (suspending one versions it, as in
        # S3); else null or the row's 32 hex digits
        vid = obj(event).get("versionId")
        if initial == "unversioned" and not any(op[0] == "versioning" for op in ops):
            assert vid is None
        assert vid is None or vid == "null" or len(vid) == 32
        # (a) a key's sequencers strictly increase (fixed width: compared as strings)
        assert len(event.sequencer) == 24
        if event.key in last:
            assert last[event.key].sequencer < event.sequencer, describe(ops)
        last[event.key] = event

    # (b) each key's last event says what it is now: a created object or delete marker is
    # the key's latest row; a delete leaves no rows (or, versioned, older ones); no row ever,
    # no event. And replaying a key's events (versionId, or "null" when there is none,
    # names the version) gives its versions, oldest first, as the table has them.
    for key in keys:
        rows = list(reversed(run.committed("events", key)))  # oldest first
        final = last.get(key)
        if not rows:
            if ("events", key) in run.ever_committed:
                assert final is not None, describe(ops)
                assert final.event_name == OBJECT_REMOVED_DELETE, describe(ops)
            else:
                assert final is None, describe(ops)
            continue
        assert final is not None, describe(ops)
        latest = rows[-1]
        if final.event_name.startswith("ObjectCreated:"):
            assert not latest.is_delete_marker, describe(ops)
        elif final.event_name == OBJECT_REMOVED_DELETE_MARKER_CREATED:
            assert latest.is_delete_marker, describe(ops)
        if final.event_name != OBJECT_REMOVED_DELETE:
            assert obj(final).get("versionId", "null") == latest.version_id, describe(ops)
        versions: list[tuple[str, bool]] = []
        for event in events:
            if event.key != key:
                continue
            vid = obj(event).get("versionId", "null")
            if event.event_name == OBJECT_REMOVED_DELETE:
                assert vid in [v for v, _ in versions], describe(ops)
                versions = [(v, m) for v, m in versions if v != vid]
            elif event.event_name == OBJECT_METADATA_UPDATE:  # of a version, which stays
                assert vid in [v for v, _ in versions], describe(ops)
            else:  # a new null version replaces the old one
                versions = [(v, m) for v, m in versions if v != "null" or vid != "null"]
                marker = event.event_name == OBJECT_REMOVED_DELETE_MARKER_CREATED
                versions.append((vid, marker))
        assert versions == [(r.version_id, r.is_delete_marker) for r in rows], describe(ops)


# --- 2. the stream is complete: replaying it rebuilds the table -------------------------------

Location = tuple[str, str, str, int]


def location(keys: dict[str, Any]) -> Location:
    return (keys["project_id"], keys["bucket_name"], keys["object_key"], keys["version"])


def replay(
    records: list[dict[str, Any]], columns: Sequence[str], *, committed_only: bool = False
) -> dict[Location, dict[str, Any]]:
    """The rows a stream's records describe, applied in (partition, position) order.

    `committed_only`: pending rows are left out (a stream that allows transaction exclusion
    need not see an upload begin, only the commit deleting its pending row)."""
    rows: dict[Location, dict[str, Any]] = {}
    for record in records:
        for mod in record["mods"]:
            at = location(mod["keys"])
            if record["mod_type"] == "INSERT":
                assert at not in rows, at
                assert set(mod["new_values"]) == set(columns)
                if not (committed_only and mod["new_values"]["status"] == Status.PENDING):
                    rows[at] = dict(mod["new_values"])
            elif record["mod_type"] == "UPDATE":
                assert at in rows, at
                rows[at].update(mod["new_values"])
            elif committed_only and mod["old_values"]["status"] == Status.PENDING:
                assert at not in rows, at
            else:
                assert at in rows, at
                del rows[at]
    return rows


def table(db: Metabase, columns: Sequence[str]) -> dict[Location, dict[str, Any]]:
    """The objects table, its values encoded as change records encode them."""
    codes = {c.name: type_code(c) for c in objects.columns}
    keys = ("project_id", "bucket_name", "object_key", "version")
    with db.read() as conn:
        result = conn.execute(sa.select(*(objects.c[c] for c in (*keys, *columns)))).all()
    out: dict[Location, dict[str, Any]] = {}
    for row in result:
        m = row._mapping
        at = location({k: encode(codes[k], m[k]) for k in keys})
        out[at] = {c: encode(codes[c], m[c]) for c in columns}
    return out


@pytest.fixture
def everything_stream(extra_stream: Any) -> str:
    """A stream over every column that matters, for every bucket (no transaction
    exclusion), with whole new rows: made once per test, kept across its examples."""
    return str(extra_stream("everything", list(WATCHED), {"value_capture_type": "NEW_ROW"}))


@PROPERTY
@given(scenario=replay_scenarios())
def test_replaying_the_stream_rebuilds_the_table(
    db: Metabase,
    eventing: Eventing,
    everything_stream: str,
    scenario: tuple[list[str], dict[str, str], bool, list[Op]],
) -> None:
    _, initial, locked_eventing, ops = scenario
    run = start(db)
    eventing.buckets.clear()
    eventing.enable(run.project.id, "evented")
    evented = {"evented"}
    if locked_eventing:
        eventing.enable(run.project.id, "locked")
        evented.add("locked")
    run.bucket("evented", initial["evented"])
    run.bucket("quiet", initial["quiet"])
    run.bucket("locked", "enabled", lock=True)
    for i, op in enumerate(ops):
        run.apply(i, op)

    everything = read_all(db, everything_stream)
    for record in everything:
        assert record["value_capture_type"] == "NEW_ROW"
        for mod in record["mods"]:
            assert mod["old_values"] == {}
            if record["mod_type"] == "DELETE":
                assert mod["new_values"] == {}
            else:  # NEW_ROW: every watched column, UPDATE too
                assert set(mod["new_values"]) == set(WATCHED)
    assert replay(everything, WATCHED) == table(db, WATCHED), describe(ops)

    eventing_records = read_all(db)
    # UPDATEs: the lock settings that changed (legal hold, retention), nothing else
    for record in eventing_records:
        if record["mod_type"] == "UPDATE":
            for mod in record["mods"]:
                changed = set(mod["old_values"])
                assert changed, describe(ops)
                assert changed <= {"legal_hold", "retention_mode", "retain_until"}, describe(ops)
    project = str(run.project.id)
    for record in eventing_records:
        for mod in record["mods"]:
            assert mod["keys"]["project_id"] == project
            assert mod["keys"]["bucket_name"] in evented, describe(ops)
    rebuilt = replay(eventing_records, EVENTING_COLUMNS, committed_only=True)
    wanted = {
        at: values
        for at, values in table(db, EVENTING_COLUMNS).items()
        if at[1] in evented and values["status"] != Status.PENDING
    }
    assert rebuilt == wanted, describe(ops)


# --- known bugs of src/ (see the switches at the top) -----------------------------------------


def events_by_request(db: Metabase, run: Run) -> dict[str, list[EventRecord]]:
    owners = {str(run.project.id): str(run.project.public_id)}
    found: dict[str, list[EventRecord]] = defaultdict(list)
    for group in transactions(read_all(db)):
        for event in s3_events(group, owners=owners):
            found[event.message["responseElements"]["x-amz-request-id"]].append(event)
    return found


def sent(events: list[EventRecord]) -> list[tuple[str, str | None]]:
    return [(e.event_name, obj(e).get("versionId")) for e in events]


def test_delete_objects_reports_a_version_deleted_beside_a_new_marker(
    db: Metabase, eventing: Eventing
) -> None:
    run = start(db)
    eventing.enable(run.project.id, "events")
    run.bucket("events", "enabled")
    v1 = commit_inline_object(db, run.loc("events", "a"), b"1", etag="e").object
    result = delete_objects(
        db,
        BucketLocation(run.project.id, "events"),
        [DeleteObjectsItem("a"), DeleteObjectsItem("a", v1.version_id)],
        tag=TransactionTag(request_id="both"),
    )
    marker = result.deleted[0].delete_marker_version_id
    assert [r.version_id for r in result.removed] == [v1.version_id]
    # S3: one event per deleted version or created delete marker; the marker replaces nothing
    assert sent(events_by_request(db, run)["both"]) == [
        (OBJECT_REMOVED_DELETE, v1.version_id),
        (OBJECT_REMOVED_DELETE_MARKER_CREATED, marker),
    ]


def test_delete_objects_sends_deletes_in_request_order(db: Metabase, eventing: Eventing) -> None:
    run = start(db)
    eventing.enable(run.project.id, "events")
    run.bucket("events", "enabled")
    v1, v2, v3 = (
        commit_inline_object(db, run.loc("events", "a"), b"x", etag="e").object for _ in range(3)
    )
    request = [v2, v1, v3]  # neither ascending nor descending
    delete_objects(
        db,
        BucketLocation(run.project.id, "events"),
        [DeleteObjectsItem("a", v.version_id) for v in request],
        tag=TransactionTag(request_id="three"),
    )
    assert sent(events_by_request(db, run)["three"]) == [
        (OBJECT_REMOVED_DELETE, v.version_id) for v in request
    ]
