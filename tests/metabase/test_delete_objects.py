"""DeleteObjects: every statement of DESIGN.md "Bulk delete" and the bulk-deletion test plan."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
import sqlalchemy as sa

from ripple.metabase import (
    BucketLocation,
    DeletedObject,
    DeleteObjectsError,
    DeleteObjectsItem,
    Metabase,
    Status,
    Versioning,
    delete_objects,
    get_object,
    set_bucket_versioning,
)
from ripple.metabase.errors import BucketNotFound, InvalidDeleteRequest
from ripple.metabase.types import encode_version_id
from tests.metabase.steps import Row, Verify, World, statements, unchanged

S = Status
Item = DeleteObjectsItem


def test_versioned_without_version_places_markers_and_deletes_nothing(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    obj = world.put(bucket, "a")
    result = delete_objects(world.db, bucket, [Item("a"), Item("never-existed")])
    assert result.errors == []
    assert result.removed == []
    rows = {(r.object_key, r.status): r for r in world.rows()}
    marker_a = rows[("a", S.DELETE_MARKER_VERSIONED)]
    marker_ghost = rows[("never-existed", S.DELETE_MARKER_VERSIONED)]
    assert result.deleted == [
        DeletedObject("a", None, None, True, marker_a.version_id),
        DeletedObject("never-existed", None, None, True, marker_ghost.version_id),
    ]
    Verify(
        [
            Row("a", S.DELETE_MARKER_VERSIONED, marker_a.version_id),
            Row("a", S.COMMITTED_VERSIONED, obj.version_id),
            Row("never-existed", S.DELETE_MARKER_VERSIONED),
        ]
    ).check(world)
    assert marker_a.version > obj.version


def test_suspended_places_null_marker_and_deletes_null_version(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    versioned = world.put(bucket, "a")
    set_bucket_versioning(world.db, bucket, enabled=False)
    null = world.put(bucket, "a")
    result = delete_objects(world.db, bucket, [Item("a"), Item("b")])
    assert result.errors == []
    assert [r.stream_id for r in result.removed] == [null.stream_id]
    assert result.deleted == [
        DeletedObject("a", None, "null", True, "null"),
        DeletedObject("b", None, None, True, "null"),
    ]
    Verify(
        [
            Row("a", S.DELETE_MARKER_UNVERSIONED, "null"),
            Row("a", S.COMMITTED_VERSIONED, versioned.version_id),
            Row("b", S.DELETE_MARKER_UNVERSIONED, "null"),
        ]
    ).check(world)


def test_unversioned_deletes_without_marker_and_absent_is_no_error(world: World) -> None:
    bucket = world.bucket()
    world.put(bucket, "a")
    world.put(bucket, "keep")
    result = delete_objects(world.db, bucket, [Item("a"), Item("absent")])
    assert result.errors == []
    assert result.deleted == [
        DeletedObject("a", None, "null", False, None),
        DeletedObject("absent", None, None, False, None),
    ]
    Verify([Row("keep", S.COMMITTED_UNVERSIONED)]).check(world)


def test_exact_versions_and_delete_markers(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    v1 = world.put(bucket, "a")
    v2 = world.put(bucket, "a")
    marker = delete_objects(world.db, bucket, [Item("a")]).deleted[0].delete_marker_version_id
    assert marker is not None
    missing = encode_version_id(v2.version + 50, v2.stream_id)
    result = delete_objects(
        world.db,
        bucket,
        [Item("a", marker), Item("a", v1.version_id), Item("a", missing)],
    )
    assert result.errors == []
    assert result.deleted == [
        DeletedObject("a", marker, marker, True, marker),
        DeletedObject("a", v1.version_id, v1.version_id, False, None),
        DeletedObject("a", missing, None, False, None),
    ]
    Verify([Row("a", S.COMMITTED_VERSIONED, v2.version_id)]).check(world)
    assert get_object(world.db, world.loc(bucket, "a")).version_id == v2.version_id


def test_legal_hold_never_deleted_other_items_still_are(world: World) -> None:
    bucket = world.bucket(lock=True)
    held = world.put(bucket, "held", legal_hold=True)
    free = world.put(bucket, "free")
    result = delete_objects(
        world.db,
        bucket,
        [Item("held", held.version_id), Item("free", free.version_id)],
        bypass_governance=True,
        can_bypass_governance=True,
    )
    assert [(e.key, e.version_id, e.code) for e in result.errors] == [
        ("held", held.version_id, "AccessDenied")
    ]
    assert result.deleted == [DeletedObject("free", free.version_id, free.version_id, False, None)]
    Verify([Row("held", S.COMMITTED_VERSIONED, held.version_id)]).check(world)


@pytest.mark.parametrize(
    ("mode", "bypass", "allowed", "deleted"),
    [
        ("governance", False, False, False),
        ("governance", True, False, False),
        ("governance", False, True, False),
        ("governance", True, True, True),
        ("compliance", False, False, False),
        ("compliance", True, True, False),
    ],
)
def test_active_retention(
    world: World, mode: str, bypass: bool, allowed: bool, deleted: bool
) -> None:
    bucket = world.bucket(lock=True)
    retention = world.governance(days=2) if mode == "governance" else world.compliance(days=2)
    obj = world.put(bucket, "a", retention=retention)
    result = delete_objects(
        world.db,
        bucket,
        [Item("a", obj.version_id)],
        bypass_governance=bypass,
        can_bypass_governance=allowed,
    )
    if deleted:
        assert result.errors == []
        assert [d.deleted_version_id for d in result.deleted] == [obj.version_id]
        Verify([]).check(world)
    else:
        assert result.deleted == []
        assert [(e.key, e.code) for e in result.errors] == [("a", "AccessDenied")]
        assert "retained" in result.errors[0].message
        Verify([Row("a", S.COMMITTED_VERSIONED, obj.version_id)]).check(world)


def test_expired_retention_is_deletable(world: World) -> None:
    bucket = world.bucket(lock=True)
    obj = world.put(bucket, "a", retention=world.compliance(days=1))
    world.tick(timedelta(days=1, seconds=1))
    result = delete_objects(world.db, bucket, [Item("a", obj.version_id)])
    assert result.errors == []
    Verify([]).check(world)


def test_lock_bucket_without_version_places_marker_over_locked_object(world: World) -> None:
    """A delete marker deletes nothing, so object lock does not stop it (as in S3)."""
    bucket = world.bucket(lock=True)
    obj = world.put(bucket, "a", legal_hold=True)
    result = delete_objects(world.db, bucket, [Item("a")])
    assert result.errors == []
    assert result.deleted[0].delete_marker
    Verify(
        [Row("a", S.DELETE_MARKER_VERSIONED), Row("a", S.COMMITTED_VERSIONED, obj.version_id)]
    ).check(world)


def test_more_than_1000_deletes_nothing(world: World) -> None:
    bucket = world.bucket()
    for key in ("a", "b"):
        world.put(bucket, key)
    items = [Item("a"), Item("b")] + [Item(f"k{i}") for i in range(999)]
    assert len(items) == 1001
    with unchanged(world, InvalidDeleteRequest, "MalformedXML"):
        delete_objects(world.db, bucket, items)


def test_exactly_1000_items(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    result = delete_objects(world.db, bucket, [Item(f"k{i:04}") for i in range(1000)])
    assert result.errors == []
    assert len(result.deleted) == 1000
    assert len(world.rows()) == 1000
    assert all(r.status is S.DELETE_MARKER_VERSIONED for r in world.rows())


def test_no_items_is_an_error(world: World) -> None:
    bucket = world.bucket()
    with unchanged(world, InvalidDeleteRequest, "MalformedXML"):
        delete_objects(world.db, bucket, [])


def test_quiet_mode_omits_successes_keeps_errors(world: World) -> None:
    bucket = world.bucket(lock=True)
    held = world.put(bucket, "held", legal_hold=True)
    world.put(bucket, "b")
    result = delete_objects(
        world.db, bucket, [Item("held", held.version_id), Item("b"), Item("c")], quiet=True
    )
    assert result.deleted == []
    assert [(e.key, e.code) for e in result.errors] == [("held", "AccessDenied")]
    Verify(
        [
            Row("b", S.DELETE_MARKER_VERSIONED),
            Row("b", S.COMMITTED_VERSIONED),
            Row("c", S.DELETE_MARKER_VERSIONED),
            Row("held", S.COMMITTED_VERSIONED, held.version_id),
        ]
    ).check(world)


def test_duplicates_are_handled_once(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    v1 = world.put(bucket, "v")
    world.put(bucket, "v")
    result = delete_objects(
        world.db,
        bucket,
        [
            Item("a"),
            Item("a"),
            Item("v", v1.version_id),
            Item("v", v1.version_id.upper()),
            Item("a"),
        ],
    )
    assert [(d.key, d.version_id) for d in result.deleted] == [("a", None), ("v", v1.version_id)]
    assert sum(1 for r in world.rows() if r.object_key == "a") == 1


def test_items_apply_in_order_as_sequential_deletes(world: World) -> None:
    """In a suspended bucket, deleting `a` makes a null delete marker; deleting version
    `null` next removes that marker, exactly as two DeleteObject calls would."""
    bucket = world.bucket(versioning=Versioning.SUSPENDED)
    world.put(bucket, "a")
    result = delete_objects(world.db, bucket, [Item("a"), Item("a", "null")])
    assert result.deleted == [
        DeletedObject("a", None, "null", True, "null"),
        DeletedObject("a", "null", "null", True, "null"),
    ]
    Verify([]).check(world)


def test_bad_keys_and_version_ids_are_item_errors(world: World) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    obj = world.put(bucket, "a")
    result = delete_objects(
        world.db,
        bucket,
        [
            Item("a", "not-a-version"),
            Item("x" * 1025),
            Item("bad\udc80surrogate"),
            Item("a", obj.version_id),
        ],
    )
    assert result.errors == [
        DeleteObjectsError(
            "a",
            "not-a-version",
            "NoSuchVersion",
            "the version ID is not valid: use `null` or an ID that ListObjectVersions returned",
        ),
        DeleteObjectsError(
            "x" * 1025, None, "InvalidArgument", "object key is 1025 bytes; the limit is 1024"
        ),
        DeleteObjectsError(
            "bad\udc80surrogate",
            None,
            "InvalidArgument",
            "object key must be valid UTF-8 (it has a lone surrogate)",
        ),
    ]
    assert [d.deleted_version_id for d in result.deleted] == [obj.version_id]
    Verify([]).check(world)


def test_other_buckets_untouched(world: World) -> None:
    mine = world.bucket("mine")
    other = world.bucket("other")
    world.put(mine, "a")
    world.put(other, "a")
    delete_objects(world.db, mine, [Item("a")])
    Verify([Row("a", S.COMMITTED_UNVERSIONED, bucket="other")]).check(world)


def test_unknown_bucket(world: World) -> None:
    world.put(world.bucket(), "a")
    with unchanged(world, BucketNotFound, "NoSuchBucket"):
        delete_objects(world.db, BucketLocation(world.project.id, "nope"), [Item("a")])


@contextmanager
def failing_inserts(db: Metabase) -> Iterator[None]:
    def fail(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        if statement.lstrip().upper().startswith("INSERT"):
            raise RuntimeError("injected failure while inserting delete markers")

    sa.event.listen(db.engine, "before_cursor_execute", fail)
    try:
        yield
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", fail)


def test_one_transaction_failure_deletes_nothing(world: World) -> None:
    """Suspended: the request deletes null versions and inserts markers; if the INSERT
    fails, the DELETE that ran before it in the same transaction is rolled back."""
    bucket = world.bucket(versioning=Versioning.SUSPENDED)
    for key in ("a", "b", "c"):
        world.put(bucket, key)
    before = world.rows()
    with failing_inserts(world.db), pytest.raises(RuntimeError, match="injected"):
        delete_objects(world.db, bucket, [Item("a"), Item("b"), Item("c")])
    assert world.rows() == before


def _populate(world: World, bucket: BucketLocation, n: int, versioned: bool) -> list[Item]:
    """n objects (two versions each when versioned) and a request touching all of them."""
    items = []
    for i in range(n):
        first = world.put(bucket, f"key-{i:04}")
        if versioned:
            world.put(bucket, f"key-{i:04}")
            items.append(Item(f"key-{i:04}", first.version_id))
        items.append(Item(f"key-{i:04}"))
    return items


@pytest.mark.parametrize("versioning", list(Versioning), ids=lambda v: v.name.lower())
def test_constant_number_of_statements(world: World, versioning: Versioning) -> None:
    """The statements sent are the same for 1 item as for 1000, and there are few."""
    counts = {}
    for n in (1, 500):
        bucket = world.bucket(f"bucket-{n}", versioning)
        items = _populate(world, bucket, n, versioning is not Versioning.UNVERSIONED)
        with statements(world.db) as sent:
            result = delete_objects(world.db, bucket, items[:1000])
        assert result.errors == []
        assert len(result.deleted) == min(len(items), 1000)
        counts[n] = [s.split()[0].upper() for s in sent]
    assert counts[1] == counts[500], counts
    data_statements = [s for s in counts[500] if s not in ("BEGIN", "BEGIN IMMEDIATE")]
    # bucket, key locks (PostgreSQL), highest versions, candidate rows, DELETE, INSERT
    assert len(data_statements) <= 6, counts[500]
    assert not any(s == "UPDATE" for s in data_statements)
