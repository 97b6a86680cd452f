"""End to end (Spark `local[2]`, SQLite and PostgreSQL): objects written through the
metabase in buckets on the phase-1 eventing list reach three real destinations of their
topic: a webhook receiver over HTTP on 127.0.0.1, a Pub/Sub Publisher over gRPC on 127.0.0.1
and a pull subscription in the metabase, with exactly the expected S3 event messages; a
webhook that refuses for 20 s and then recovers loses nothing, and costs the other
destinations nothing meanwhile; the records of a bucket with no destination are counted,
logged and dropped.

No Pub/Sub emulator can be installed here (Google's is a Java program shipped with the Cloud
SDK), so the official client library (`PubSubTarget`) talks to `FakePublisher`, a loopback
gRPC server speaking the Publisher wire protocol. Tests wait for conditions with deadlines,
never for fixed times.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from pyspark.sql import SparkSession

from ripple.changestream.reader import ChangeStreamReader
from ripple.changestream.tag import TransactionTag
from ripple.changestream.tail import transactions
from ripple.events import s3_events
from ripple.metabase import (
    BucketLocation,
    DeleteObjectsItem,
    Metabase,
    ObjectLocation,
    Project,
    Versioning,
    create_bucket,
    create_project,
    delete_object,
    delete_objects,
)
from ripple.notifications.phase1 import parse_eventing_buckets
from ripple.notifications.registry import Registry
from ripple.pipeline import metrics
from ripple.subscriptions.store import SubscriptionStore
from ripple.targets.base import Target
from ripple.targets.pubsub import PubSubTarget
from ripple.targets.retry import RetryPolicy
from ripple.targets.subscription import SubscriptionTarget
from ripple.targets.webhook import WebhookConfig, WebhookTarget
from tests.events.golden import s3_record
from tests.metabase.objects import commit_inline_object
from tests.pipeline.conftest import RunningPipeline, running_pipeline, wait_for
from tests.targets.pubsub_fake import FakePublisher

TOPIC = "projects/ripple-tests/topics/object-events"
SUBSCRIPTION = "object-events-pull"
OUTAGE_S = 20.0
T0 = datetime(2026, 11, 21, 10, 15, 30, 123456, tzinfo=UTC)  # the first write's commit time
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "grpc_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx and gRPC honour proxy variables; every request here goes to 127.0.0.1."""
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)


# --- the webhook receiver -------------------------------------------------------------------


@dataclass(frozen=True)
class Post:
    event_id: str  # X-Ripple-Event-Id
    content_type: str
    body: bytes
    status: int  # what the receiver answered
    at: float  # the receiver's clock when it answered


class WebhookReceiver:
    """An HTTP server on 127.0.0.1 that records every POST. It answers 503 while its own
    clock says less than `refuse_for_s` has passed since the first request it got, then
    200."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.refuse_for_s = 0.0
        self.first_at: float | None = None
        self._posts: list[Post] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with owner._lock:
                    now = owner.clock()
                    if owner.first_at is None:
                        owner.first_at = now
                    status = 503 if now - owner.first_at < owner.refuse_for_s else 200
                    owner._posts.append(
                        Post(
                            self.headers.get("X-Ripple-Event-Id", ""),
                            self.headers.get("Content-Type", ""),
                            body,
                            status,
                            now,
                        )
                    )
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/events"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def recovered(self) -> bool:
        """Has the refusal period (which starts at the first request) ended?"""
        with self._lock:
            return self.first_at is not None and self.clock() - self.first_at >= self.refuse_for_s

    def posts(self) -> list[Post]:
        with self._lock:
            return list(self._posts)

    def accepted(self) -> list[Post]:
        return [p for p in self.posts() if p.status == 200]

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)


# --- the scene: a project, buckets on the phase-1 list, three destinations of one topic -----


class Clock:
    """The metabase's clock, set by the test: commit timestamps become known in advance."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


