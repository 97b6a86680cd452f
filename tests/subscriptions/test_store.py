"""SubscriptionStore on SQLite and PostgreSQL: configuration, store, pull with a marker, ack,
expiry; and the compact event form."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

import pytest
import sqlalchemy as sa

from ripple.metabase import Metabase
from ripple.subscriptions import (
    NoSuchSubscription,
    PullResult,
    Subscription,
    SubscriptionStore,
    compact_event,
)
from ripple.subscriptions.schema import subscription_events
from ripple.targets.base import Delivery
from tests.metabase.hooks import before_commit
from tests.subscriptions import (
    OTHER_TOPIC,
    TOPIC,
    VERSION_ID,
    deliveries,
    delivery,
    s3_event,
)

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


@pytest.fixture
def store(db: Metabase) -> SubscriptionStore:
    db.clock = lambda: NOW
    return SubscriptionStore(db)


def ids(page: PullResult) -> list[str]:
    key = "eventId" if page.format == "s3" else "id"
    return [e[key] for e in page.events]


def pull_all(store: SubscriptionStore, name: str) -> list[str]:
    return ids(store.pull(name, max_entries=1000))


def stored_rows(db: Metabase) -> list[tuple[str, str, int]]:
    with db.read() as conn:
        rows = conn.execute(
            sa.select(
                subscription_events.c.subscription,
                subscription_events.c.event_id,
                subscription_events.c.batch_id,
            ).order_by(subscription_events.c.id)
        )
        return [tuple(r) for r in rows]  # type: ignore[misc]


# --- configuration ---------------------------------------------------------------------------


def test_create_get_list_delete(store: SubscriptionStore) -> None:
    ns = int(NOW.timestamp()) * 10**9
    made = store.create("audit", TOPIC)
    assert made == Subscription("audit", TOPIC, "s3", 7, ns)
    assert store.get("audit") == made
    compact = store.create("compact-1", TOPIC, format="compact", events_retention_days=2)
    other = store.create("other.sub_2", OTHER_TOPIC)
    assert store.list() == [made, compact, other]
    assert store.list(TOPIC) == [made, compact]
    assert store.list(OTHER_TOPIC) == [other]
    assert store.list("projects/x/topics/none") == []

    assert store.delete("compact-1") == 0
    assert store.list() == [made, other]
    with pytest.raises(NoSuchSubscription):
        store.get("compact-1")


def test_create_again_updates_format_and_retention(store: SubscriptionStore, db: Metabase) -> None:
    first = store.create("audit", TOPIC)
    db.clock = lambda: NOW + timedelta(hours=1)
    again = store.create("audit", TOPIC, format="compact", events_retention_days=30)
    assert again == Subscription("audit", TOPIC, "compact", 30, first.created_at_ns)
    assert store.get("audit") == again
    assert store.list() == [again]


def test_create_refuses_another_topic_for_a_name(store: SubscriptionStore) -> None:
    store.create("audit", TOPIC)
    with pytest.raises(ValueError, match="exists for topic") as info:
        store.create("audit", OTHER_TOPIC)
    assert "delete it first" in str(info.value)
    assert store.get("audit").topic == TOPIC


@pytest.mark.parametrize(
    "name", ["", "has space", "a/b", "ümlaut", "x" * 256, "tab\t", "semi;colon"]
)
def test_create_refuses_bad_names(store: SubscriptionStore, name: str) -> None:
    with pytest.raises(ValueError, match="subscription name") as info:
        store.create(name, TOPIC)
    assert "1 to 255 letters, digits" in str(info.value)
    assert store.list() == []


def test_create_accepts_every_allowed_character(store: SubscriptionStore) -> None:
    name = "Az09-_." + "x" * 248
    assert len(name) == 255
    assert store.create(name, TOPIC).name == name


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"format": "json"}, "format 'json' must be one of: s3, compact"),
        ({"events_retention_days": 0}, "events_retention_days must be"),
        ({"events_retention_days": -3}, "events_retention_days must be"),
        ({"events_retention_days": 3651}, "from 1 to 3650"),
        ({"events_retention_days": True}, "events_retention_days must be"),
    ],
)
def test_create_refuses_bad_settings(
    store: SubscriptionStore, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        store.create("audit", TOPIC, **kwargs)


def test_create_refuses_bad_topics(store: SubscriptionStore) -> None:
    for topic in ("", "t" * 256):
        with pytest.raises(ValueError, match="must be 1 to 255 characters"):
            store.create("audit", topic)


def test_unknown_subscription(store: SubscriptionStore) -> None:
    for call in (
        lambda: store.get("nope"),
        lambda: store.pull("nope"),
        lambda: store.ack("nope", "evt-0000"),
        lambda: store.delete("nope"),
    ):
        with pytest.raises(NoSuchSubscription) as info:
            call()
        assert isinstance(info.value, LookupError)
        assert str(info.value) == (
            "no subscription 'nope': create it with `ripple subscription create nope --topic TOPIC`"
        )


# --- store and pull ----------------------------------------------------------------------------


def test_pull_pages_with_the_marker(store: SubscriptionStore) -> None:
    store.create("audit", TOPIC)
    assert store.store(TOPIC, deliveries(5), 7) == 5

    first = store.pull("audit", max_entries=2)
    assert ids(first) == ["evt-0000", "evt-0001"]
    assert first.is_truncated is True
    assert first.next_marker.isdigit()

    second = store.pull("audit", first.next_marker, 2)
    assert ids(second) == ["evt-0002", "evt-0003"]
    assert second.is_truncated is True
    assert int(second.next_marker) > int(first.next_marker)

    third = store.pull("audit", second.next_marker, 2)
    assert ids(third) == ["evt-0004"]
    assert third.is_truncated is False

    # nothing after the end: the same marker again, so polling with it misses nothing
    end = store.pull("audit", third.next_marker, 2)
    assert end == PullResult([], third.next_marker, False, "s3")

    # no marker: from the oldest; exactly max-entries left is not truncated
    everything = store.pull("audit")
    assert ids(everything) == [f"evt-{n:04d}" for n in range(5)]
    assert everything.is_truncated is False
    assert everything.next_marker == third.next_marker
    exact = store.pull("audit", first.next_marker, 3)
    assert ids(exact) == ["evt-0002", "evt-0003", "evt-0004"]
    assert exact.is_truncated is False
    assert exact.next_marker == third.next_marker

    # events stored later follow the marker
    store.store(TOPIC, deliveries(2, first=5), 8)
    later = store.pull("audit", third.next_marker)
    assert ids(later) == ["evt-0005", "evt-0006"]
    assert later.is_truncated is False


def test_pull_of_an_empty_subscription(store: SubscriptionStore) -> None:
    store.create("audit", TOPIC)
    assert store.pull("audit") == PullResult([], "", False, "s3")
    assert store.pull("audit", "").next_marker == ""
    assert store.pull("audit", "42") == PullResult([], "42", False, "s3")


def test_s3_entries_are_the_records_with_their_event_id(store: SubscriptionStore) -> None:
    store.create("audit", TOPIC)
    sent = deliveries(2)
    store.store(TOPIC, sent, 7)
    page = store.pull("audit")
    assert page.events == [{**d.event, "eventId": d.event_id} for d in sent]
    assert page.to_dict() == {
        "next_marker": page.next_marker,
        "is_truncated": False,
        "Records": page.events,
    }


@pytest.mark.parametrize("max_entries", [0, -1, 1001, 10**9, True, 2.5, "10"])
def test_pull_refuses_bad_max_entries(store: SubscriptionStore, max_entries: Any) -> None:
    store.create("audit", TOPIC)
    with pytest.raises(ValueError, match="max-entries must be a whole number from 1 to 1000"):
        store.pull("audit", max_entries=max_entries)


def test_pull_accepts_max_entries_bounds(store: SubscriptionStore) -> None:
    store.create("audit", TOPIC)
    store.store(TOPIC, deliveries(3), 7)
    assert ids(store.pull("audit", max_entries=1)) == ["evt-0000"]
    assert len(store.pull("audit", max_entries=1000).events) == 3


@pytest.mark.parametrize("marker", ["abc", "-1", "1.5", " 3", "1" * 19, "0x10"])
def test_pull_refuses_bad_markers(store: SubscriptionStore, marker: str) -> None:
    store.create("audit", TOPIC)
    with pytest.raises(ValueError, match="marker") as info:
        store.pull("audit", marker)
    assert "next_marker" in str(info.value)


def test_store_goes_to_every_subscription_of_the_topic(store: SubscriptionStore) -> None:
    store.create("a", TOPIC)
    store.create("b", TOPIC, format="compact")
    store.create("c", OTHER_TOPIC)
    assert store.store(TOPIC, deliveries(3), 7) == 6
    assert pull_all(store, "a") == ["evt-0000", "evt-0001", "evt-0002"]
    assert pull_all(store, "b") == ["evt-0000", "evt-0001", "evt-0002"]
    assert pull_all(store, "c") == []
    assert store.store("projects/x/topics/no-subscriptions", deliveries(3), 7) == 0
    assert store.store(TOPIC, [], 7) == 0


def test_store_is_idempotent_on_the_event_id(store: SubscriptionStore, db: Metabase) -> None:
    store.create("a", TOPIC)
    store.create("b", TOPIC)
    assert store.store(TOPIC, deliveries(4), 7) == 8
    # Spark replays the batch after a crash, under another batch id: nothing new
    assert store.store(TOPIC, deliveries(4, batch_id=8), 8) == 0
    # a retry (-1) of one event and two new ones: only the new ones
    again = [*deliveries(1, batch_id=-1, first=2), *deliveries(2, batch_id=9, first=4)]
    assert store.store(TOPIC, again, None) == 4
    # the same event twice in one call is stored once
    twice = deliveries(1, first=6) * 2
    assert store.store(TOPIC, twice, 10) == 2
    want = [f"evt-{n:04d}" for n in range(7)]
    assert pull_all(store, "a") == want
    assert pull_all(store, "b") == want
    # the rows keep the batch id they were first stored with (None: each delivery's own)
    batches = {(sub, event_id): batch for sub, event_id, batch in stored_rows(db)}
    assert batches[("a", "evt-0002")] == 7
    assert batches[("a", "evt-0004")] == 9
    assert batches[("b", "evt-0006")] == 10
    assert len(batches) == 14


def test_an_acknowledged_event_is_not_stored_again(store: SubscriptionStore) -> None:
    store.create("audit", TOPIC)
    store.store(TOPIC, deliveries(3), 7)
    assert store.ack("audit", "evt-0001")
    # the batch is replayed after the consumer acknowledged one of its events
    assert store.store(TOPIC, deliveries(3, batch_id=8), 8) == 0
    assert pull_all(store, "audit") == ["evt-0000", "evt-0002"]


def test_a_new_subscription_gets_only_later_events(store: SubscriptionStore) -> None:
    store.create("a", TOPIC)
    store.store(TOPIC, deliveries(2), 7)
    store.create("b", TOPIC)
    assert store.store(TOPIC, deliveries(3, batch_id=8), 8) == 4  # evt-2 to a, all 3 to b
    assert pull_all(store, "a") == ["evt-0000", "evt-0001", "evt-0002"]
    assert pull_all(store, "b") == ["evt-0000", "evt-0001", "evt-0002"]


def test_store_accepts_mappings_that_are_not_dicts(store: SubscriptionStore) -> None:
    store.create("audit", TOPIC)
    event = s3_event("a.txt")
    frozen = MappingProxyType({**event, "s3": MappingProxyType(event["s3"])})
    sent = Delivery.of("evt-frozen", frozen, batch_id=7)
    store.store(TOPIC, [sent], 7)
    assert store.pull("audit").events == [{**event, "eventId": "evt-frozen"}]


# --- ack -------------------------------------------------------------------------------------


def test_ack(store: SubscriptionStore) -> None:
    store.create("a", TOPIC)
    store.create("b", TOPIC)
    store.store(TOPIC, deliveries(4), 7)
    assert store.ack("a", "evt-0001") is True
    assert store.ack("a", "evt-0001") is False  # acknowledged already
    assert store.ack("a", "evt-9999") is False  # never stored
    assert store.ack("a", "evt-0003") is True
    assert pull_all(store, "a") == ["evt-0000", "evt-0002"]
    assert pull_all(store, "b") == ["evt-0000", "evt-0001", "evt-0002", "evt-0003"]

    # paging skips acknowledged events and keeps its marker
    first = store.pull("a", max_entries=1)
    assert ids(first) == ["evt-0000"]
    assert first.is_truncated is True
    assert store.ack("a", "evt-0002")
    rest = store.pull("a", first.next_marker, 1)
    assert rest == PullResult([], first.next_marker, False, "s3")


# --- expiry ----------------------------------------------------------------------------------


def test_expire_removes_events_older_than_the_retention(
    store: SubscriptionStore, db: Metabase
) -> None:
    store.create("week", TOPIC)
    store.create("day", TOPIC, events_retention_days=1)
    db.clock = lambda: NOW - timedelta(days=7, seconds=1)
    store.store(TOPIC, deliveries(2), 7)  # older than a week
    db.clock = lambda: NOW - timedelta(days=2)
    store.store(TOPIC, deliveries(2, first=2), 8)  # older than a day
    store.ack("week", "evt-0002")
    db.clock = lambda: NOW
    store.store(TOPIC, deliveries(1, first=4), 9)

    # a pull never answers an expired event, even before `expire` removes it
    assert pull_all(store, "week") == ["evt-0003", "evt-0004"]
    assert pull_all(store, "day") == ["evt-0004"]

    # week: evt-0, evt-1; day: evt-0 to evt-3
    assert store.expire() == 6
    assert store.expire() == 0
    rows = stored_rows(db)
    assert sorted((sub, event_id) for sub, event_id, _ in rows) == [
        ("day", "evt-0004"),
        ("week", "evt-0002"),  # acknowledged, kept until it expires
        ("week", "evt-0003"),
        ("week", "evt-0004"),
    ]
    assert pull_all(store, "week") == ["evt-0003", "evt-0004"]

    later = int((NOW + timedelta(days=8)).timestamp()) * 10**9
    assert store.expire(later) == 4
    assert stored_rows(db) == []


def test_markers_stay_valid_after_the_newest_events_are_removed(
    store: SubscriptionStore, db: Metabase
) -> None:
    """Ids are never used twice (SQLite AUTOINCREMENT, a PostgreSQL sequence), so a marker
    from before an expiry does not hide events stored after it."""
    store.create("audit", TOPIC, events_retention_days=1)
    store.store(TOPIC, deliveries(3), 7)
    marker = store.pull("audit").next_marker
    db.clock = lambda: NOW + timedelta(days=2)
    assert store.expire() == 3
    assert stored_rows(db) == []
    store.store(TOPIC, deliveries(2, first=3), 8)
    page = store.pull("audit", marker)
    assert ids(page) == ["evt-0003", "evt-0004"]
    assert int(page.next_marker) > int(marker)


def test_delete_drops_the_events(store: SubscriptionStore, db: Metabase) -> None:
    store.create("a", TOPIC)
    store.create("b", TOPIC)
    store.store(TOPIC, deliveries(3), 7)
    store.ack("a", "evt-0000")
    assert store.delete("a") == 3
    assert {sub for sub, _, _ in stored_rows(db)} == {"b"}
    store.create("a", TOPIC)
    assert pull_all(store, "a") == []
    assert pull_all(store, "b") == ["evt-0000", "evt-0001", "evt-0002"]


# --- the compact format -------------------------------------------------------------------------


def test_compact_event_golden() -> None:
    created = s3_event("dir/red flower+ü.jpg", version_id=VERSION_ID)
    assert created["s3"]["object"]["key"] == "dir/red+flower%2B%C3%BC.jpg"
    assert compact_event(created, "evt-0001") == {
        "id": "evt-0001",
        "event": "OBJECT_CREATE",
        "timestamp": "2026-11-21T10:15:30.123Z",
        "info": {
            "attrs": {"mtime": "2026-11-21T10:15:30.123Z"},
            "bucket": {"bucket_id": "photos", "name": "photos", "tenant": ""},
            "key": {"instance": VERSION_ID, "name": "dir/red flower+ü.jpg"},
        },
    }
    for name in (
        "ObjectRemoved:Delete",
        "ObjectRemoved:DeleteMarkerCreated",
        "s3:ObjectRemoved:*",
        "LifecycleExpiration:Delete",
        "LifecycleExpiration:DeleteMarkerCreated",
    ):
        removed = compact_event(s3_event("k", name=name), "evt-2")
        assert removed["event"] == "OBJECT_DELETE"
        assert removed["info"]["key"] == {"instance": "", "name": "k"}
    for name in (
        "ObjectCreated:Copy",
        "ObjectCreated:CompleteMultipartUpload",
        "ObjectCreated:Post",
    ):
        assert compact_event(s3_event("k", name=name), "e")["event"] == "OBJECT_CREATE"


def test_compact_events_of_metadata_changes_and_newer_types() -> None:
    for name in (
        "ObjectTagging:Put",
        "s3:ObjectTagging:Delete",
        "ObjectAcl:Put",
        "ObjectMetadata:Update",
    ):
        assert compact_event(s3_event("k", name=name), "e")["event"] == "OBJECT_METADATA_UPDATE"
    # a type this form does not know keeps its S3 name: a pull never fails on it
    renamed = compact_event(s3_event("k", name="ObjectRenamed:Rename"), "e")
    assert renamed["event"] == "ObjectRenamed:Rename"
    assert renamed["info"]["key"]["name"] == "k"


def test_compact_subscription_pull(store: SubscriptionStore) -> None:
    store.create("compact", TOPIC, format="compact")
    sent = [
        delivery(s3_event("a b.txt", version_id="null"), "evt-a"),
        delivery(s3_event("a b.txt", name="ObjectRemoved:DeleteMarkerCreated"), "evt-b"),
    ]
    store.store(TOPIC, sent, 7)
    page = store.pull("compact")
    assert page.format == "compact"
    assert page.events == [compact_event(d.event, d.event_id) for d in sent]
    assert [(e["id"], e["event"], e["info"]["key"]) for e in page.events] == [
        ("evt-a", "OBJECT_CREATE", {"instance": "null", "name": "a b.txt"}),
        ("evt-b", "OBJECT_DELETE", {"instance": "", "name": "a b.txt"}),
    ]
    assert page.to_dict() == {
        "next_marker": page.next_marker,
        "is_truncated": False,
        "events": page.events,
    }
    assert store.ack("compact", "evt-a")
    assert pull_all(store, "compact") == ["evt-b"]


# --- concurrent stores on PostgreSQL -------------------------------------------------------------


@pytest.mark.postgresql
def test_concurrent_stores_take_ids_in_commit_order(postgres_db: Metabase) -> None:
    """A store waits for one in flight into the same subscription, so a consumer's marker
    never passes an id that a transaction still in flight could fill."""
    db = postgres_db
    store = SubscriptionStore(db)
    store.create("audit", TOPIC)
    holding = threading.Event()
    release = threading.Event()
    first_thread: list[int] = []

    def hold(_conn: sa.Connection) -> None:
        if threading.get_ident() in first_thread:
            holding.set()
            assert release.wait(10)

    def first() -> None:
        first_thread.append(threading.get_ident())
        store.store(TOPIC, deliveries(3), 1)

    with before_commit(db, hold):
        one = threading.Thread(target=first)
        one.start()
        assert holding.wait(10)
        two = threading.Thread(target=lambda: store.store(TOPIC, deliveries(3, first=3), 2))
        two.start()
        two.join(0.5)
        assert two.is_alive(), "the second store did not wait for the first"
        assert store.pull("audit").events == []  # nothing committed yet
        release.set()
        one.join(10)
        two.join(10)
        assert not one.is_alive()
        assert not two.is_alive()
    page = store.pull("audit", max_entries=3)
    assert ids(page) == ["evt-0000", "evt-0001", "evt-0002"]
    assert ids(store.pull("audit", page.next_marker)) == ["evt-0003", "evt-0004", "evt-0005"]
