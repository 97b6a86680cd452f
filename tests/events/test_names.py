"""Event names from (mod type, status, operation), and event type patterns."""

from __future__ import annotations

import pytest

from ripple.events import ALL_EVENT_NAMES, event_name, is_created, matches, tagging_event_name
from ripple.events.names import changed_columns, event_version, update_event_names


@pytest.mark.parametrize(
    ("mod_type", "status", "operation", "name"),
    [
        ("INSERT", 3, None, "ObjectCreated:Put"),
        ("INSERT", 4, "put", "ObjectCreated:Put"),
        ("INSERT", 3, "copy", "ObjectCreated:Copy"),
        ("INSERT", 4, "complete-multipart-upload", "ObjectCreated:CompleteMultipartUpload"),
        ("INSERT", 3, "post", "ObjectCreated:Post"),
        ("INSERT", 3, "something-new", "ObjectCreated:Put"),
        ("INSERT", 5, None, "ObjectRemoved:DeleteMarkerCreated"),
        ("INSERT", 6, "delete", "ObjectRemoved:DeleteMarkerCreated"),
        ("INSERT", 5, "copy", "ObjectRemoved:DeleteMarkerCreated"),  # operation irrelevant
        ("INSERT", 1, "put", None),
        ("INSERT", None, "put", None),
        ("DELETE", 3, None, "ObjectRemoved:Delete"),
        ("DELETE", 4, "delete", "ObjectRemoved:Delete"),
        ("DELETE", 5, "delete", "ObjectRemoved:Delete"),
        ("DELETE", 6, "delete-objects", "ObjectRemoved:Delete"),
        ("DELETE", 1, "put", None),
        ("DELETE", None, "put", "ObjectRemoved:Delete"),  # no old values: documented
        ("UPDATE", 3, "put", None),
        ("DELETE", 3, "lifecycle-expiration", "LifecycleExpiration:Delete"),
        ("DELETE", 5, "lifecycle-expiration", "LifecycleExpiration:Delete"),  # a marker
        ("DELETE", 1, "lifecycle-expiration", None),  # an aborted upload
        ("INSERT", 5, "lifecycle-expiration", "LifecycleExpiration:DeleteMarkerCreated"),
        ("INSERT", 6, "lifecycle-expiration", "LifecycleExpiration:DeleteMarkerCreated"),
        ("INSERT", 3, "lifecycle-expiration", None),
        ("UPDATE", None, None, None),
        ("DELETE", 2, None, None),  # not a status
    ],
)
def test_event_name(mod_type: str, status: int | None, operation: str | None, name: str) -> None:
    assert event_name(mod_type, status, operation) == name


def test_all_names_by_family_and_version() -> None:
    families: dict[str, list[str]] = {}
    for name in ALL_EVENT_NAMES:
        families.setdefault(name.split(":")[0], []).append(name)
    assert {family: len(names) for family, names in families.items()} == {
        "ObjectCreated": 4,
        "ObjectRemoved": 2,
        "ObjectTagging": 2,
        "ObjectAcl": 1,
        "ObjectMetadata": 1,
        "ObjectRenamed": 1,
        "LifecycleExpiration": 2,
    }
    old = {"ObjectCreated", "ObjectRemoved"}
    assert {n: event_version(n) for n in ALL_EVENT_NAMES} == {
        n: "2.1" if n.split(":")[0] in old else "2.3" for n in ALL_EVENT_NAMES
    }
    assert [n for n in ALL_EVENT_NAMES if n.startswith("ObjectTagging:")] == [
        "ObjectTagging:Put",
        "ObjectTagging:Delete",
    ]
    created = [n for n in ALL_EVENT_NAMES if is_created(n)]
    assert created == [
        "ObjectCreated:Put",
        "ObjectCreated:Post",
        "ObjectCreated:Copy",
        "ObjectCreated:CompleteMultipartUpload",
    ]
    assert is_created("s3:ObjectCreated:Put")
    assert not is_created("ObjectRemoved:Delete")


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("s3:ObjectCreated:*", "ObjectCreated:Put", True),
        ("s3:ObjectCreated:*", "ObjectCreated:CompleteMultipartUpload", True),
        ("s3:ObjectCreated:*", "ObjectRemoved:Delete", False),
        ("s3:ObjectRemoved:*", "ObjectRemoved:Delete", True),
        ("s3:ObjectRemoved:*", "ObjectRemoved:DeleteMarkerCreated", True),
        ("s3:ObjectRemoved:*", "ObjectCreated:Put", False),
        ("s3:ObjectRemoved:Delete", "ObjectRemoved:Delete", True),
        ("s3:ObjectRemoved:Delete", "ObjectRemoved:DeleteMarkerCreated", False),
        ("s3:ObjectCreated:Put", "ObjectCreated:Post", False),
        ("s3:ObjectCreated:Put", "s3:ObjectCreated:Put", True),
        ("ObjectCreated:*", "ObjectCreated:Copy", True),
        ("s3:ObjectCreated*", "ObjectCreated:Put", False),  # `*` only as a whole part
        ("s3:ObjectCreated:*", "ObjectCreatedX:Put", False),
        ("s3:ObjectCreated:*", "ObjectCreated:", False),
        ("s3:*", "ObjectCreated:Put", False),
        ("s3:ObjectTagging:*", "ObjectTagging:Put", True),
        ("s3:ObjectTagging:*", "ObjectTagging:Delete", True),
        ("s3:ObjectCreated:*", "ObjectTagging:Put", False),
        ("s3:ObjectTagging:Put", "ObjectTagging:Delete", False),
    ],
)
def test_matches(pattern: str, name: str, expected: bool) -> None:
    assert matches(pattern, name) is expected


