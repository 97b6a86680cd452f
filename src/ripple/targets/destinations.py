"""The pipeline's targets, built from its topics.

Each topic gets the push target its endpoint names (none when it is pull-only) and, always,
its pull subscriptions; its retry arguments set the push target's retry policy, `OpaqueData`
and `format` wrap it. `include-tags`, `include-metadata`, `rename-events` and
`project-events` are only checked here: routing (`ripple.pipeline.route`) applies them, so
they hold for pull-only topics too. A wrong argument is a `ValueError` naming the topic and
the argument, before anything starts. A target's module, and its broker's SDK, is imported
only when a target of its kind is built (`BUILDERS`): the gateway checks topics with
`push_target` and loads no SDK it does not use, nor Spark.

The arguments: docs/targets.md, "Destination URIs and common arguments".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from ripple.events.names import BUCKET_EVENT_NAMES, matches
from ripple.notifications.arguments import choice, flag, positive, whole
from ripple.notifications.endpoints import Endpoint
from ripple.notifications.topics import (
    INCLUDE_METADATA,
    INCLUDE_TAGS,
    PROJECT_EVENTS,
    RENAME_EVENTS,
    RENAME_MODES,
    Topic,
)
from ripple.subscriptions.store import SubscriptionStore
from ripple.targets import hdfs_inotify
from ripple.targets.base import Target
from ripple.targets.guard import DestinationRefused, default_guard
from ripple.targets.opaque import OpaqueDataTarget
from ripple.targets.retry import RetryPolicy
from ripple.targets.subscription import SubscriptionTarget

__all__ = ["BUILDERS", "Destinations", "build", "policy_of", "push_target"]

ORDERING = "ordering"
ORDERINGS = ("per-key", "off")
RETRY_ARGUMENTS = ("time-to-live", "max-retries", "retry-sleep-duration", "persistent", ORDERING)
# applied by routing, for every target
ROUTING_ARGUMENTS = (INCLUDE_TAGS, INCLUDE_METADATA, RENAME_EVENTS, PROJECT_EVENTS)
COMMON_ARGUMENTS = (*RETRY_ARGUMENTS, "OpaqueData", "format", *ROUTING_ARGUMENTS)
FORMATS = ("s3", hdfs_inotify.FORMAT)


# builds a topic's push target from the arguments left for it
Builder = Callable[[Topic, Mapping[str, str]], Target]


def _webhook(topic: Topic, arguments: Mapping[str, str]) -> Target:
    from ripple.targets import webhook

    return webhook.from_arguments(topic.name, topic.push_endpoint, arguments)


def _pubsub(topic: Topic, arguments: Mapping[str, str]) -> Target:
    from ripple.targets import pubsub

    target = pubsub.from_arguments(topic.name, topic.pubsub_topic, arguments)
    # its endpoint argument, and an API topic's project: `DestinationRefused`
    target.check(default_guard(), api_topic=bool(topic.label))
    return target


def _endpoint(topic: Topic) -> Endpoint:
    """The topic's parsed push endpoint, which chose its builder."""
    endpoint = topic.endpoint
    if endpoint is None:
        raise ValueError(f"topic {topic.name!r} has no push endpoint")
    return endpoint


def _snapshot(topic: Topic, arguments: Mapping[str, str]) -> Target:
    from ripple.targets import snapshot

    return snapshot.from_arguments(topic.name, _endpoint(topic).path, arguments)


def _amqp(topic: Topic, arguments: Mapping[str, str]) -> Target:
    from ripple.targets import amqp

    return amqp.from_arguments(topic.name, _endpoint(topic), arguments)


def _nats(topic: Topic, arguments: Mapping[str, str]) -> Target:
    from ripple.targets import nats

    return nats.from_arguments(topic.name, _endpoint(topic), arguments)


def _mqtt(topic: Topic, arguments: Mapping[str, str]) -> Target:
    from ripple.targets import mqtt

    return mqtt.from_arguments(topic.name, _endpoint(topic), arguments)


def _redis(topic: Topic, arguments: Mapping[str, str]) -> Target:
    from ripple.targets import redis

    return redis.from_arguments(topic.name, _endpoint(topic), arguments)


def _kafka(topic: Topic, arguments: Mapping[str, str]) -> Target:
    from ripple.targets import kafka

    endpoint = _endpoint(topic)
    target = kafka.from_arguments(topic.name, endpoint, arguments)
    guard = default_guard()
    for host, _port in endpoint.servers[1:]:  # the first is checked with every endpoint
        guard.check_host(host)
    return target


# each kind of push target, and what builds one (importing the target's module then)
BUILDERS: dict[str, Builder] = {
    "webhook": _webhook,
    "pubsub": _pubsub,
    "snapshot": _snapshot,
    "amqp": _amqp,
    "nats": _nats,
    "mqtt": _mqtt,
    "redis": _redis,
    "kafka": _kafka,
}


@dataclass
class Destinations:
    """What a `Deliverer` needs: each topic's targets, and the retry policy per target."""

    targets: dict[str, list[Target]] = field(default_factory=dict)
    policies: dict[str, RetryPolicy] = field(default_factory=dict)