def scene_targets(hook_url: str, pubsub_endpoint: str, db: Metabase) -> dict[str, list[Target]]:
    """One topic, three destinations (made in each Spark worker, over its metabase)."""
    return {
        TOPIC: [
            WebhookTarget(WebhookConfig(url=hook_url), name="webhook"),
            # no Pub/Sub emulator can be installed: the official client talks to a
            # loopback gRPC Publisher (tests/targets/pubsub_fake.py)
            PubSubTarget(TOPIC, endpoint=pubsub_endpoint),
            SubscriptionTarget(SubscriptionStore(db), TOPIC),
        ]
    }


class Scene:
    def __init__(self, db: Metabase, hook: WebhookReceiver, pubsub: FakePublisher) -> None:
        self.db = db
        self.hook = hook
        self.pubsub = pubsub
        self.project: Project = create_project(db, "end-to-end")
        self.store = SubscriptionStore(db)
        self.registry = Registry()
        db.eventing = self.registry.is_eventing

    def buckets(self, *names: str, versioned: tuple[str, ...] = ()) -> None:
        """Create the buckets and put them all on the phase-1 list, with TOPIC."""
        for name in names:
            versioning = Versioning.ENABLED if name in versioned else Versioning.UNVERSIONED
            create_bucket(self.db, BucketLocation(self.project.id, name), versioning=versioning)
        self.phase1(*names)

    def phase1(self, *names: str) -> None:
        """Make the phase-1 list exactly these buckets (`project_id:bucket:topic` each)."""
        listed = ",".join(f"{self.project.id}:{name}:{TOPIC}" for name in names)
        self.registry.replace_static(parse_eventing_buckets(listed))

    def at(self, bucket: str, key: str) -> ObjectLocation:
        return ObjectLocation(self.project.id, bucket, key)

    def pipeline(
        self, checkpoint: Path, policy: RetryPolicy | None = None
    ) -> AbstractContextManager[RunningPipeline]:
        return running_pipeline(
            self.db.url.render_as_string(hide_password=False),
            checkpoint,
            self.registry,
            functools.partial(scene_targets, self.hook.url, self.pubsub.endpoint),
            self.db.writer,
            policy=policy,
        )

    def pulled(self) -> list[dict[str, Any]]:
        result = self.store.pull(SUBSCRIPTION, max_entries=1000)
        assert not result.is_truncated
        return result.events

    def pubsub_events(self) -> list[dict[str, Any]]:
        return [orjson.loads(m.data)["Records"][0] for m in self.pubsub.messages]

    def stream_event_ids(self) -> dict[str, str]:
        """Event id → raw key of every event in the change stream (an event id is
        `partition-sequencer`, the same for every destination and every redelivery)."""
        reader = ChangeStreamReader(self.db.engine)
        owners = {str(self.project.id): str(self.project.public_id)}
        ids: dict[str, str] = {}
        for partition in range(reader.partitions()):
            for group in transactions(reader.drain(partition)):
                for event in s3_events(group, owners=owners):
                    ids[f"{partition}-{event.sequencer}"] = event.key
        return ids


@pytest.fixture
def scene(db: Metabase) -> Iterator[Scene]:
    hook = WebhookReceiver()
    with FakePublisher() as pubsub:
        made = Scene(db, hook, pubsub)
        made.store.create(SUBSCRIPTION, TOPIC)  # before any event flows
        try:
            yield made
        finally:
            hook.stop()


