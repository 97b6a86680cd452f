"""Bucket notification configurations: S3's `NotificationConfiguration` document.

PutBucketNotificationConfiguration sends it, GetBucketNotificationConfiguration answers with
it (namespace `http://s3.amazonaws.com/doc/2006-03-01/`, optional on input). A bucket's
configuration is a list of `Notification`s, each sending some events about some keys to a topic:

    notifications = parse_notification_configuration(body)  # S3Error if invalid
    validate_topics(notifications, topic_exists)  # S3Error naming every unknown topic
    body = notification_configuration_xml(notifications)  # the GET document
    row = json.dumps(notification_to_json(notification))  # stored; notification_from_json

Decisions, with S3's behaviour where ripple differs:

- Only `TopicConfiguration`. `QueueConfiguration`, `LambdaFunctionConfiguration` and
  `CloudFunctionConfiguration` are `InvalidArgument` naming the element (they name SQS and
  Lambda ARNs, which cannot exist in ripple); `EventBridgeConfiguration` is `NotImplemented`.
- Event types are `s3:` and an event name ripple emits (`ripple.events.names`), or a
  family wildcard, `s3:ObjectCreated:*`, `s3:ObjectRemoved:*` or `s3:ObjectTagging:*`.
  S3's other types (ACL, restore, lifecycle, ...) and `s3:*` are "not supported for
  notifications".
- Key filter `Filter/S3Key/FilterRule`: Name `prefix` or `suffix` (any case), as in S3, plus
  the extension `regex`: a Python regular expression the whole key must match
  (`re.fullmatch`). Extension `Filter/S3Metadata/FilterRule`: user metadata Name and Value,
  all of which the object's metadata must have (names ignore case and an `x-amz-meta-`
  prefix; values are compared exactly). Filters look at the key as stored, not URL-encoded.
- GET writes the rule names `Prefix` and `Suffix` capitalised, as S3 answers
  (aws/aws-sdk#389), and `Regex`; metadata rule names as they were sent.
- Overlap: S3 refuses two configurations that share an event type (wildcards expanded) and
  whose prefixes overlap and whose suffixes overlap, whatever their destinations. ripple
  sends many notifications per bucket, each to its own topic, so it refuses overlap only
  between two configurations naming the same topic ARN, where one event would be
  delivered twice. Regex and metadata filters are not compared (that is undecidable), so
  same-topic configurations must differ in event types, prefix or suffix.
- A configuration without `Id` gets one that looks like S3's: a random UUID in base64.
- At most 100 configurations; Ids of at most 255 characters, filter values of at most 1024.
"""

from __future__ import annotations

import base64
import re
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from ripple.events.names import ALL_EVENT_NAMES, matches
from ripple.gateway.errors import S3Error
from ripple.notifications.registry import Destination, metadata_name

__all__ = [
    "EVENT_TYPES",
    "MAX_CONFIGURATIONS",
    "Notification",
    "notification_configuration_xml",
    "notification_from_json",
    "notification_to_json",
    "parse_notification_configuration",
    "parse_topic_arn",
    "validate_topics",
]

S3_NAMESPACE: Final = "http://s3.amazonaws.com/doc/2006-03-01/"
MALFORMED_XML: Final = (
    "The XML you provided was not well-formed or did not validate against our published schema"
)
UNVALIDATED: Final = "Unable to validate the following destination configurations"
TOPIC_NOT_FOUND: Final = "The destination topic does not exist or is not owned by you"
AMBIGUOUS: Final = (
    "Configuration is ambiguously defined. Cannot have overlapping suffixes in two rules "
    "if the prefixes are overlapping for the same event type."
)
MAX_CONFIGURATIONS: Final = 100
MAX_ID_LENGTH: Final = 255
MAX_FILTER_VALUE_LENGTH: Final = 1024
MAX_BODY_BYTES: Final = 1024 * 1024

# The event types a configuration may name: each event ripple emits, and its family's `*`.
EVENT_TYPES: Final = tuple(
    sorted({f"s3:{name.split(':')[0]}:*" for name in ALL_EVENT_NAMES})
    + [f"s3:{name}" for name in ALL_EVENT_NAMES]
)

_TOPIC_ARN = re.compile(
    r"arn:(?P<partition>[a-z][a-z0-9-]*):sns:(?P<region>[a-z0-9-]*)"
    r":(?P<account>[^:\s]+):(?P<name>[^:\s]+)"
)
_KEY_RULE_NAMES = ("Prefix", "Suffix", "Regex")  # as GET writes them
_UNSUPPORTED = frozenset(
    {"QueueConfiguration", "LambdaFunctionConfiguration", "CloudFunctionConfiguration"}
)


