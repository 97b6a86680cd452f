"""Topics → targets: the push target each endpoint names, pull subscriptions for every
topic, retry policies from the topic's arguments, and one-line errors for wrong ones."""

from __future__ import annotations

import re

import pytest

from ripple.metabase import Metabase
from ripple.notifications.topics import Topic, parse_topics
from ripple.subscriptions.store import SubscriptionStore
from ripple.targets.destinations import build, policy_of
from ripple.targets.pubsub import PubSubTarget
from ripple.targets.retry import RetryPolicy
from ripple.targets.subscription import SubscriptionTarget
from ripple.targets.webhook import WebhookTarget

PHOTOS = "projects/my-team/topics/photos"


@pytest.fixture
def store(sqlite_url: str) -> SubscriptionStore:
    return SubscriptionStore(Metabase(sqlite_url))


def test_each_endpoint_kind_gets_its_push_target_and_every_topic_its_subscriptions(
    store: SubscriptionStore,
) -> None:
    topics = parse_topics(
        {
            PHOTOS: {},  # a Pub/Sub topic name without endpoint: Pub/Sub
            "hooks": {"push-endpoint": "http://127.0.0.1:8080/s3", "secret": "k", "timeout": 2},
            "mirror": {"push-endpoint": "pubsub://projects/my-team/topics/mirror"},
            "audit": {"push-endpoint": "none"},
            "plain": {},  # not a Pub/Sub name and no endpoint: pull-only
        }
    )
    built = build(topics, store)
    kinds = {name: [type(t) for t in targets] for name, targets in built.targets.items()}
    assert kinds == {
        PHOTOS: [PubSubTarget, SubscriptionTarget],
        "hooks": [WebhookTarget, SubscriptionTarget],
        "mirror": [PubSubTarget, SubscriptionTarget],
        "audit": [SubscriptionTarget],
        "plain": [SubscriptionTarget],
    }
    hook = built.targets["hooks"][0]
    assert isinstance(hook, WebhookTarget)
    assert hook.name == "hooks"
    assert hook.config.url == "http://127.0.0.1:8080/s3"
    assert hook.config.timeout_s == 2.0
    mirror = built.targets["mirror"][0]
    assert isinstance(mirror, PubSubTarget)
    assert (mirror.name, mirror.topic) == ("mirror", "projects/my-team/topics/mirror")
    assert built.targets["audit"][0].name == "subscriptions:audit"
    assert set(built.policies) == {PHOTOS, "hooks", "mirror"}  # pull targets keep the default


def test_retry_arguments_set_the_policy_and_are_not_given_to_the_target() -> None:
    topic = Topic(
        "hooks",
        "http://127.0.0.1:8080/s3",
        {"time-to-live": "600", "max-retries": "5", "retry-sleep-duration": "0.5"},
    )
    policy = policy_of(topic)
    assert (policy.time_to_live_s, policy.max_retries, policy.base_delay_s) == (600.0, 5, 0.5)
    assert policy.attempts_in_batch == RetryPolicy().attempts_in_batch


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"max-retries": "2.5"}, "topic 'hooks': argument 'max-retries' must be a whole number"),
        ({"time-to-live": "-1"}, "topic 'hooks': argument 'time-to-live' must be a number"),
        ({"colour": "red"}, "webhook 'hooks': unknown argument 'colour'"),
        ({"include-tags": "maybe"}, "topic 'hooks': argument 'include-tags' must be true or"),
        ({"include-metadata": ""}, "topic 'hooks': argument 'include-metadata' must be true"),
    ],
)
def test_wrong_arguments_are_one_line_errors_naming_them(
    store: SubscriptionStore, arguments: dict[str, str], message: str
) -> None:
    topics = {"hooks": Topic("hooks", "http://127.0.0.1:8080/s3", arguments)}
    with pytest.raises(ValueError, match=f"^{re.escape(message)}") as raised:
        build(topics, store)
    assert "\n" not in str(raised.value)


def test_arguments_of_a_pull_only_topic_are_refused(store: SubscriptionStore) -> None:
    with pytest.raises(ValueError, match="topic 'audit' is pull-only, so its arguments 'secret'"):
        build({"audit": Topic("audit", "none", {"secret": "k"})}, store)


def test_include_arguments_are_routings_so_any_topic_takes_them(store: SubscriptionStore) -> None:
    """`include-tags` / `include-metadata` are applied by routing: a pull-only topic takes
    them, and they are not handed to the push target (which would refuse them)."""
    flags = {"include-tags": "true", "include-metadata": "false"}
    built = build(
        {
            "audit": Topic("audit", "none", flags),
            "hooks": Topic("hooks", "http://127.0.0.1:8080/s3", flags),
        },
        store,
    )
    assert [type(t) for t in built.targets["audit"]] == [SubscriptionTarget]
    assert isinstance(built.targets["hooks"][0], WebhookTarget)
    assert Topic("audit", "none", flags).includes == (True, False)
    assert Topic("audit", "none", {"include-metadata": "yes"}).includes == (False, True)
    assert Topic("audit", "none").includes == (False, False)


def test_pubsub_arguments(store: SubscriptionStore) -> None:
    topic = Topic(PHOTOS, "", {"ordering": "true", "endpoint": "127.0.0.1:8085", "timeout": "3"})
    target = build({PHOTOS: topic}, store).targets[PHOTOS][0]
    assert isinstance(target, PubSubTarget)
    assert (target.ordering, target.endpoint, target.timeout_s) == (True, "127.0.0.1:8085", 3.0)
    with pytest.raises(ValueError, match=r"Pub/Sub topic .*: unknown argument 'secret'"):
        build({PHOTOS: Topic(PHOTOS, "", {"secret": "k"})}, store)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"t": {"push-endpoint": "ftp://127.0.0.1"}}, "has 'ftp'; supported: http"),
        ({"t": {"push-endpoint": "pubsub://events"}}, "is not of the form projects/"),
        ({"t": "http://x"}, "topics.'t' must be a table of arguments"),
        ({"t": {"header": ["a"]}}, "argument 'header' must be a string, number or boolean"),
        ({" t": {}}, "a topic name must be non-empty"),
    ],
)
def test_parse_topics_refuses_malformed_tables(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_topics(raw)


def test_parse_topics_turns_scalars_into_argument_strings() -> None:
    [topic] = parse_topics(
        {"t": {"push-endpoint": " none ", "verify-ssl": False, "max-retries": 3}}
    ).values()
    assert topic == Topic("t", "none", {"verify-ssl": "false", "max-retries": "3"})
    assert topic.kind == "pull"
