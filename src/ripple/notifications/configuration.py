"""Bucket notification configurations: what S3's `NotificationConfiguration` document says,
checked as S3 checks it (the gateway reads and writes the XML,
`ripple.gateway.notification_xml`). A bucket's configuration is a list of `Notification`s,
each sending some events about some keys to a topic:

    n = notification(id_, topic_arn, events, key, metadata, tags)  # rules as sent; or raises
    check_together(notifications)  # all together: overlap, ids, count
    check_configuration(notifications)  # made otherwise: each as `notification`, then together
    validate_topics(notifications, topic_exists)  # NotificationError naming unknown topics
    row = json.dumps(notification_to_json(n))  # stored; notification_from_json

Where ripple differs from S3 (the event types, the `regex`, `S3Metadata` and `S3Tags`
filters, overlap judged only between configurations to the same topic) and the limits:
docs/notifications.md, "Bucket notifications (S3 API)".
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ripple.events.names import ALL_EVENT_NAMES, matches
from ripple.notifications.errors import NotificationError, invalid
from ripple.notifications.filters import FilterRules, filter_rules
from ripple.notifications.registry import Destination

__all__ = [
    "EVENT_TYPES",
    "MAX_CONFIGURATIONS",
    "Notification",
    "check_configuration",
    "check_together",
    "notification",
    "notification_from_json",
    "notification_to_json",
    "parse_topic_arn",
    "validate_topics",
]

UNVALIDATED: Final = "Unable to validate the following destination configurations"
TOPIC_NOT_FOUND: Final = "The destination topic does not exist or is not owned by you"
AMBIGUOUS: Final = (
    "Configuration is ambiguously defined. Cannot have overlapping suffixes in two rules "
    "if the prefixes are overlapping for the same event type."
)
MAX_CONFIGURATIONS: Final = 100
MAX_ID_LENGTH: Final = 255

# The event types a configuration may name: each event ripple emits, and its family's `*`.
EVENT_TYPES: Final = tuple(
    sorted({f"s3:{name.split(':')[0]}:*" for name in ALL_EVENT_NAMES})
    + [f"s3:{name}" for name in ALL_EVENT_NAMES]
)

_TOPIC_ARN = re.compile(
    r"arn:(?P<partition>[a-z][a-z0-9-]*):sns:(?P<region>[a-z0-9-]*)"
    r":(?P<account>[^:\s]+):(?P<name>[^:\s]+)"
)


@dataclass(frozen=True)
class Notification:
    """One TopicConfiguration: which events about which keys go to which topic.

    `events` are event types as configured (`s3:ObjectCreated:*`); `regex`, when set, must
    match the whole key; `metadata` is (name, value) rules on the object's user metadata,
    `tags` (key, value) rules on its tags.
    """

    id: str
    topic_arn: str
    events: tuple[str, ...]
    prefix: str = ""
    suffix: str = ""
    regex: str | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    tags: tuple[tuple[str, str], ...] = ()

    @property
    def filter_rules(self) -> FilterRules:
        return FilterRules(self.prefix, self.suffix, self.regex, self.metadata, self.tags)

    def destination(self) -> Destination:
        """What routing sends by: this notification's topic, id and filters."""
        return Destination(
            topic=self.topic_arn,
            configuration_id=self.id,
            events=tuple(self.events),
            prefix=self.prefix,
            suffix=self.suffix,
            regex=self.regex,
            metadata=tuple(self.metadata),
            tags=tuple(self.tags),
        )

    def wants(
        self,
        event_name: str,
        key: str,
        metadata: Mapping[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> bool:
        """Does this notification send an event of this name about this key?

        `metadata` is the object's user metadata (names with or without `x-amz-meta-`), `tags`
        its tags; when one is None and the notification has rules on it, the answer is no.
        """
        return self.destination().wants(event_name, key, metadata, tags)


def parse_topic_arn(arn: str) -> tuple[str, str, str]:
    """The (region, account, name) of `arn:aws:sns:REGION:ACCOUNT:NAME`; ValueError if not one.

    Any partition is accepted (ripple's is configurable); the region may be empty.
    """
    match = _TOPIC_ARN.fullmatch(arn)
    if match is None:
        raise ValueError(f"{arn!r} is not a topic ARN of the form arn:aws:sns:REGION:ACCOUNT:NAME")
    return match["region"], match["account"], match["name"]


def notification(
    id_: str,
    topic_arn: str,
    events: Sequence[str],
    key_rules: Sequence[tuple[str, str]] = (),
    metadata_rules: Sequence[tuple[str, str]] = (),
    tag_rules: Sequence[tuple[str, str]] = (),
) -> Notification:
    """One TopicConfiguration as sent (values stripped, filter rules as sent); an empty
    `id_` gets one that looks like S3's. NotificationError naming the first thing wrong:
    the Id, the Topic, an Event, then the filter rules."""
    id_ = id_.strip() or _generated_id()
    if len(id_) > MAX_ID_LENGTH:
        raise invalid(f"The Id is longer than {MAX_ID_LENGTH} characters", "Id", id_)
    topic_arn = topic_arn.strip()
    if not topic_arn:
        raise invalid(
            "A TopicConfiguration needs a Topic: arn:aws:sns:REGION:ACCOUNT:NAME", "Topic", ""
        )
    try:
        parse_topic_arn(topic_arn)
    except ValueError:
        raise invalid("The ARN is not well formed", "Topic", topic_arn) from None
    chosen: list[str] = []
    for event in (e.strip() for e in events):
        if event not in EVENT_TYPES:
            raise invalid("The event is not supported for notifications", "Event", event)
        if event not in chosen:
            chosen.append(event)
    if not chosen:
        raise invalid("A TopicConfiguration needs at least one Event", "Event", "")
    rules = filter_rules(key_rules, metadata_rules, tag_rules)
    return Notification(
        id_,
        topic_arn,
        tuple(chosen),
        rules.prefix,
        rules.suffix,
        rules.regex,
        rules.metadata,
        rules.tags,
    )


def check_configuration(notifications: Sequence[Notification]) -> None:
    """A bucket's whole configuration made by other means than `notification` (the
    pull-subscription API): each one checked as `notification` checks what is sent, then all
    together (`check_together`); NotificationError."""
    for n in notifications:
        rules = n.filter_rules
        notification(n.id, n.topic_arn, n.events, rules.key_rules(), n.metadata, n.tags)
    check_together(notifications)


def check_together(notifications: Sequence[Notification]) -> None:
    """What S3 checks of a bucket's configurations together: at most 100, unique Ids, no two
    sending one event to one topic (NotificationError)."""
    if (count := len(notifications)) > MAX_CONFIGURATIONS:
        message = f"too many TopicConfigurations: {count}; the limit is {MAX_CONFIGURATIONS}"
        raise invalid(message, "TopicConfiguration", str(count))
    ids = [n.id for n in notifications]
    for id_ in ids:
        if ids.count(id_) > 1:
            raise invalid(
                "Same ID used for multiple configurations. IDs must be unique.", "Id", id_
            )
    for i, first in enumerate(notifications):
        for second in notifications[i + 1 :]:
            if _overlap(first, second):
                raise invalid(AMBIGUOUS, "Id", f"{first.id}, {second.id}")


def validate_topics(
    notifications: Iterable[Notification], topic_exists: Callable[[str], bool]
) -> None:
    """Raise one NotificationError naming every topic ARN for which `topic_exists` is False,
    as S3 does:
    `ArgumentName1`/`ArgumentValue1`, `ArgumentName2`/... in the order of first mention."""
    checked: set[str] = set()
    missing: list[str] = []
    for notification in notifications:
        arn = notification.topic_arn
        if arn not in checked:
            checked.add(arn)
            if not topic_exists(arn):
                missing.append(arn)
    if missing:
        extra: dict[str, str] = {}
        for number, arn in enumerate(missing, start=1):
            extra[f"ArgumentName{number}"] = arn
            extra[f"ArgumentValue{number}"] = TOPIC_NOT_FOUND
        raise NotificationError("InvalidArgument", UNVALIDATED, extra)


def notification_to_json(notification: Notification) -> dict[str, Any]:
    """A notification as a JSON-ready dict, to store it as JSON text."""
    return {
        "id": notification.id,
        "topic_arn": notification.topic_arn,
        "events": list(notification.events),
        "prefix": notification.prefix,
        "suffix": notification.suffix,
        "regex": notification.regex,
        "metadata": [[name, value] for name, value in notification.metadata],
        "tags": [[name, value] for name, value in notification.tags],
    }


def notification_from_json(data: Mapping[str, Any]) -> Notification:
    """The notification `notification_to_json` stored; ValueError if `data` is not one."""
    try:
        regex = data.get("regex")
        return Notification(
            id=_text(data["id"]),
            topic_arn=_text(data["topic_arn"]),
            events=tuple(_text(event) for event in _items(data["events"])),
            prefix=_text(data.get("prefix", "")),
            suffix=_text(data.get("suffix", "")),
            regex=None if regex is None else _text(regex),
            metadata=_pairs(data.get("metadata", [])),
            tags=_pairs(data.get("tags", [])),
        )
    except (KeyError, TypeError) as e:
        raise ValueError(f"not a stored notification ({e!r}): {data!r}") from e


def _overlap(first: Notification, second: Notification) -> bool:
    """Could one event go to the same topic through both configurations?"""
    return (
        first.topic_arn == second.topic_arn
        and not _selected(first.events).isdisjoint(_selected(second.events))
        and (first.prefix.startswith(second.prefix) or second.prefix.startswith(first.prefix))
        and (first.suffix.endswith(second.suffix) or second.suffix.endswith(first.suffix))
    )


def _selected(events: Sequence[str]) -> frozenset[str]:
    return frozenset(name for name in ALL_EVENT_NAMES if any(matches(e, name) for e in events))


def _generated_id() -> str:
    return base64.b64encode(str(uuid.uuid4()).encode()).decode()


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def _items(value: Any, length: int | None = None) -> list[Any]:
    if not isinstance(value, list | tuple) or length not in (None, len(value)):
        raise TypeError(f"expected a list of {length or 'any number of'} items, got {value!r}")
    return list(value)


def _pairs(rules: Any) -> tuple[tuple[str, str], ...]:
    """Stored (name, value) rules: a list of two-string lists."""
    return tuple((_text(n), _text(v)) for n, v in (_items(r, 2) for r in _items(rules)))
