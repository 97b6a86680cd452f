"""The pipeline's routes and targets (no Spark): the configuration file's topics and the
phase-1 list give the first; a topic and a notification stored through the API's store reach
the registry and the Deliverer's targets together; an unchanged topic keeps its target; a
changed one gets a new target and the old one is closed; a deleted topic's target goes; a
topic whose destination cannot be built stays pull-only."""

from __future__ import annotations

import time
import uuid

from ripple.metabase import Metabase, create_project
from ripple.notifications.configuration import Notification
from ripple.notifications.registry import PROJECT_WIDE, Destination, Registry
from ripple.notifications.store import EventingStore, topic_arn
from ripple.notifications.topics import Topic
from ripple.pipeline.assemble import RoutesAndTargets
from ripple.pipeline.deliver import Deliverer, Unopened
from ripple.pipeline.queue import RetryQueue
from ripple.subscriptions.store import SubscriptionStore
from ripple.targets.base import OK, Delivery, Result
from ripple.targets.pubsub import PubSubTarget
from ripple.targets.retry import RetryPolicy
from ripple.targets.subscription import SubscriptionTarget
from ripple.targets.webhook import WebhookTarget
from tests.pipeline.fakes import delivery
from tests.receiver import receiver
from tests.waiting import wait_for


def setup(db: Metabase) -> tuple[EventingStore, Registry, RoutesAndTargets, Deliverer]:
    store, registry = EventingStore(db), Registry()
    routes_and_targets = RoutesAndTargets(
        {"static": Topic("static", "none")}, {}, registry, store, SubscriptionStore(db)
    )
    built = routes_and_targets.assemble()
    deliverer = Deliverer(built.targets, RetryQueue(db.writer), built.policies)
    routes_and_targets.deliverer = deliverer
    deliverer.open()
    return store, registry, routes_and_targets, deliverer


def names(deliverer: Deliverer) -> dict[str, list[str]]:
    return {topic: [t.name for t in ts] for topic, ts in deliverer.targets.items()}


def test_the_file_and_the_phase1_list_give_the_first_routes_and_targets(db: Metabase) -> None:
    """Each bucket of the phase-1 list is routed to its topic, which is built as the
    configuration file describes it or, when the file does not, with the defaults (Pub/Sub,
    by its name); a topic of the file that no bucket names is built too."""
    project, registry = uuid.uuid4(), Registry()
    photos, logs = "projects/my-team/topics/photos", "projects/my-team/topics/logs"
    configured = {logs: Topic(logs, "http://127.0.0.1:9/logs"), "spare": Topic("spare")}
    phase1 = {(project, "photos"): photos, (project, "logs"): logs}
    routes_and_targets = RoutesAndTargets(
        configured, phase1, registry, EventingStore(db), SubscriptionStore(db)
    )
    built = routes_and_targets.assemble()
    assert registry.destinations(project, "photos") == [Destination(photos)]
    assert registry.destinations(project, "logs") == [Destination(logs)]
    assert {topic: [type(t) for t in ts] for topic, ts in built.targets.items()} == {
        logs: [WebhookTarget, SubscriptionTarget],  # the file's description wins
        "spare": [SubscriptionTarget],  # named by no bucket: built all the same
        photos: [PubSubTarget, SubscriptionTarget],
    }


def test_a_new_topic_and_notification_arrive_together(db: Metabase) -> None:
    alice = create_project(db, "alice")
    store, registry, routes_and_targets, deliverer = setup(db)
    arn = topic_arn("us-east-1", str(alice.public_id), "photos")
    try:
        assert routes_and_targets.check() is False  # nothing changed since start
        with receiver() as hook:
            store.put_topic(alice.id, "photos", arn, hook.url, {}, "alice")
            store.put_notifications(
                alice.id,
                "photos",
                [Notification("created", arn, ("s3:ObjectCreated:*",), prefix="2026/")],
                "alice",
            )
            assert registry.destinations(alice.id, "photos") == []
            assert routes_and_targets.check() is True
            [destination] = registry.destinations(alice.id, "photos")
            assert (destination.topic, destination.configuration_id) == (arn, "created")
            assert destination.prefix == "2026/"
            assert names(deliverer) == {
                "static": ["subscriptions:static"],
                arn: [arn, f"subscriptions:{arn}"],
            }
            deliverer.deliver({arn: [delivery(1)]})
            wait_for(lambda: len(hook.posts) == 1, what="the webhook to get the event")
    finally:
        deliverer.close()