def by_sequencer(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(events, key=lambda e: e["s3"]["object"]["sequencer"])


def tag(n: int) -> TransactionTag:
    """The request context the gateway would give the n-th write."""
    return TransactionTag(
        request_id=f"REQ{n:04d}", host_id=f"host-id-{n}", principal="alice", source_ip="127.0.0.1"
    )


def sequencer(t: datetime, index: int) -> str:
    """The documented sequencer: commit time in UNIX ns (16 upper-case hex digits) and the
    event's ordinal in its transaction (8)."""
    ns = (t - EPOCH) // timedelta(microseconds=1) * 1000
    return f"{ns:016X}{index:08X}"


# --- the tests -----------------------------------------------------------------------------


def test_writes_reach_a_webhook_pubsub_and_a_pull_subscription_as_exact_s3_events(
    spark: SparkSession, scene: Scene, tmp_path: Path
) -> None:
    scene.buckets("photos", "archive", versioned=("archive",))
    clock = Clock(T0)
    scene.db.clock = clock

    def write(n: int, operation: Callable[[], Any]) -> Any:
        clock.at = T0 + timedelta(seconds=n)  # write n commits at 10:15:(30 + n).123456
        return operation()

    def put(bucket: str, key: str, data: bytes, n: int) -> Any:
        md5 = hashlib.md5(data).hexdigest()
        loc = scene.at(bucket, key)
        return write(n, lambda: commit_inline_object(scene.db, loc, data, etag=md5, tag=tag(n)))

    put("photos", "red flower.jpg", b"first", 0)
    put("photos", "red flower.jpg", b"second!", 1)  # an overwrite: a Put, no Delete
    put("photos", "b.jpg", b"bee", 2)
    write(3, lambda: delete_object(scene.db, scene.at("photos", "b.jpg"), tag=tag(3)))
    put("photos", "docs/c.txt", b"c", 4)
    items = [DeleteObjectsItem(k) for k in ("red flower.jpg", "docs/c.txt", "absent.jpg")]
    photos = BucketLocation(scene.project.id, "photos")
    write(5, lambda: delete_objects(scene.db, photos, items, tag=tag(5)))
    plan = "2026/plan ü.txt"
    created = put("archive", plan, b"plan", 6)
    removed = write(7, lambda: delete_object(scene.db, scene.at("archive", plan), tag=tag(7)))
    put_version, marker_version = created.object.version_id, removed.marker.version_id
    assert re.fullmatch(r"[0-9a-f]{32}", put_version)
    assert re.fullmatch(r"[0-9a-f]{32}", marker_version)
    assert put_version != marker_version

    owner = str(scene.project.public_id)

    def event(
        n: int,
        name: str,
        bucket: str,
        key: str,
        *,
        index: int = 0,
        size: int | None = None,
        etag: str | None = None,
        version_id: str | None = None,
    ) -> dict[str, Any]:
        obj: dict[str, Any] = {"key": key}
        if size is not None:
            obj["size"] = size
        if etag is not None:
            obj["eTag"] = etag
        if version_id is not None:
            obj["versionId"] = version_id
        obj["sequencer"] = sequencer(T0 + timedelta(seconds=n), index)
        return s3_record(
            eventTime=f"2026-11-21T10:15:{30 + n}.123Z",
            eventName=name,
            userIdentity={"principalId": "alice"},
            requestParameters={"sourceIPAddress": "127.0.0.1"},
            responseElements={"x-amz-request-id": f"REQ{n:04d}", "x-amz-id-2": f"host-id-{n}"},
            bucket=bucket,
            owner=owner,
            obj=obj,
        )

    put_ = "ObjectCreated:Put"
    delete_ = "ObjectRemoved:Delete"
    md5 = {data: hashlib.md5(data).hexdigest() for data in (b"first", b"second!", b"bee", b"c")}
    expected = [
        event(0, put_, "photos", "red+flower.jpg", size=5, etag=md5[b"first"]),
        event(1, put_, "photos", "red+flower.jpg", size=7, etag=md5[b"second!"]),
        event(2, put_, "photos", "b.jpg", size=3, etag=md5[b"bee"]),
        event(3, delete_, "photos", "b.jpg"),
        event(4, put_, "photos", "docs/c.txt", size=1, etag=md5[b"c"]),
        event(5, delete_, "photos", "red+flower.jpg", index=0),  # one DeleteObjects: two
        event(5, delete_, "photos", "docs/c.txt", index=1),  # events, and none for absent.jpg
        event(
            6,
            put_,
            "archive",
            "2026/plan+%C3%BC.txt",
            size=4,
            etag=hashlib.md5(b"plan").hexdigest(),
            version_id=put_version,
        ),
        event(
            7,
            "ObjectRemoved:DeleteMarkerCreated",
            "archive",
            "2026/plan+%C3%BC.txt",
            version_id=marker_version,
        ),
    ]
    assert expected[0]["s3"]["object"]["sequencer"] == "18EA07F04CD9DE0000000000"  # T0 in UNIX ns

    with scene.pipeline(tmp_path / "checkpoint"):
        wait_for(
            lambda: (
                len(scene.hook.accepted()) >= 9
                and len(scene.pubsub.messages) >= 9
                and len(scene.pulled()) >= 9
            ),
            "9 events reach the webhook, Pub/Sub and the pull subscription",
        )

    # the webhook: one POST per event, its body exactly {"Records":[event]}
    posts = sorted(
        scene.hook.posts(),
        key=lambda p: orjson.loads(p.body)["Records"][0]["s3"]["object"]["sequencer"],
    )
    assert [p.status for p in posts] == [200] * 9
    assert [orjson.loads(p.body) for p in posts] == [{"Records": [e]} for e in expected]
    assert {p.content_type for p in posts} == {"application/json"}
    for post, e in zip(posts, expected, strict=True):
        assert re.fullmatch(rf"\d+-{e['s3']['object']['sequencer']}", post.event_id)
    event_ids = [p.event_id for p in posts]
    assert len(set(event_ids)) == 9

    # Pub/Sub: the same bytes as the webhook's body, and the attributes to filter on
    data_of = {p.event_id: p.body for p in posts}
    messages = sorted(scene.pubsub.messages, key=lambda m: m.attributes["sequencer"])
    assert [orjson.loads(m.data) for m in messages] == [{"Records": [e]} for e in expected]
    assert [m.data for m in messages] == [data_of[i] for i in event_ids]
    assert {m.topic for m in messages} == {TOPIC}
    assert {m.ordering_key for m in messages} == {""}
    raw_keys = ["red flower.jpg"] * 2 + ["b.jpg"] * 2 + ["docs/c.txt", "red flower.jpg"]
    raw_keys += ["docs/c.txt", plan, plan]
    expected_attributes = []
    for e, key, event_id in zip(expected, raw_keys, event_ids, strict=True):
        attributes = {
            "eventId": event_id,  # the webhook's X-Ripple-Event-Id of the same event
            "eventName": e["eventName"],
            "bucket": e["s3"]["bucket"]["name"],
            "key": key,  # decoded: "red flower.jpg", not "red+flower.jpg"
            "sequencer": e["s3"]["object"]["sequencer"],
        }
        if "versionId" in e["s3"]["object"]:
            attributes["versionId"] = e["s3"]["object"]["versionId"]
        expected_attributes.append(attributes)
    assert [m.attributes for m in messages] == expected_attributes

    # the pull subscription: the same records, each with the same event id
    pulled = by_sequencer(scene.pulled())
    assert [entry.pop("eventId") for entry in pulled] == event_ids
    assert pulled == expected


def test_a_webhook_refusing_for_20_s_then_recovering_loses_nothing(
    spark: SparkSession, scene: Scene, tmp_path: Path
) -> None:
    scene.buckets("photos")
    hook = scene.hook
    hook.refuse_for_s = OUTAGE_S  # 503 for 20 s from its first request, by its own clock
    policy = RetryPolicy(base_delay_s=0.05, max_delay_s=1.0)
    written: list[str] = []
    reached_others_during_outage: list[str] = []

    def put(key: str) -> None:
        data = key.encode()
        loc = scene.at("photos", key)
        commit_inline_object(scene.db, loc, data, etag=hashlib.md5(data).hexdigest())
        written.append(key)

    def reached_the_others(key: str) -> bool:
        in_pubsub = any(m.attributes["key"] == key for m in scene.pubsub.messages)
        return in_pubsub and any(e["s3"]["object"]["key"] == key for e in scene.pulled())

    with scene.pipeline(tmp_path / "checkpoint", policy=policy) as deliverer:
        n = 0
        while not hook.recovered():  # keep writing through the outage, paced by delivery
            key = f"outage/{n:03d}.jpg"
            put(key)
            wait_for(lambda: reached_the_others(key), f"{key} reaches Pub/Sub and the pull")  # noqa: B023
            if not hook.recovered():
                reached_others_during_outage.append(key)
            n += 1
        for m in range(3):  # and some after it
            put(f"after/{m}.jpg")
        ids = scene.stream_event_ids()
        wait_for(
            lambda: set(ids) <= {p.event_id for p in hook.accepted()},
            "the webhook has received every event at least once",
            timeout=60,
        )
        wait_for(lambda: deliverer.queue.length() == 0, "the retry queue is empty", timeout=30)
        dead = deliverer.queue.dead()

    assert sorted(ids.values()) == sorted(written)
    assert len(ids) == len(written)
    # the outage was real: every request in its first 20 s was refused, and events were
    # written, and reached Pub/Sub and the pull subscription, throughout it
    posts = hook.posts()
    assert hook.first_at is not None
    refused = [p for p in posts if p.status == 503]
    assert refused, "the webhook never refused anything"
    assert all(p.at - hook.first_at < OUTAGE_S for p in refused)
    assert all(p.at - hook.first_at >= OUTAGE_S for p in hook.accepted())
    assert len(reached_others_during_outage) >= 5, reached_others_during_outage
    assert {p.event_id for p in refused} <= set(ids)

    # nothing lost anywhere, no dead letters
    accepted = hook.accepted()
    assert {p.event_id for p in accepted} == set(ids)
    pubsub_sequencers = [m.attributes["sequencer"] for m in scene.pubsub.messages]
    assert {i.split("-", 1)[1] for i in ids} == set(pubsub_sequencers)
    pulled_ids = [e["eventId"] for e in scene.pulled()]
    assert sorted(pulled_ids) == sorted(ids)  # exactly once into the subscription
    assert dead == []

    # a retried event is the same message as the one the others got at once
    data_of = {m.attributes["sequencer"]: m.data for m in scene.pubsub.messages}
    for post in accepted:
        assert orjson.loads(post.body) == orjson.loads(data_of[post.event_id.split("-", 1)[1]])
    webhook_duplicates = len(accepted) - len({p.event_id for p in accepted})
    pubsub_duplicates = len(pubsub_sequencers) - len(set(pubsub_sequencers))
    print(
        f"\n{len(ids)} events ({len(reached_others_during_outage)} reached the others during "
        f"the outage), {len(refused)} refused POSTs; duplicates: webhook "
        f"{webhook_duplicates}, Pub/Sub {pubsub_duplicates}"
    )


def test_records_of_a_bucket_without_destination_are_counted_logged_and_dropped(
    spark: SparkSession, scene: Scene, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    scene.buckets("photos", "gone")
    for key in ("lost photo.jpg", "lost/2.jpg"):
        commit_inline_object(scene.db, scene.at("gone", key), b"x", etag="x")
    delete_object(scene.db, scene.at("gone", "lost photo.jpg"))
    commit_inline_object(scene.db, scene.at("photos", "kept.jpg"), b"x", etag="x")
    scene.phase1("photos")  # "gone" leaves the list: its records stay in the stream
    assert scene.registry.destinations(scene.project.id, "gone") == []
    caplog.set_level(logging.WARNING, logger="ripple.pipeline.route")
    before = metrics.EVENTS_UNROUTED._value.get()

    with scene.pipeline(tmp_path / "checkpoint"):
        wait_for(
            lambda: bool(scene.hook.accepted() and scene.pubsub.messages and scene.pulled()),
            "the routed event reaches every destination",
        )
        wait_for(lambda: metrics.EVENTS_UNROUTED._value.get() >= before + 3, "3 are counted")

    assert metrics.EVENTS_UNROUTED._value.get() == before + 3
    webhook_keys = [
        orjson.loads(p.body)["Records"][0]["s3"]["object"]["key"] for p in scene.hook.posts()
    ]
    assert webhook_keys == ["kept.jpg"]
    assert [m.attributes["key"] for m in scene.pubsub.messages] == ["kept.jpg"]
    assert [e["s3"]["object"]["key"] for e in scene.pulled()] == ["kept.jpg"]
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.name == "ripple.pipeline.route" and r.levelno == logging.WARNING
    ]
    assert len(warnings) == 3, warnings
    for key in ("lost photo.jpg", "lost/2.jpg"):
        assert any(f"bucket gone key {key}:" in w for w in warnings), (key, warnings)
