"""SubscriptionTarget: the Target protocol in front of a topic's pull subscriptions."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from ripple.metabase import Metabase
from ripple.subscriptions import SubscriptionStore
from ripple.subscriptions.schema import subscription_events
from ripple.targets.base import OK, Outcome, Target
from ripple.targets.subscription import SubscriptionTarget
from tests.subscriptions import OTHER_TOPIC, TOPIC, deliveries


@pytest.fixture
def store(db: Metabase) -> SubscriptionStore:
    return SubscriptionStore(db)


def pulled(store: SubscriptionStore, name: str) -> list[str]:
    return [e["eventId"] for e in store.pull(name, max_entries=1000).events]


def test_publish_stores_into_every_subscription_of_the_topic(store: SubscriptionStore) -> None:
    store.create("a", TOPIC)
    store.create("b", TOPIC, format="compact")
    store.create("elsewhere", OTHER_TOPIC)
    target: Target = SubscriptionTarget(store, TOPIC)
    assert target.name == f"subscriptions:{TOPIC}"
    target.open()
    sent = deliveries(3)
    assert target.publish(sent) == [OK, OK, OK]
    target.close()
    assert pulled(store, "a") == ["evt-0000", "evt-0001", "evt-0002"]
    assert store.pull("a").events == [{**d.event, "eventId": d.event_id} for d in sent]
    assert [e["id"] for e in store.pull("b").events] == ["evt-0000", "evt-0001", "evt-0002"]
    assert pulled(store, "elsewhere") == []


def test_a_replayed_batch_is_stored_once(store: SubscriptionStore) -> None:
    store.create("a", TOPIC)
    target = SubscriptionTarget(store, TOPIC)
    assert target.publish(deliveries(3, batch_id=41)) == [OK] * 3
    store.ack("a", "evt-0000")
    # Spark replays batch 41 after a crash, then retries one event outside any batch
    assert target.publish(deliveries(3, batch_id=41)) == [OK] * 3
    assert target.publish(deliveries(1, batch_id=-1, first=1)) == [OK]
    assert pulled(store, "a") == ["evt-0001", "evt-0002"]


def test_a_topic_without_subscriptions_acknowledges_and_stores_nothing(
    store: SubscriptionStore,
) -> None:
    target = SubscriptionTarget(store, TOPIC)
    assert target.publish(deliveries(2)) == [OK, OK]
    assert target.publish([]) == []
    store.create("a", TOPIC)
    assert pulled(store, "a") == []


def test_a_database_error_asks_for_a_retry(tmp_path: Path) -> None:
    unmigrated = Metabase(f"sqlite:///{tmp_path / 'empty.db'}")
    try:
        target = SubscriptionTarget(SubscriptionStore(unmigrated), TOPIC)
        results = target.publish(deliveries(2))
    finally:
        unmigrated.dispose()
    assert [r.outcome for r in results] == [Outcome.RETRY, Outcome.RETRY]
    error = results[0].error
    assert error is not None
    assert error == "OperationalError: no such table: subscriptions"
    assert "\n" not in error


def test_an_unreachable_database_asks_for_a_retry() -> None:
    nowhere = Metabase("postgresql://postgres@127.0.0.1:1/nowhere")
    try:
        results = SubscriptionTarget(SubscriptionStore(nowhere), TOPIC).publish(deliveries(3))
    finally:
        nowhere.dispose()
    assert {r.outcome for r in results} == {Outcome.RETRY}
    error = results[0].error
    assert error is not None
    assert error.startswith("OperationalError: ")
    assert "127.0.0.1" in error
    assert "\n" not in error


def test_each_row_records_its_deliverys_batch(store: SubscriptionStore, db: Metabase) -> None:
    store.create("a", TOPIC)
    mixed = [*deliveries(2, batch_id=-1), *deliveries(1, batch_id=42, first=2)]
    assert SubscriptionTarget(store, TOPIC).publish(mixed) == [OK] * 3
    with db.read() as conn:
        rows = conn.execute(
            sa.select(subscription_events.c.event_id, subscription_events.c.batch_id).order_by(
                subscription_events.c.id
            )
        ).all()
    assert [tuple(r) for r in rows] == [("evt-0000", -1), ("evt-0001", -1), ("evt-0002", 42)]
