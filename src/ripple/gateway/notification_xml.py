"""S3's `NotificationConfiguration` document: read from a PutBucketNotificationConfiguration
body into the model's `Notification`s (`ripple.notifications.configuration`, which checks
them), and written for GetBucketNotificationConfiguration (namespace
`http://s3.amazonaws.com/doc/2006-03-01/`, optional on input).

- Only `TopicConfiguration`. `QueueConfiguration`, `LambdaFunctionConfiguration` and
  `CloudFunctionConfiguration` are `InvalidArgument` naming the element (they name SQS and
  Lambda ARNs, which cannot exist in ripple); `EventBridgeConfiguration` is `NotImplemented`.
- The document's shape is checked before what it says: an unknown or repeated element, or
  text between elements, is `MalformedXML`, whatever else is wrong.
- GET writes the key rule names `Prefix`, `Suffix` and `Regex`, as S3 answers
  (aws/aws-sdk#389); metadata and tag rules as they were sent.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Collection, Iterable
from typing import Final

from ripple.gateway import xml
from ripple.gateway.errors import S3Error, from_notifications
from ripple.notifications.configuration import Notification, check_together, notification
from ripple.notifications.errors import NotificationError, invalid

__all__ = ["MALFORMED_XML", "notification_configuration_xml", "parse_notification_configuration"]

MALFORMED_XML: Final = (
    "The XML you provided was not well-formed or did not validate against our published schema"
)
S3_NAMESPACE: Final = "http://s3.amazonaws.com/doc/2006-03-01/"
MAX_BODY_BYTES: Final = 1024 * 1024
_UNSUPPORTED: Final = frozenset(
    {"QueueConfiguration", "LambdaFunctionConfiguration", "CloudFunctionConfiguration"}
)
_FILTER_GROUPS: Final = ("S3Key", "S3Metadata", "S3Tags")

Rules = list[tuple[str, str]]


def parse_notification_configuration(body: bytes) -> list[Notification]:
    """The notifications of a PutBucketNotificationConfiguration body; S3Error if invalid.

    An empty `<NotificationConfiguration/>` gives an empty list: no notifications.
    """
    try:
        return _notifications(_parse(body))
    except NotificationError as e:
        raise from_notifications(e) from None


def notification_configuration_xml(notifications: Iterable[Notification]) -> bytes:
    """The GetBucketNotificationConfiguration document of these notifications."""
    root = ET.Element("NotificationConfiguration", xmlns=S3_NAMESPACE)
    for n in notifications:
        element = ET.SubElement(root, "TopicConfiguration")
        ET.SubElement(element, "Id").text = n.id
        ET.SubElement(element, "Topic").text = n.topic_arn
        for event in n.events:
            ET.SubElement(element, "Event").text = event
        rules = n.filter_rules
        groups = zip(_FILTER_GROUPS, (rules.key_rules(), n.metadata, n.tags), strict=True)
        _add_filter(element, [(tag, group) for tag, group in groups if group])
    body: bytes = ET.tostring(root, encoding="utf-8")
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + body


def _parse(body: bytes) -> ET.Element:
    """The document's root, parsed as every S3 request document is (`gateway.xml.parse`:
    no DTD, no unknown encoding), refused with S3's own message for this API."""
    try:
        return xml.parse(body, root="NotificationConfiguration", limit=MAX_BODY_BYTES)
    except S3Error:
        raise S3Error("MalformedXML", MALFORMED_XML) from None


def _notifications(root: ET.Element) -> list[Notification]:
    allowed = {"TopicConfiguration", "EventBridgeConfiguration", *_UNSUPPORTED}
    said = [
        (child, _topic_configuration(child) if child.tag == "TopicConfiguration" else None)
        for child in _children(root, allowed, repeated=allowed)
    ]  # every element's shape first: MalformedXML before any other refusal
    notifications: list[Notification] = []
    for child, topic_configuration in said:
        if child.tag == "EventBridgeConfiguration":
            raise S3Error("NotImplemented", "EventBridgeConfiguration is not implemented by ripple")
        if topic_configuration is None:
            raise invalid(
                f"ripple supports only TopicConfiguration; {child.tag} is not supported",
                "NotificationConfiguration",
                child.tag,
            )
        notifications.append(notification(*topic_configuration))
    check_together(notifications)  # each was checked as `notification` made it
    return notifications


def _topic_configuration(element: ET.Element) -> tuple[str, str, list[str], Rules, Rules, Rules]:
    """What a TopicConfiguration says, as `notification` takes it; MalformedXML if its
    shape is wrong."""
    _children(element, {"Id", "Topic", "Event", "Filter"}, repeated={"Event"})
    events = [e.text or "" for e in element.findall("Event")]
    filter_ = element.find("Filter")
    groups: dict[str, Rules] = {tag: [] for tag in _FILTER_GROUPS}
    if filter_ is not None:
        _children(filter_, set(_FILTER_GROUPS))
        for tag in _FILTER_GROUPS:
            groups[tag] = _rules(filter_.find(tag))
    return (
        element.findtext("Id") or "",
        element.findtext("Topic") or "",
        events,
        groups["S3Key"],
        groups["S3Metadata"],
        groups["S3Tags"],
    )


def _rules(element: ET.Element | None) -> Rules:
    """The (Name, Value) of each FilterRule in `element`, both as sent (not stripped)."""
    if element is None:
        return []
    rules = []
    for rule in _children(element, {"FilterRule"}, repeated={"FilterRule"}):
        _children(rule, {"Name", "Value"})
        rules.append((rule.findtext("Name") or "", rule.findtext("Value") or ""))
    return rules


def _add_filter(parent: ET.Element, groups: list[tuple[str, tuple[tuple[str, str], ...]]]) -> None:
    if not groups:
        return
    filter_ = ET.SubElement(parent, "Filter")
    for tag, group in groups:
        group_element = ET.SubElement(filter_, tag)
        for name, value in group:
            rule = ET.SubElement(group_element, "FilterRule")
            ET.SubElement(rule, "Name").text = name
            ET.SubElement(rule, "Value").text = value


def _children(
    element: ET.Element, allowed: Collection[str], repeated: Collection[str] = ()
) -> list[ET.Element]:
    """The element's children; MalformedXML if one is unknown, or repeated but not in
    `repeated`, or if there is text besides whitespace between them."""
    found = list(element)
    tags = [child.tag for child in found]
    for tag in tags:
        if tag not in allowed or (tag not in repeated and tags.count(tag) > 1):
            raise S3Error("MalformedXML", MALFORMED_XML)
    texts = [element.text, *(child.tail for child in found)] if found else []
    if any((text or "").strip() for text in texts):
        raise S3Error("MalformedXML", MALFORMED_XML)
    return found
