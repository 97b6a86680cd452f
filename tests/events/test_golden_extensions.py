"""Golden S3 event messages, and their HDFS inotify form, of the operations beyond put and
delete: renames (both `rename-events` modes), ACL changes, metadata updates (legal hold,
retention, a copy onto itself), lifecycle expirations and bucket events.

Each test runs the real metabase operation with eventing on, reads the change records it
wrote, and maps them with `s3_events`, as the pipeline does; the expected JSON is written
out whole. Times come from the test's clock: a transaction commits at the clock's time, or
1 ns after its partition's last commit when the clock has not moved.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ripple.changestream.tail import transactions
from ripple.events import EventRecord, s3_events
from ripple.metabase import (
    BucketLocation,
    Metabase,
    Versioning,
    create_bucket,
    delete_bucket,
    set_bucket_versioning,
)
from ripple.metabase.acl import put_object_acl
from ripple.metabase.copy_object import copy_object
from ripple.metabase.expire import expire_objects
from ripple.metabase.legal_hold import put_object_legal_hold
from ripple.metabase.lifecycle import put_bucket_lifecycle
from ripple.metabase.lifecycle_run import run_lifecycle
from ripple.metabase.rename_object import rename_object, rename_prefix
from ripple.metabase.retention import put_object_retention
from ripple.targets.hdfs_inotify import inotify_events
from tests.changestream.conftest import read_all
from tests.events.golden import s3_record
from tests.metabase.objects import commit_inline_object
from tests.metabase.steps import T0, World

HELLO_ETAG = hashlib.md5(b"hello").hexdigest()


class Events:
    """The world's metabase with eventing on for every bucket, and the events of the
    transactions committed since the last look."""

    def __init__(self, db: Metabase) -> None:
        self.world = World(db)
        db.eventing = lambda _project, _bucket: True
        self.owner = str(self.world.project.public_id)
        self._seen: set[str] = set()

    def new(self, stream: str = "bucket_eventing") -> list[EventRecord]:
        records = []
        for record in read_all(self.world.db, stream):
            marker = json.dumps(record, sort_keys=True)
            if marker not in self._seen:
                self._seen.add(marker)
                records.append(record)
        owners = {str(self.world.project.id): self.owner}
        return [
            event
            for group in transactions(iter(records), strict=False)
            for event in s3_events(group, owners=owners)
        ]


@pytest.fixture
def events(db: Metabase) -> Events:
    return Events(db)


def ns(when: datetime) -> int:
    return int((when - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) * 10**9


def sequencer(commit_ns: int, ordinal: int) -> str:
    return f"{commit_ns:016X}{ordinal:08X}"


def event_time(commit_ns: int) -> str:
    when = datetime.fromtimestamp(commit_ns // 10**9, UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{commit_ns // 10**6 % 1000:03d}Z"


def golden(
    name: str,
    bucket: str,
    owner: str,
    commit_ns: int,
    obj: dict[str, Any],
    *,
    version: str = "2.3",
    principal: str = "",
    **extra: Any,
) -> dict[str, Any]:
    return s3_record(
        eventVersion=version,
        eventTime=event_time(commit_ns),
        eventName=name,
        userIdentity={"principalId": principal},
        # no request made these changes (no transaction tag): the system's name
        requestParameters={"sourceIPAddress": principal or "ripple"},
        responseElements={"x-amz-request-id": "", "x-amz-id-2": ""},
        bucket=bucket,
        owner=owner,
        obj=obj,
        **extra,
    )


def mode(events: list[EventRecord], rename: str) -> list[dict[str, Any]]:
    """The messages a notification with `rename-events` = `rename` gets (routing's rule)."""
    return [e.message for e in events if e.rename in (None, rename)]


def hdfs(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [i for m in messages for i in inotify_events(m)]


def test_rename_of_one_key(events: Events) -> None:
    w = events.world
    bucket = w.bucket("photos")
    w.put(bucket, "red flower.jpg")  # commits at T0 + 1s
    events.new()
    rename_object(w.db, w.loc(bucket, "red flower.jpg"), "albums/red flower.jpg")
    at = ns(T0 + timedelta(seconds=1)) + 1  # the clock did not move
    made = events.new()
    assert [(e.event_name, e.rename) for e in made] == [
        ("ObjectRemoved:Delete", "s3"),
        ("ObjectCreated:Put", "s3"),
        ("ObjectRenamed:Rename", "single"),
    ]
    removed = golden(
        "ObjectRemoved:Delete",
        "photos",
        events.owner,
        at,
        {"key": "red+flower.jpg", "sequencer": sequencer(at, 0)},
        version="2.1",
    )
    created = golden(
        "ObjectCreated:Put",
        "photos",
        events.owner,
        at,
        {
            "key": "albums/red+flower.jpg",
            "size": 5,
            "eTag": HELLO_ETAG,
            "sequencer": sequencer(at, 1),
        },
        version="2.1",
    )
    renamed = golden(
        "ObjectRenamed:Rename",
        "photos",
        events.owner,
        at,
        {
            "key": "albums/red+flower.jpg",
            "size": 5,
            "eTag": HELLO_ETAG,
            "sequencer": sequencer(at, 2),
            "renameFromKey": "red+flower.jpg",
        },
    )
    assert mode(made, "s3") == [removed, created]
    assert mode(made, "single") == [renamed]
    when = at // 10**6
    assert hdfs(mode(made, "s3")) == [
        {"eventType": "UNLINK", "path": "/photos/red flower.jpg", "timestamp": when},
        {
            "eventType": "CREATE",
            "path": "/photos/albums/red flower.jpg",
            "ctime": when,
            "iNodeType": "FILE",
            "overwrite": True,
        },
        {
            "eventType": "CLOSE",
            "path": "/photos/albums/red flower.jpg",
            "fileSize": 5,
            "timestamp": when,
        },
    ]
    assert hdfs(mode(made, "single")) == [
        {
            "eventType": "RENAME",
            "srcPath": "/photos/red flower.jpg",
            "destPath": "/photos/albums/red flower.jpg",
            "timestamp": when,
        }
    ]


def test_rename_onto_an_existing_key_reports_no_removal_of_it(events: Events) -> None:
    w = events.world
    bucket = w.bucket("photos")
    w.put(bucket, "a")
    w.put(bucket, "b", b"old")
    events.new()
    rename_object(w.db, w.loc(bucket, "a"), "b")
    made = events.new()
    # as for an overwrite, the replaced destination is not reported removed
    assert [(e.event_name, e.key, e.rename) for e in made] == [
        ("ObjectRemoved:Delete", "a", "s3"),
        ("ObjectCreated:Put", "b", "s3"),
        ("ObjectRenamed:Rename", "b", "single"),
    ]


def test_rename_of_a_prefix(events: Events) -> None:
    w = events.world
    bucket = w.bucket("photos")
    w.put(bucket, "2025/a.jpg")
    w.put(bucket, "2025/b.jpg", b"hi")  # T0 + 2s
    events.new()
    rename_prefix(w.db, bucket, "2025/", "archive/2025/", max_keys=10)
    at = ns(T0 + timedelta(seconds=2)) + 1
    made = events.new()

    def removed(key: str, ordinal: int) -> dict[str, Any]:
        obj = {"key": key, "sequencer": sequencer(at, ordinal)}
        return golden("ObjectRemoved:Delete", "photos", events.owner, at, obj, version="2.1")

    def created(key: str, size: int, etag: str, ordinal: int) -> dict[str, Any]:
        obj = {"key": key, "size": size, "eTag": etag, "sequencer": sequencer(at, ordinal)}
        return golden("ObjectCreated:Put", "photos", events.owner, at, obj, version="2.1")

    # each object's own eTag (the rows' etag, watched since 0011)
    assert mode(made, "s3") == [
        removed("2025/a.jpg", 0),
        removed("2025/b.jpg", 1),
        created("archive/2025/a.jpg", 5, HELLO_ETAG, 2),
        created("archive/2025/b.jpg", 2, hashlib.md5(b"hi").hexdigest(), 3),
    ]
    renamed = golden(
        "ObjectRenamed:Rename",
        "photos",
        events.owner,
        at,
        # about no one object: size 0 and no eTag, as consumers that need both take it
        {
            "key": "archive/2025/",
            "size": 0,
            "eTag": "",
            "sequencer": sequencer(at, 4),
            "renameFromKey": "2025/",
        },
    )
    assert mode(made, "single") == [renamed]
    assert hdfs(mode(made, "single")) == [
        {
            "eventType": "RENAME",
            "srcPath": "/photos/2025",
            "destPath": "/photos/archive/2025",
            "timestamp": at // 10**6,
        }
    ]


def test_acl_change(events: Events) -> None:
    w = events.world
    bucket = w.bucket("photos")
    w.put(bucket, "k")
    events.new()
    put_object_acl(w.db, w.loc(bucket, "k"), "public-read")
    at = ns(T0 + timedelta(seconds=1)) + 1
    put_object_acl(w.db, w.loc(bucket, "k"), "public-read")  # no change: no event
    [made] = events.new()
    grants = [
        {
            "grantee": {"type": "CanonicalUser", "id": events.owner},
            "permission": "FULL_CONTROL",
        },
        {
            "grantee": {"type": "Group", "uri": "http://acs.amazonaws.com/groups/global/AllUsers"},
            "permission": "READ",
        },
    ]
    assert made.message == golden(
        "ObjectAcl:Put",
        "photos",
        events.owner,
        at,
        {
            "key": "k",
            "size": 5,
            "eTag": HELLO_ETAG,
            "sequencer": sequencer(at, 0),
            "grants": grants,
        },
    )
    assert hdfs([made.message]) == [
        {"eventType": "METADATA", "path": "/photos/k", "metadataType": "ACLS", "mtime": at // 10**6}
    ]
    # back to private: the owner's grant alone
    put_object_acl(w.db, w.loc(bucket, "k"), "private")
    [private] = events.new()
    assert private.message["s3"]["object"]["grants"] == grants[:1]


def test_lock_setting_changes(events: Events) -> None:
    w = events.world
    bucket = w.bucket("locked", lock=True)
    obj = w.put(bucket, "k")
    events.new()
    put_object_legal_hold(w.db, w.loc(bucket, "k"), True)
    hold_at = ns(T0 + timedelta(seconds=1)) + 1
    until = T0 + timedelta(days=1, seconds=1)
    put_object_retention(w.db, w.loc(bucket, "k"), w.governance())
    retention_at = hold_at + 1
    hold, retention = events.new()

    def update(commit_ns: int, what: dict[str, Any]) -> dict[str, Any]:
        obj_json = {
            "key": "k",
            "size": 5,
            "eTag": HELLO_ETAG,
            "versionId": obj.version_id,
            "sequencer": sequencer(commit_ns, 0),
            "metadataUpdate": what,
        }
        return golden("ObjectMetadata:Update", "locked", events.owner, commit_ns, obj_json)

    assert hold.message == update(
        hold_at, {"changed": ["legalHold"], "legalHold": "ON", "retention": None}
    )
    assert retention.message == update(
        retention_at,
        {
            "changed": ["retention"],
            "legalHold": "ON",
            "retention": {
                "mode": "GOVERNANCE",
                "retainUntilDate": until.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            },
        },
    )
    assert hdfs([hold.message]) == [
        {
            "eventType": "METADATA",
            "path": "/locked/k",
            "metadataType": "XATTRS",
            "mtime": hold_at // 10**6,
        }
    ]


def test_copy_onto_itself_is_also_a_metadata_update(events: Events) -> None:
    w = events.world
    bucket = w.bucket("photos")
    w.put(bucket, "k")
    w.put(bucket, "other")
    events.new()
    w.tick()  # T0 + 3s
    copy_object(
        w.db,
        w.loc(bucket, "k"),
        w.loc(bucket, "k"),
        metadata_directive="REPLACE",
        user_metadata={"camera": "x100v"},
    )
    at = ns(T0 + timedelta(seconds=3))
    copied, updated = events.new()
    obj = {"key": "k", "size": 5, "eTag": HELLO_ETAG}
    assert copied.message == golden(
        "ObjectCreated:Copy",
        "photos",
        events.owner,
        at,
        {**obj, "sequencer": sequencer(at, 0)},
        version="2.1",
    )
    assert updated.message == golden(
        "ObjectMetadata:Update",
        "photos",
        events.owner,
        at,
        {
            **obj,
            "sequencer": sequencer(at, 1),
            "metadataUpdate": {
                "changed": ["lastModified", "userMetadata"],
                "lastModified": event_time(at),
                "userMetadata": {"camera": "x100v"},
            },
        },
    )
    # a copy to another key is not a metadata update
    copy_object(w.db, w.loc(bucket, "k"), w.loc(bucket, "other"))
    assert [e.event_name for e in events.new()] == ["ObjectCreated:Copy"]


def test_lifecycle_expirations(events: Events) -> None:
    w = events.world
    plain = w.bucket("plain")
    versioned = w.bucket("versioned", Versioning.ENABLED)
    for bucket in (plain, versioned):
        rule = {"ID": "old-logs", "Status": "Enabled", "Filter": {"Prefix": "logs/"}}
        put_bucket_lifecycle(w.db, bucket, {"Rules": [{**rule, "Expiration": {"Days": 1}}]})
    w.put(plain, "logs/a")
    kept = w.put(versioned, "logs/a")
    w.put(plain, "keep")
    events.new()
    w.now = T0 + timedelta(days=3)
    run_lifecycle(w.db)
    made = events.new()
    by_bucket = {e.bucket: e for e in made}
    assert sorted(by_bucket) == ["plain", "versioned"]
    assert len(made) == 2
    at = ns(w.now)
    lifecycle_data = {"lifecycleEventData": {"expirationEventData": {"ruleId": "old-logs"}}}
    deleted = by_bucket["plain"]
    seq = deleted.sequencer
    assert deleted.message == golden(
        "LifecycleExpiration:Delete",
        "plain",
        events.owner,
        int(seq[:16], 16),
        {"key": "logs/a", "sequencer": seq},
        principal="ripple",
        **lifecycle_data,
    )
    assert int(seq[:16], 16) >= at
    marker = by_bucket["versioned"]
    marker_id = marker.message["s3"]["object"]["versionId"]
    assert marker_id != kept.version_id
    seq = marker.sequencer
    assert marker.message == golden(
        "LifecycleExpiration:DeleteMarkerCreated",
        "versioned",
        events.owner,
        int(seq[:16], 16),
        {"key": "logs/a", "versionId": marker_id, "sequencer": seq},
        principal="ripple",
        **lifecycle_data,
    )
    assert hdfs([deleted.message]) == [
        {"eventType": "UNLINK", "path": "/plain/logs/a", "timestamp": int(seq[:16], 16) // 10**6}
    ]


def test_suspended_versioning_lifecycle_marker_replaces_the_null_version(events: Events) -> None:
    w = events.world
    bucket = w.bucket("suspended")
    w.put(bucket, "k")  # the null version
    set_bucket_versioning(w.db, bucket, enabled=True)
    set_bucket_versioning(w.db, bucket, enabled=False)
    rule = {"ID": "r", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 1}}
    put_bucket_lifecycle(w.db, bucket, {"Rules": [rule]})
    events.new()
    w.now = T0 + timedelta(days=3)
    run_lifecycle(w.db)
    # the null version's removal is an overwrite by the null delete marker: one event
    [made] = events.new()
    assert made.event_name == "LifecycleExpiration:DeleteMarkerCreated"
    assert made.message["s3"]["object"]["versionId"] == "null"


def test_bucket_events(events: Events) -> None:
    w = events.world
    w.tick()  # T0 + 1s
    loc = BucketLocation(w.project.id, "new-bucket")
    create_bucket(w.db, loc, object_lock_enabled=True)
    created_at = ns(w.now)
    w.tick()
    delete_bucket(w.db, loc)
    removed_at = ns(w.now)
    created, removed = events.new("project_eventing")

    def bucket_event(name: str, commit_ns: int) -> dict[str, Any]:
        message = golden(name, "new-bucket", events.owner, commit_ns, {})
        message["s3"]["bucket"].update({"versioning": "Enabled", "objectLockEnabled": True})
        obj = {"key": "", "size": 0, "eTag": "", "sequencer": sequencer(commit_ns, 0)}
        message["s3"]["object"] = obj
        return message

    assert (created.project_id, created.bucket, created.key) == (
        str(w.project.id),
        "new-bucket",
        "",
    )
    assert created.message == bucket_event("BucketCreated:Put", created_at)
    assert removed.message == bucket_event("BucketRemoved:Delete", removed_at)
    assert hdfs([created.message, removed.message]) == [
        {
            "eventType": "CREATE",
            "path": "/new-bucket",
            "ctime": created_at // 10**6,
            "iNodeType": "DIRECTORY",
            "overwrite": False,
        },
        {"eventType": "UNLINK", "path": "/new-bucket", "timestamp": removed_at // 10**6},
    ]
    assert events.new() == []  # nothing in the objects' stream


def test_a_prefix_rename_event_carries_no_objects_tags_or_metadata(events: Events) -> None:
    """Its one event is about the prefix: tag and metadata filter rules never hold for it
    (the first key's would be the wrong object's)."""
    w = events.world
    bucket = w.bucket("photos")
    w.put(bucket, "d/a")
    events.new()
    rename_prefix(w.db, bucket, "d/", "e/", max_keys=10)
    made = events.new()
    [single] = [e for e in made if e.rename == "single"]
    assert (single.metadata, single.tags) == (None, None)
    created = next(e for e in made if e.event_name == "ObjectCreated:Put")
    assert (created.metadata, created.tags) == ({}, {})


def test_a_copy_of_an_older_version_onto_its_key_is_no_metadata_update(events: Events) -> None:
    w = events.world
    bucket = w.bucket("versioned", Versioning.ENABLED)
    first = w.put(bucket, "k")
    w.put(bucket, "k", b"newer")
    events.new()
    copy_object(w.db, w.loc(bucket, "k"), w.loc(bucket, "k"), source_version_id=first.version_id)
    assert [e.event_name for e in events.new()] == ["ObjectCreated:Copy"]


def test_a_ttl_delete_is_a_lifecycle_expiration_without_a_rule(events: Events) -> None:
    """`ripple metabase expire` (TTL deletes, system transactions) is recorded since 0012:
    `LifecycleExpiration:Delete`, principal `ripple`, an empty `ruleId`."""
    w = events.world
    bucket = w.bucket("tmp")
    w.tick()
    commit_inline_object(
        w.db, w.loc(bucket, "scratch"), b"x", etag="e", expires_at=w.now + timedelta(hours=1)
    )
    events.new()
    w.tick(timedelta(hours=2))
    assert expire_objects(w.db).deleted == 1
    [expired] = events.new()
    at = ns(w.now)
    assert expired.message == golden(
        "LifecycleExpiration:Delete",
        "tmp",
        events.owner,
        at,
        {"key": "scratch", "sequencer": sequencer(at, 0)},
        principal="ripple",
        lifecycleEventData={"expirationEventData": {"ruleId": ""}},
    )