@dataclass(frozen=True)
class Notification:
    """One TopicConfiguration: which events about which keys go to which topic.

    `events` are event types as configured (`s3:ObjectCreated:*`); `regex`, when set, must
    match the whole key; `metadata` is (name, value) rules on the object's user metadata.
    """

    id: str
    topic_arn: str
    events: tuple[str, ...]
    prefix: str = ""
    suffix: str = ""
    regex: str | None = None
    metadata: tuple[tuple[str, str], ...] = ()

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
        )

    def wants(self, event_name: str, key: str, metadata: Mapping[str, str] | None = None) -> bool:
        """Does this notification send an event of this name about this key?

        `metadata` is the object's user metadata (names with or without `x-amz-meta-`); when
        it is None and the notification has metadata rules, the answer is no.
        """
        return self.destination().wants(event_name, key, metadata)


def parse_topic_arn(arn: str) -> tuple[str, str, str]:
    """The (region, account, name) of `arn:aws:sns:REGION:ACCOUNT:NAME`; ValueError if not one.

    Any partition is accepted (ripple's is configurable); the region may be empty.
    """
    match = _TOPIC_ARN.fullmatch(arn)
    if match is None:
        raise ValueError(f"{arn!r} is not a topic ARN of the form arn:aws:sns:REGION:ACCOUNT:NAME")
    return match["region"], match["account"], match["name"]


def parse_notification_configuration(body: bytes) -> list[Notification]:
    """The notifications of a PutBucketNotificationConfiguration body; S3Error if invalid.

    An empty `<NotificationConfiguration/>` gives an empty list: no notifications.
    """
    root = _parse(body)
    notifications: list[Notification] = []
    allowed = {"TopicConfiguration", "EventBridgeConfiguration", *_UNSUPPORTED}
    for child in _children(root, allowed, repeated=allowed):
        if child.tag == "EventBridgeConfiguration":
            raise S3Error("NotImplemented", "EventBridgeConfiguration is not implemented by ripple")
        if child.tag in _UNSUPPORTED:
            raise _invalid(
                f"ripple supports only TopicConfiguration; {child.tag} is not supported",
                "NotificationConfiguration",
                child.tag,
            )
        notifications.append(_topic_configuration(child))
    if (count := len(notifications)) > MAX_CONFIGURATIONS:
        message = f"too many TopicConfigurations: {count}; the limit is {MAX_CONFIGURATIONS}"
        raise _invalid(message, "TopicConfiguration", str(count))
    ids = [notification.id for notification in notifications]
    for id_ in ids:
        if ids.count(id_) > 1:
            raise _invalid(
                "Same ID used for multiple configurations. IDs must be unique.", "Id", id_
            )
    for i, first in enumerate(notifications):
        for second in notifications[i + 1 :]:
            if _overlap(first, second):
                raise _invalid(AMBIGUOUS, "Id", f"{first.id}, {second.id}")
    return notifications


