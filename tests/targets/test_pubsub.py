"""PubSubTarget against the loopback Publisher in `pubsub_fake` (real gRPC on 127.0.0.1),
reached through an explicit endpoint and through PUBSUB_EMULATOR_HOST.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

import grpc
import orjson
import pytest

from ripple.targets.base import OK, Outcome
from ripple.targets.pubsub import PubSubTarget, ordering_key
from tests.targets.conftest import delivery
from tests.targets.pubsub_fake import FakePublisher

TOPIC = "projects/ripple-test/topics/events"
MakeTarget = Callable[..., PubSubTarget]


@pytest.fixture
def fake() -> Iterator[FakePublisher]:
    with FakePublisher() as f:
        yield f


@pytest.fixture
def target_for(fake: FakePublisher) -> Iterator[MakeTarget]:
    """Opened targets on the fake's endpoint (unless told otherwise), closed at the end."""
    opened: list[PubSubTarget] = []

    def make(**options: object) -> PubSubTarget:
        options.setdefault("endpoint", fake.endpoint)
        options.setdefault("timeout_s", 5.0)
        target = PubSubTarget(TOPIC, **options)  # type: ignore[arg-type]
        target.open()
        opened.append(target)
        return target

    yield make
    for target in opened:
        target.close()


def test_publishes_data_and_attributes_through_an_explicit_endpoint(
    fake: FakePublisher, target_for: MakeTarget
) -> None:
    deliveries = [delivery(f"2026/{n}.jpg", n=n) for n in range(5)]
    target = target_for()

    assert target.name == TOPIC
    assert target.publish(deliveries) == [OK] * 5

    received = sorted(fake.messages, key=lambda m: m.attributes["sequencer"])
    assert [m.data for m in received] == [d.body for d in deliveries]
    assert [m.attributes for m in received] == [
        {"eventId": d.event_id, **d.attributes} for d in deliveries
    ]
    assert {m.topic for m in received} == {TOPIC}
    assert {m.ordering_key for m in received} == {""}
    record = orjson.loads(received[0].data)["Records"][0]
    assert record["eventName"] == "ObjectCreated:Put"
    assert record["s3"]["object"]["key"] == "2026/0.jpg"


def test_publishes_through_pubsub_emulator_host(
    fake: FakePublisher, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", fake.endpoint)
    target = PubSubTarget(TOPIC, timeout_s=5.0)
    target.open()
    try:
        d = delivery("via/emulator.txt")
        assert target.publish([d]) == [OK]
    finally:
        target.close()

    (message,) = fake.messages
    assert message.data == d.body
    assert message.attributes == {
        "eventId": d.event_id,
        "eventName": "ObjectCreated:Put",
        "bucket": "photos",
        "key": "via/emulator.txt",
        "sequencer": d.attributes["sequencer"],
    }


def test_a_large_batch_is_all_acknowledged(fake: FakePublisher, target_for: MakeTarget) -> None:
    deliveries = [delivery(f"bulk/{n}", n=n) for n in range(300)]

    results = target_for().publish(deliveries)

    assert results == [OK] * 300
    assert sorted(m.data for m in fake.messages) == sorted(d.body for d in deliveries)


def test_ordering_keys_are_bucket_slash_key(fake: FakePublisher, target_for: MakeTarget) -> None:
    deliveries = [delivery("a/x.jpg", n=0), delivery("b.jpg", n=1), delivery("a/x.jpg", n=2)]

    assert target_for(ordering=True).publish(deliveries) == [OK] * 3

    by_key: dict[str, list[str]] = {}
    for m in fake.messages:
        by_key.setdefault(m.ordering_key, []).append(m.attributes["sequencer"])
    assert set(by_key) == {"photos/a/x.jpg", "photos/b.jpg"}
    assert by_key["photos/a/x.jpg"] == [
        deliveries[0].attributes["sequencer"],
        deliveries[2].attributes["sequencer"],
    ]


def test_an_ordering_key_too_long_for_pubsub_is_hashed_per_object() -> None:
    long_key = "k" * 1100

    key = ordering_key(delivery(long_key))

    assert key.startswith("photos/sha256:")
    assert key == ordering_key(delivery(long_key, n=5))
    assert key != ordering_key(delivery(long_key + "x"))
    assert len(key.encode()) <= 1024
    assert ordering_key(delivery("short")) == "photos/short"


@pytest.mark.parametrize(
    "code",
    [
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.ABORTED,
    ],
)
def test_transient_errors_are_retry(
    fake: FakePublisher, target_for: MakeTarget, code: grpc.StatusCode
) -> None:
    fake.fail_next(1, code, "try later")

    (result,) = target_for().publish([delivery()])

    assert result.outcome is Outcome.RETRY
    assert result.error == f"{code.name}: try later"
    assert fake.calls == 1  # the client did not retry by itself: the pipeline does


@pytest.mark.parametrize(
    "code",
    [
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
    ],
)
def test_refusals_are_permanent(
    fake: FakePublisher, target_for: MakeTarget, code: grpc.StatusCode
) -> None:
    fake.fail_next(1, code, "no such topic")

    (result,) = target_for().publish([delivery()])

    assert result.outcome is Outcome.PERMANENT
    assert result.error == f"{code.name}: no such topic"


def test_after_a_failure_with_ordering_the_next_batch_proceeds(
    fake: FakePublisher, target_for: MakeTarget
) -> None:
    target = target_for(ordering=True)
    fake.fail_next(1, grpc.StatusCode.UNAVAILABLE)

    failed = target.publish([delivery("k", n=0), delivery("k", n=1)])
    assert [r.outcome for r in failed] == [Outcome.RETRY, Outcome.RETRY]
    assert fake.messages == []

    assert target.publish([delivery("k", n=0), delivery("k", n=1)]) == [OK, OK]
    assert [m.ordering_key for m in fake.messages] == ["photos/k", "photos/k"]


def test_a_permanent_failure_with_ordering_also_resumes_the_key(
    fake: FakePublisher, target_for: MakeTarget
) -> None:
    target = target_for(ordering=True)
    fake.fail_next(1, grpc.StatusCode.INVALID_ARGUMENT)

    assert target.publish([delivery("k")])[0].outcome is Outcome.PERMANENT
    assert target.publish([delivery("k", n=1)]) == [OK]


def test_an_unreachable_endpoint_is_retry() -> None:
    with socket.socket() as bound:  # bound but not listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        target = PubSubTarget(TOPIC, endpoint=f"127.0.0.1:{bound.getsockname()[1]}", timeout_s=2)
        target.open()
        try:
            (result,) = target.publish([delivery()])
        finally:
            target.close()

    assert result.outcome is Outcome.RETRY
    assert "\n" not in (result.error or "")


@pytest.mark.parametrize(
    "topic",
    ["events", "projects/p/topics/", "projects//topics/t", "projects/p/subscriptions/s",
     "projects/p/topics/t/extra"],
)  # fmt: skip
def test_a_bad_topic_name_is_refused(topic: str) -> None:
    with pytest.raises(ValueError, match=r"topic .* is not of the form projects/PROJECT/topics"):
        PubSubTarget(topic)


def test_publish_before_open_is_a_bug() -> None:
    with pytest.raises(RuntimeError, match="open"):
        PubSubTarget(TOPIC).publish([delivery()])
