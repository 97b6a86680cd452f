"""EventingStore on SQLite and PostgreSQL: topics per project, bucket notifications that
replace each other, a deleted topic taking its notifications along, and the change log whose
newest id is the generation every process polls."""

from __future__ import annotations

import uuid

import pytest

from ripple.metabase import Metabase, create_project
from ripple.notifications.configuration import Notification
from ripple.notifications.registry import PROJECT_WIDE, Destination
from ripple.notifications.store import ConfigSnapshot, EventingStore, StoredTopic, topic_arn


def arn_of(db: Metabase, project_id: uuid.UUID, name: str) -> str:
    return topic_arn("us-east-1", str(project_id), name)


def test_topics_belong_to_their_project(db: Metabase) -> None:
    store = EventingStore(db)
    alice, bob = create_project(db, "alice"), create_project(db, "bob")
    a = arn_of(db, alice.public_id, "photos")
    b = arn_of(db, bob.public_id, "photos")
    store.put_topic(alice.id, "photos", a, "http://127.0.0.1:1/h", {"max-retries": "3"}, "alice")
    store.put_topic(bob.id, "photos", b, "none", {}, "bob")

    assert [t.arn for t in store.list_topics(alice.id)] == [a]
    assert [t.arn for t in store.list_topics(bob.id)] == [b]
    got = store.get_topic(alice.id, "photos")
    assert got is not None
    assert (got.push_endpoint, dict(got.arguments)) == (
        "http://127.0.0.1:1/h",
        {"max-retries": "3"},
    )
    assert store.topic_by_arn(b) == store.get_topic(bob.id, "photos")
    assert store.get_topic(alice.id, "videos") is None
    assert got.topic.name == a  # the pipeline knows it by its ARN
    assert got.topic.label == "photos"


def test_put_topic_again_updates_it(db: Metabase) -> None:
    store = EventingStore(db)
    alice = create_project(db, "alice")
    arn = arn_of(db, alice.public_id, "t")
    first = store.put_topic(alice.id, "t", arn, "none", {}, "alice")
    second = store.put_topic(alice.id, "t", arn, "http://127.0.0.1:9/x", {"a": "b"}, "alice")
    assert second.created_at_ns == first.created_at_ns
    stored = store.get_topic(alice.id, "t")
    assert stored is not None
    assert (stored.push_endpoint, dict(stored.arguments)) == ("http://127.0.0.1:9/x", {"a": "b"})
    assert len(store.list_topics(alice.id)) == 1


def test_notifications_replace_and_delete(db: Metabase) -> None:
    store = EventingStore(db)
    alice = create_project(db, "alice")
    arn = arn_of(db, alice.public_id, "t")
    store.put_topic(alice.id, "t", arn, "none", {}, "alice")
    one = Notification("one", arn, ("s3:ObjectCreated:*",), prefix="a/")
    two = Notification("two", arn, ("s3:ObjectRemoved:*",), suffix=".jpg", regex=r".*\.jpg")
    store.put_notifications(alice.id, "photos", [one, two], "alice")
    assert store.notifications(alice.id, "photos") == [one, two]
    assert store.notifications(alice.id, "other") == []

    store.put_notifications(alice.id, "photos", [two], "alice")  # replaces the whole
    assert store.notifications(alice.id, "photos") == [two]

    assert store.delete_notification(alice.id, "photos", "two", "alice") is True
    assert store.delete_notification(alice.id, "photos", "two", "alice") is False
    assert store.notifications(alice.id, "photos") == []


def test_deleting_a_topic_deletes_the_notifications_naming_it(db: Metabase) -> None:
    store = EventingStore(db)
    alice = create_project(db, "alice")
    kept, gone = arn_of(db, alice.public_id, "kept"), arn_of(db, alice.public_id, "gone")
    store.put_topic(alice.id, "kept", kept, "none", {}, "alice")
    store.put_topic(alice.id, "gone", gone, "none", {}, "alice")
    store.put_notifications(
        alice.id,
        "photos",
        [
            Notification("k", kept, ("s3:ObjectCreated:*",)),
            Notification("g", gone, ("s3:ObjectRemoved:*",)),
        ],
        "alice",
    )
    assert store.delete_topic(alice.id, "gone", "alice") is True
    assert [n.id for n in store.notifications(alice.id, "photos")] == ["k"]
    assert store.delete_topic(alice.id, "gone", "alice") is False
    assert store.topic_by_arn(gone) is None


def test_every_change_moves_the_generation_and_is_audited(
    db: Metabase, caplog: pytest.LogCaptureFixture
) -> None:
    store = EventingStore(db)
    alice = create_project(db, "alice")
    arn = arn_of(db, alice.public_id, "t")
    g0 = store.generation()
    caplog.set_level("INFO", logger="ripple.notifications.store")
    store.put_topic(alice.id, "t", arn, "none", {}, "alice (AKIA1)")
    g1 = store.generation()
    store.put_notifications(
        alice.id, "photos", [Notification("n", arn, ("s3:ObjectCreated:*",))], "alice (AKIA1)"
    )
    g2 = store.generation()
    assert g0 < g1 < g2
    assert store.delete_notification(alice.id, "photos", "missing", "alice") is False
    assert store.generation() == g2  # nothing changed, nothing logged

    changes = store.changes()
    assert [(c["action"], c["principal"]) for c in changes[:2]] == [
        ("put-notifications", "alice (AKIA1)"),
        ("create-topic", "alice (AKIA1)"),
    ]
    assert "photos: n" in str(changes[0]["subject"])
    logged = [r.getMessage() for r in caplog.records]
    assert f"eventing configuration: create-topic {arn} by alice (AKIA1)" in logged

    snapshot = store.snapshot()
    assert snapshot.generation == g2
    assert list(snapshot.topics) == [arn]
    assert snapshot.notifications == {
        (alice.id, "photos"): [Notification("n", arn, ("s3:ObjectCreated:*",))]
    }


def test_a_snapshots_routes_follow_its_notifications_and_their_topics() -> None:
    """Routes are a function of the snapshot alone: a notification reaches its bucket's
    routes only while its topic exists, with the topic's include and rename arguments; a
    topic with `project-events` is a project-wide destination of its own project."""
    alice, bob = uuid.uuid4(), uuid.uuid4()
    photos, gone, wide = (topic_arn("us-east-1", "p", n) for n in ("photos", "gone", "wide"))
    snapshot = ConfigSnapshot(
        generation=7,
        topics={
            photos: StoredTopic(
                alice, "photos", photos, "none", {"include-tags": "yes", "rename-events": "single"}
            ),
            wide: StoredTopic(bob, "wide", wide, "none", {"project-events": "s3:BucketCreated:*"}),
        },
        notifications={
            (alice, "photos"): [
                Notification("jpegs", photos, ("s3:ObjectCreated:*",), suffix=".jpg"),
                Notification("stale", gone, ("s3:ObjectCreated:*",)),
            ],
            (alice, "logs"): [Notification("stale", gone, ("s3:ObjectRemoved:*",))],
        },
    )
    assert snapshot.routes() == {
        (alice, "photos"): [
            Destination(
                photos,
                "jpegs",
                ("s3:ObjectCreated:*",),
                suffix=".jpg",
                include_tags=True,
                rename_events="single",
            )
        ],
        (bob, PROJECT_WIDE): [Destination(wide, "ProjectEvents", ("s3:BucketCreated:*",))],
    }