def test_unchanged_topics_keep_their_targets_and_changed_ones_are_replaced(db: Metabase) -> None:
    alice = create_project(db, "alice")
    store, _registry, routes_and_targets, deliverer = setup(db)
    keep = topic_arn("us-east-1", str(alice.public_id), "keep")
    change = topic_arn("us-east-1", str(alice.public_id), "change")
    try:
        store.put_topic(alice.id, "keep", keep, "http://127.0.0.1:9/a", {}, "alice")
        store.put_topic(alice.id, "change", change, "http://127.0.0.1:9/b", {}, "alice")
        routes_and_targets.check()
        kept, changed = deliverer.targets[keep][0], deliverer.targets[change][0]

        store.put_topic(alice.id, "change", change, "http://127.0.0.1:9/c", {}, "alice")
        assert routes_and_targets.check() is True
        assert deliverer.targets[keep][0] is kept
        assert deliverer.targets[change][0] is not changed
        assert deliverer.targets[change][0].config.url == "http://127.0.0.1:9/c"  # type: ignore[attr-defined]

        store.delete_topic(alice.id, "keep", "alice")
        assert routes_and_targets.check() is True
        assert keep not in deliverer.targets
        assert set(deliverer.targets) == {"static", change}
    finally:
        deliverer.close()


def test_a_topic_that_cannot_be_built_stays_pull_only(db: Metabase) -> None:
    alice = create_project(db, "alice")
    store, _registry, routes_and_targets, deliverer = setup(db)
    arn = topic_arn("us-east-1", str(alice.public_id), "broken")
    try:
        # the API refuses this; a row written by hand (or an older release) may hold it
        store.put_topic(alice.id, "broken", arn, "amqp://127.0.0.1", {}, "alice")
        assert routes_and_targets.check() is True
        assert names(deliverer)[arn] == [f"subscriptions:{arn}"]
    finally:
        deliverer.close()


def test_unknown_project_ids_do_not_matter_to_the_registry(db: Metabase) -> None:
    store, registry, routes_and_targets, deliverer = setup(db)
    try:
        ghost = uuid.uuid4()
        assert registry.destinations(ghost, "photos") == []
        assert routes_and_targets.check() is False
        assert store.generation() == routes_and_targets.generation
    finally:
        deliverer.close()


