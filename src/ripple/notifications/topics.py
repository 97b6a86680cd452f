"""Topics: the named destinations bucket notifications send events to.

A topic has a push endpoint and arguments, as the topics of a peer object store do; it is
made through the topic API or configured in `ripple.toml`, one table per topic:

    [topics."projects/my-team/topics/photos"]
    push-endpoint = "https://hooks.example/s3"
    time-to-live = 3600

An unset push endpoint means Google Pub/Sub for a name like `projects/P/topics/T`, and
pull-only for any other; `none` is pull-only. Every topic's events are also stored in its
pull subscriptions. `parse_topics` checks the shape; what the arguments mean is the targets'
business (`ripple.targets.destinations`). Endpoints: docs/configuration.md, "Topics".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ripple.notifications.arguments import flag
from ripple.notifications.endpoints import Endpoint, parse_endpoint
from ripple.notifications.phase1 import topic_name_problem

__all__ = [
    "INCLUDE_METADATA",
    "INCLUDE_TAGS",
    "PROJECT_EVENTS",
    "PULL_ONLY",
    "RENAME_EVENTS",
    "RENAME_MODES",
    "Kind",
    "Topic",
    "parse_topics",
]

PULL_ONLY = "none"
# Topic arguments (true/false, default false): the topic's events carry the object's tags
# (`s3.object.tags`) / user metadata (`s3.object.metadata`), as another object store's do.
# Routing adds them (`ripple.pipeline.route`), so push targets and pull subscriptions alike
# get them.
INCLUDE_TAGS = "include-tags"
INCLUDE_METADATA = "include-metadata"
# Topic argument: how its notifications see a rename: `s3` (the default), an
# `ObjectRemoved:Delete` for each source key and an `ObjectCreated:Put` for each destination
# key; `single`, one `ObjectRenamed:Rename` with `renameFromKey` (one for a whole prefix)
RENAME_EVENTS = "rename-events"
RENAME_MODES = ("s3", "single")
# Topic argument: the bucket events of the topic's own project it gets, a comma-separated
# list of event types (`s3:BucketCreated:*`, `s3:BucketRemoved:*`, or exact ones): a
# project-wide notification, opted into per topic
PROJECT_EVENTS = "project-events"
Kind = Literal["webhook", "pubsub", "amqp", "nats", "mqtt", "redis", "kafka", "snapshot", "pull"]


@dataclass(frozen=True)
class Topic:
    name: str  # unique among the pipeline's topics: a configured name, or an API topic's ARN
    push_endpoint: str = ""  # empty: the default for the name (see the module docstring)
    arguments: Mapping[str, str] = field(default_factory=dict)
    label: str = ""  # the name its owner gave an API topic: the default routing key, subject…

    @property
    def endpoint(self) -> Endpoint | None:
        """The parsed push endpoint; None when there is none (pull-only, or Pub/Sub by name)."""
        if not self.push_endpoint or self.push_endpoint == PULL_ONLY:
            return None
        return parse_endpoint(self.push_endpoint)

    @property
    def kind(self) -> Kind:
        """Where events are pushed: the endpoint's kind, or nowhere (pull-only)."""
        endpoint = self.endpoint
        if endpoint is not None:
            return endpoint.kind
        if not self.push_endpoint and topic_name_problem(self.name) is None:
            return "pubsub"
        return "pull"

    @property
    def includes(self) -> tuple[bool, bool]:
        """Whether its events carry the object's (tags, metadata): `include-tags` and
        `include-metadata`; a value that is not a flag (refused when the topic is made)
        counts as false."""
        return _flag(self.arguments.get(INCLUDE_TAGS)), _flag(self.arguments.get(INCLUDE_METADATA))

    @property
    def project_events(self) -> tuple[str, ...]:
        """The bucket event types of `project-events` (none when it is not set)."""
        raw = self.arguments.get(PROJECT_EVENTS) or ""
        return tuple(part.strip() for part in raw.split(",") if part.strip())

    @property
    def rename_events(self) -> str:
        """`rename-events`: `s3` or `single`; a value that is neither (refused when the topic
        is made) counts as `s3`."""
        value = (self.arguments.get(RENAME_EVENTS) or "").strip().lower()
        return value if value in RENAME_MODES else RENAME_MODES[0]

    @property
    def pubsub_topic(self) -> str:
        """The Pub/Sub topic a `pubsub` topic publishes to."""
        return self.push_endpoint.removeprefix("pubsub://") or self.name


def _flag(value: str | None) -> bool:
    if value is None:
        return False
    try:
        return flag("", value)
    except ValueError:
        return False


def _text(value: Any) -> str | None:
    """A TOML scalar as an argument string; None for tables, lists and dates."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def parse_topics(raw: Mapping[str, Any]) -> dict[str, Topic]:
    """The `[topics."<name>"]` tables of the configuration file, checked.

    Raises `ValueError` with one line naming the topic and argument at fault.
    """
    topics: dict[str, Topic] = {}
    for name, table in raw.items():
        where = f"topics.{name!r}"
        if not name or name != name.strip():
            raise ValueError(f"{where}: a topic name must be non-empty, without outer spaces")
        if not isinstance(table, Mapping):
            raise ValueError(
                f"{where} must be a table of arguments, e.g. "
                f'[topics."{name}"] push-endpoint = "https://hooks.example/s3"'
            )
        arguments: dict[str, str] = {}
        for arg, value in table.items():
            text = _text(value)
            if text is None:
                raise ValueError(
                    f"{where}: argument {arg!r} must be a string, number or boolean, "
                    f"not {type(value).__name__}"
                )
            arguments[arg] = text
        endpoint = arguments.pop("push-endpoint", "").strip()
        if endpoint and endpoint != PULL_ONLY:
            try:
                parsed = parse_endpoint(endpoint)
            except ValueError as e:
                raise ValueError(f"{where}: push-endpoint: {e}, or {PULL_ONLY!r}") from None
            if parsed.kind == "pubsub":
                problem = topic_name_problem(parsed.path)
                if problem is not None:
                    raise ValueError(f"{where}: push-endpoint {endpoint!r}: {problem}")
        topics[name] = Topic(name, endpoint, arguments)
    return topics