def validate_topics(
    notifications: Iterable[Notification], topic_exists: Callable[[str], bool]
) -> None:
    """Raise one S3Error naming every topic ARN for which `topic_exists` is False, as S3 does:
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
        raise S3Error("InvalidArgument", UNVALIDATED, extra=extra)


def notification_configuration_xml(notifications: Iterable[Notification]) -> bytes:
    """The GetBucketNotificationConfiguration document of these notifications."""
    root = ET.Element("NotificationConfiguration", xmlns=S3_NAMESPACE)
    for notification in notifications:
        element = ET.SubElement(root, "TopicConfiguration")
        _add(element, "Id", notification.id)
        _add(element, "Topic", notification.topic_arn)
        for event in notification.events:
            _add(element, "Event", event)
        values = (notification.prefix, notification.suffix, notification.regex)
        key_rules = [(name, v) for name, v in zip(_KEY_RULE_NAMES, values, strict=True) if v]
        if key_rules or notification.metadata:
            filter_ = ET.SubElement(element, "Filter")
            for tag, rules in (("S3Key", key_rules), ("S3Metadata", notification.metadata)):
                if rules:
                    rules_element = ET.SubElement(filter_, tag)
                    for name, value in rules:
                        rule = ET.SubElement(rules_element, "FilterRule")
                        _add(rule, "Name", name)
                        _add(rule, "Value", value)
    body: bytes = ET.tostring(root, encoding="utf-8")
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + body


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
            metadata=tuple(
                (_text(name), _text(value))
                for name, value in (_items(rule, 2) for rule in _items(data.get("metadata", [])))
            ),
        )
    except (KeyError, TypeError) as e:
        raise ValueError(f"not a stored notification ({e!r}): {data!r}") from e


def _parse(body: bytes) -> ET.Element:
    if len(body) > MAX_BODY_BYTES:
        raise S3Error("MalformedXML", MALFORMED_XML)
    try:
        root = SafeET.fromstring(body)
    except (ET.ParseError, DefusedXmlException, ValueError) as e:
        raise S3Error("MalformedXML", MALFORMED_XML) from e
    for node in root.iter():
        if isinstance(node.tag, str) and node.tag.startswith("{"):
            node.tag = node.tag.split("}", 1)[1]
    if root.tag != "NotificationConfiguration":
        raise S3Error("MalformedXML", MALFORMED_XML)
    return root


def _children(
    element: ET.Element, allowed: Collection[str], repeated: Collection[str] = ()
) -> list[ET.Element]:
    """The element's children; MalformedXML if one is unknown, or repeated but not in
    `repeated`, or if there is text besides whitespace between them."""
    children = list(element)
    tags = [child.tag for child in children]
    for tag in tags:
        if tag not in allowed or (tag not in repeated and tags.count(tag) > 1):
            raise S3Error("MalformedXML", MALFORMED_XML)
    texts = [element.text, *(child.tail for child in children)] if children else []
    if any((text or "").strip() for text in texts):
        raise S3Error("MalformedXML", MALFORMED_XML)
    return children


def _topic_configuration(element: ET.Element) -> Notification:
    _children(element, {"Id", "Topic", "Event", "Filter"}, repeated={"Event"})
    id_ = (element.findtext("Id") or "").strip() or _generated_id()
    if len(id_) > MAX_ID_LENGTH:
        raise _invalid(f"The Id is longer than {MAX_ID_LENGTH} characters", "Id", id_)
    topic = (element.findtext("Topic") or "").strip()
    if not topic:
        raise _invalid(
            "A TopicConfiguration needs a Topic: arn:aws:sns:REGION:ACCOUNT:NAME", "Topic", ""
        )
    try:
        parse_topic_arn(topic)
    except ValueError:
        raise _invalid("The ARN is not well formed", "Topic", topic) from None
    events: list[str] = []
    for event_element in element.findall("Event"):
        event = (event_element.text or "").strip()
        if event not in EVENT_TYPES:
            raise _invalid("The event is not supported for notifications", "Event", event)
        if event not in events:
            events.append(event)
    if not events:
        raise _invalid("A TopicConfiguration needs at least one Event", "Event", "")
    filter_ = element.find("Filter")
    key_rules: dict[str, str] = {}
    metadata: list[tuple[str, str]] = []
    if filter_ is not None:
        _children(filter_, {"S3Key", "S3Metadata"})
        for rule_name, value in _filter_rules(filter_.find("S3Key")):
            name = rule_name.lower()
            if name not in ("prefix", "suffix", "regex"):
                raise _invalid(
                    "filter rule name must be either prefix or suffix "
                    "(or regex, a ripple extension)",
                    "FilterRule",
                    rule_name,
                )
            if name in key_rules:
                raise _invalid(
                    f"Cannot specify more than one {name} rule in a filter.", "FilterRule", name
                )
            key_rules[name] = value
        for name, value in _filter_rules(filter_.find("S3Metadata")):
            if not metadata_name(name):
                raise _invalid("A metadata filter rule needs a Name", "FilterRule", name)
            if any(metadata_name(name) == metadata_name(seen) for seen, _ in metadata):
                raise _invalid(
                    f"Cannot specify more than one metadata rule for {name} in a filter.",
                    "FilterRule",
                    name,
                )
            metadata.append((name, value))
    regex = key_rules.get("regex")
    if regex is not None:
        try:
            re.compile(regex)
        except re.error as e:
            raise _invalid(
                f"The regex filter rule is not a valid regular expression: {e}", "FilterRule", regex
            ) from None
    prefix, suffix = key_rules.get("prefix", ""), key_rules.get("suffix", "")
    return Notification(id_, topic, tuple(events), prefix, suffix, regex, tuple(metadata))


def _filter_rules(element: ET.Element | None) -> list[tuple[str, str]]:
    """The (Name, Value) of each FilterRule in `element`; values are not stripped."""
    if element is None:
        return []
    rules = []
    for rule in _children(element, {"FilterRule"}, repeated={"FilterRule"}):
        _children(rule, {"Name", "Value"})
        name = (rule.findtext("Name") or "").strip()
        value = rule.findtext("Value") or ""
        if len(value) > MAX_FILTER_VALUE_LENGTH:
            raise _invalid(
                f"The value of the {name} filter rule is longer than "
                f"{MAX_FILTER_VALUE_LENGTH} characters",
                "FilterRule",
                name,
            )
        rules.append((name, value))
    return rules


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


def _invalid(message: str, name: str, value: str) -> S3Error:
    return S3Error("InvalidArgument", message, extra={"ArgumentName": name, "ArgumentValue": value})


def _add(parent: ET.Element, tag: str, text: str) -> None:
    ET.SubElement(parent, tag).text = text


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def _items(value: Any, length: int | None = None) -> list[Any]:
    if not isinstance(value, list | tuple) or length not in (None, len(value)):
        raise TypeError(f"expected a list of {length or 'any number of'} items, got {value!r}")
    return list(value)