class Stubborn:
    """A target whose `open` fails until `ready` is set; it records what it publishes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ready = False
        self.opened = 0
        self.published: list[str] = []

    def open(self) -> None:
        if not self.ready:
            raise ConnectionError("the broker is away")
        self.opened += 1

    def publish(self, deliveries: list[Delivery]) -> list[Result]:
        self.published += [d.event_id for d in deliveries]
        return [OK] * len(deliveries)

    def close(self) -> None:
        pass


def test_a_target_that_cannot_open_waits_in_its_queue_and_stops_nothing(db: Metabase) -> None:
    stubborn, fine = Stubborn("stubborn"), Stubborn("fine")
    fine.ready = True
    deliverer = Deliverer(
        {"a": [stubborn], "b": [fine]},
        RetryQueue(db.writer),
        default_policy=RetryPolicy(attempts_in_batch=1, base_delay_s=0.001),
    )
    deliverer.open()  # does not raise
    try:
        [unopened] = deliverer.targets["a"]
        assert isinstance(unopened, Unopened)
        assert deliverer.targets["b"] == [fine]
        deliverer.deliver({"a": [delivery(1)], "b": [delivery(2)]})
        assert fine.published == [delivery(2).event_id]
        assert deliverer.queue.length("stubborn") == 1
        [queued] = deliverer.queue.due("stubborn", time.time_ns() + 10**12, 10)
        assert "cannot be opened: the broker is away" in queued.error

        stubborn.ready = True
        unopened.retry_s = 0.0
        wait_for(lambda: deliverer.drain(now_ns=time.time_ns() + 10**12) == 1, what="a drain")
        assert stubborn.published == [delivery(1).event_id]
        assert deliverer.queue.length("stubborn") == 0
    finally:
        deliverer.close()


def test_a_deleted_topic_goes_although_notifications_named_it(db: Metabase) -> None:
    alice = create_project(db, "alice")
    store, registry, routes_and_targets, deliverer = setup(db)
    arn = topic_arn("us-east-1", str(alice.public_id), "gone")
    try:
        store.put_topic(alice.id, "gone", arn, "none", {}, "alice")
        store.put_notifications(
            alice.id, "photos", [Notification("n", arn, ("s3:ObjectCreated:*",))], "alice"
        )
        routes_and_targets.check()
        assert arn in deliverer.targets
        assert registry.is_eventing(alice.id, "photos")
        store.delete_topic(alice.id, "gone", "alice")  # and the notification with it
        assert routes_and_targets.check() is True
        assert arn not in deliverer.targets
        assert not registry.is_eventing(alice.id, "photos")
    finally:
        deliverer.close()


def test_a_topics_include_arguments_reach_its_routes(db: Metabase) -> None:
    """`include-tags` / `include-metadata` set on the topic (SetTopicAttributes) reach the
    destinations of every notification that names it, with the next check."""
    alice = create_project(db, "alice")
    store, registry, routes_and_targets, deliverer = setup(db)
    arn = topic_arn("us-east-1", str(alice.public_id), "photos")
    try:
        store.put_topic(alice.id, "photos", arn, "none", {"include-tags": "true"}, "alice")
        notification = Notification("n", arn, ("s3:ObjectCreated:*",), tags=(("env", "prod"),))
        store.put_notifications(alice.id, "photos", [notification], "alice")
        assert routes_and_targets.check() is True
        [destination] = registry.destinations(alice.id, "photos")
        assert (destination.include_tags, destination.include_metadata) == (True, False)
        assert destination.tags == (("env", "prod"),)
        store.put_topic(alice.id, "photos", arn, "none", {"include-metadata": "on"}, "alice")
        assert routes_and_targets.check() is True
        [destination] = registry.destinations(alice.id, "photos")
        assert (destination.include_tags, destination.include_metadata) == (False, True)
    finally:
        deliverer.close()


def test_rename_and_project_event_arguments_reach_the_routes(db: Metabase) -> None:
    """`rename-events` reaches the destinations of the topic's notifications; a topic with
    `project-events` becomes a project-wide destination of its own project (bucket events),
    and stops being one when the argument goes."""
    alice = create_project(db, "alice")
    store, registry, routes_and_targets, deliverer = setup(db)
    arn = topic_arn("us-east-1", str(alice.public_id), "photos")
    try:
        store.put_topic(alice.id, "photos", arn, "none", {"rename-events": "single"}, "alice")
        store.put_notifications(
            alice.id, "photos", [Notification("n", arn, ("s3:ObjectCreated:*",))], "alice"
        )
        store.put_topic(
            alice.id, "all", arn + "-all", "none", {"project-events": "s3:BucketCreated:*"}, "alice"
        )
        assert routes_and_targets.check() is True
        [destination] = registry.destinations(alice.id, "photos")
        assert destination.rename_events == "single"
        [project] = registry.destinations(alice.id, PROJECT_WIDE)
        assert (project.topic, project.events) == (arn + "-all", ("s3:BucketCreated:*",))
        assert project.wants("BucketCreated:Put", "")
        assert not project.wants("BucketRemoved:Delete", "")
        store.put_topic(alice.id, "all", arn + "-all", "none", {}, "alice")
        assert routes_and_targets.check() is True
        assert registry.destinations(alice.id, PROJECT_WIDE) == []
    finally:
        deliverer.close()