@pytest.mark.parametrize(
    ("status", "tags_after", "name"),
    [
        (3, {"k": "v"}, "ObjectTagging:Put"),
        (4, {"k": "v"}, "ObjectTagging:Put"),
        (None, {"k": "v"}, "ObjectTagging:Put"),  # status not recorded: an object
        (3, None, "ObjectTagging:Delete"),
        (4, {}, "ObjectTagging:Delete"),
        (5, {"k": "v"}, None),  # delete markers and pending rows have no tags
        (6, None, None),
        (1, {"k": "v"}, None),
    ],
)
def test_tagging_event_name(status: int | None, tags_after: object, name: str | None) -> None:
    assert tagging_event_name(status, tags_after) == name


@pytest.mark.parametrize(
    ("changed", "status", "new_values", "operation", "names"),
    [
        ({"tags"}, 3, {"tags": {"a": "1"}}, None, ["ObjectTagging:Put"]),
        ({"tags"}, 4, {"tags": None}, None, ["ObjectTagging:Delete"]),
        ({"acl"}, 3, {"acl": {"grants": []}}, None, ["ObjectAcl:Put"]),
        ({"legal_hold"}, 4, {}, None, ["ObjectMetadata:Update"]),
        ({"retention_mode", "retain_until"}, 4, {}, None, ["ObjectMetadata:Update"]),
        ({"tags", "acl"}, 3, {"tags": {}}, None, ["ObjectTagging:Delete", "ObjectAcl:Put"]),
        ({"user_metadata"}, 3, {}, None, []),  # not a change S3 can make in place
        ({"acl"}, 5, {}, None, []),  # a delete marker has no ACL
        ({"acl"}, 1, {}, None, []),  # nor has a pending upload
        # without old values the operation says what changed
        (None, 4, {"tags": None, "acl": None}, "put-object-acl", ["ObjectAcl:Put"]),
        (None, 4, {"legal_hold": True}, "put-object-legal-hold", ["ObjectMetadata:Update"]),
        (None, 4, {"retention_mode": 1}, "put-object-retention", ["ObjectMetadata:Update"]),
        (None, 4, {"tags": {"a": "1"}}, "put-object-tagging", ["ObjectTagging:Put"]),
        # ...and without an operation a change of tags is assumed when they are named
        (None, None, {"tags": {"a": "1"}}, None, ["ObjectTagging:Put"]),
        (None, None, {"legal_hold": True}, None, []),
    ],
)
def test_update_event_names(
    changed: set[str] | None,
    status: int | None,
    new_values: dict[str, object],
    operation: str | None,
    names: list[str],
) -> None:
    known = None if changed is None else frozenset(changed)
    resolved = changed_columns(known, new_values, operation)
    assert update_event_names(resolved, status, new_values) == names