def policy_of(topic: Topic, default: RetryPolicy | None = None) -> RetryPolicy:
    """The retry policy the topic's arguments set (`ValueError` naming a wrong one)."""
    policy = default or RetryPolicy()
    args = topic.arguments
    try:
        if "time-to-live" in args:
            policy = replace(policy, time_to_live_s=positive("time-to-live", args["time-to-live"]))
        if "max-retries" in args:
            policy = replace(policy, max_retries=whole("max-retries", args["max-retries"]))
        if "retry-sleep-duration" in args:
            policy = replace(
                policy,
                base_delay_s=positive("retry-sleep-duration", args["retry-sleep-duration"]),
            )
        if "persistent" in args:
            policy = replace(policy, persistent=flag("persistent", args["persistent"]))
        if ORDERING in args:
            policy = replace(policy, per_key_order=_ordering(topic) == "per-key")
    except ValueError as e:
        raise ValueError(f"topic {topic.name!r}: {e}") from None
    return policy


def _ordering(topic: Topic) -> str:
    """The topic's `ordering`: `per-key` or `off`; a Pub/Sub topic's may also be `true` or
    `false` (its ordering keys alone, as before per-key ordering)."""
    value = topic.arguments.get(ORDERING, "off")
    if topic.kind == "pubsub" and value.strip().lower() not in ORDERINGS:
        try:
            return "true" if flag(ORDERING, value) else "false"
        except ValueError:
            raise ValueError(
                f"argument {ORDERING!r} must be per-key, off, true or false, not {value!r}"
            ) from None
    return choice(ORDERING, value, ORDERINGS)


def push_target(topic: Topic) -> Target | None:
    """The target the topic's push endpoint names, or None for a pull-only topic.

    `ValueError` naming the topic if an argument is wrong, or if the destination guard
    (`ripple.targets.guard.default_guard`) refuses the endpoint's host, or an API topic's
    Google Pub/Sub project."""
    for pattern in topic.project_events:
        if not any(matches(pattern, name) for name in BUCKET_EVENT_NAMES):
            raise ValueError(
                f"topic {topic.name!r}: {PROJECT_EVENTS} takes bucket event types "
                f"(s3:BucketCreated:*, s3:BucketRemoved:*, or exact ones), not {pattern!r}"
            )
    rename = topic.arguments.get(RENAME_EVENTS)
    if rename is not None and rename.strip().lower() not in RENAME_MODES:
        raise ValueError(
            f"topic {topic.name!r}: {RENAME_EVENTS} must be s3 or single, not {rename!r}"
        )
    for name in (INCLUDE_TAGS, INCLUDE_METADATA):
        if name in topic.arguments:
            try:
                flag(name, topic.arguments[name])
            except ValueError as e:
                raise ValueError(f"topic {topic.name!r}: {e}") from None
    arguments = {k: v for k, v in topic.arguments.items() if k not in COMMON_ARGUMENTS}
    if ORDERING in topic.arguments:
        try:
            order = _ordering(topic)
        except ValueError as e:
            raise ValueError(f"topic {topic.name!r}: {e}") from None
        if topic.kind == "pubsub":  # per-key: its ordering keys too
            arguments[ORDERING] = {"per-key": "true", "off": "false"}.get(order, order)
    if topic.label:  # an API topic, named by its ARN: brokers see the name its owner gave it
        default = {
            "amqp": "amqp-routing-key",
            "nats": "nats-subject",
            "mqtt": "mqtt-topic",
            "kafka": "kafka-topic",
        }
        argument = default.get(topic.kind)
        if argument is not None:
            arguments.setdefault(argument, topic.label)
    builder = BUILDERS.get(topic.kind)  # none for a pull-only topic
    if builder is None:
        extra = [a for a in topic.arguments if a not in ("persistent", *ROUTING_ARGUMENTS)]
        if extra:
            raise ValueError(
                f"topic {topic.name!r} is pull-only, so its arguments "
                f"{', '.join(map(repr, extra))} would do nothing; remove them"
            )
        return None
    endpoint = topic.endpoint
    try:
        target = builder(topic, arguments)
        if endpoint is not None and endpoint.host:
            default_guard().check_host(endpoint.host)
    except DestinationRefused as e:
        raise ValueError(f"topic {topic.name!r}: {e}") from None
    opaque = topic.arguments.get("OpaqueData")
    if opaque is not None:
        target = OpaqueDataTarget(target, opaque)
    event_format = topic.arguments.get("format", "s3")
    if event_format not in FORMATS:
        raise ValueError(
            f"topic {topic.name!r}: format is {event_format!r}; use one of {', '.join(FORMATS)}"
        )
    if event_format == hdfs_inotify.FORMAT:
        if topic.kind == "snapshot" or opaque is not None:
            what = "a snapshot:// archive" if topic.kind == "snapshot" else "OpaqueData"
            raise ValueError(
                f"topic {topic.name!r}: format=hdfs-inotify cannot be combined with {what}"
            )
        if topic.arguments.get("redis-format") == "namespace":
            raise ValueError(
                f"topic {topic.name!r}: format=hdfs-inotify sends event batches, which a Redis "
                "namespace (one hash field per key) cannot hold; use redis-format=stream"
            )
        target = hdfs_inotify.HdfsInotifyTarget(target)
    return target


def build(
    topics: Mapping[str, Topic], store: SubscriptionStore, default: RetryPolicy | None = None
) -> Destinations:
    """Every topic's push target (if any) and pull subscriptions, with their policies."""
    built = Destinations()
    for name, topic in sorted(topics.items()):
        targets: list[Target] = []
        target = push_target(topic)
        if target is not None:
            targets.append(target)
            built.policies[target.name] = policy_of(topic, default)
        targets.append(SubscriptionTarget(store, name))
        built.targets[name] = targets
    return built
