"""The notification model: checks without any XML (as the pull-subscription API makes
configurations), `wants`, topic ARNs, unknown topics, and the JSON a configuration is
stored as. The S3 document's parsing and its errors:
tests/gateway/test_notification_configuration.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ripple.notifications.configuration import (
    MAX_CONFIGURATIONS,
    Notification,
    check_configuration,
    notification,
    notification_from_json,
    notification_to_json,
    parse_topic_arn,
    validate_topics,
)
from ripple.notifications.errors import NotificationError
from tests.notifications.helpers import FULL, PHOTOS

CREATED = ("s3:ObjectCreated:*",)
REMOVED = ("s3:ObjectRemoved:*",)


def refused(call: Any, *args: Any) -> NotificationError:
    with pytest.raises(NotificationError) as info:
        call(*args)
    assert info.value.code == "InvalidArgument"
    return info.value


# --- checks, without XML ---------------------------------------------------------------


def test_a_notification_is_checked_as_sent() -> None:
    made = notification(" n1 ", f" {PHOTOS} ", [" s3:ObjectCreated:* ", "s3:ObjectCreated:*"])
    assert made == Notification("n1", PHOTOS, CREATED)
    e = refused(notification, "n1", PHOTOS, ["s3:ObjectRestore:Post"])
    assert e.extra == {"ArgumentName": "Event", "ArgumentValue": "s3:ObjectRestore:Post"}
    e = refused(notification, "n1", "arn:aws:sqs:us-east-1:1:q", CREATED)
    assert e.extra["ArgumentName"] == "Topic"
    e = refused(notification, "n1", PHOTOS, CREATED, [("prefix", "a"), ("Prefix", "b")])
    assert e.extra == {"ArgumentName": "FilterRule", "ArgumentValue": "prefix"}


def test_a_whole_configuration_is_checked() -> None:
    """What the pull-subscription API adds to a bucket's configuration passes the checks a
    PutBucketNotificationConfiguration document does."""
    check_configuration([Notification("a", PHOTOS, CREATED), Notification("b", PHOTOS, REMOVED)])
    e = refused(check_configuration, [Notification("a", PHOTOS, CREATED)] * 2)
    assert e.extra["ArgumentName"] == "Id"
    e = refused(
        check_configuration,
        [Notification("a", PHOTOS, CREATED, "img/"), Notification("b", PHOTOS, CREATED)],
    )
    assert e.message.startswith("Configuration is ambiguously defined")
    e = refused(check_configuration, [Notification("a", PHOTOS, ("s3:Nothing:*",))])
    assert e.extra["ArgumentName"] == "Event"
    many = [Notification(f"n{i}", PHOTOS, CREATED, f"{i}/") for i in range(MAX_CONFIGURATIONS + 1)]
    assert refused(check_configuration, many).extra["ArgumentName"] == "TopicConfiguration"


# --- wants -------------------------------------------------------------------------------


def test_wants_events_prefix_suffix() -> None:
    n = Notification("n", PHOTOS, ("s3:ObjectCreated:*", "s3:ObjectRemoved:Delete"), "img/", ".jpg")
    assert n.wants("ObjectCreated:Put", "img/a.jpg")
    assert n.wants("s3:ObjectCreated:CompleteMultipartUpload", "img/a.jpg")
    assert n.wants("ObjectRemoved:Delete", "img/.jpg")
    assert not n.wants("ObjectRemoved:DeleteMarkerCreated", "img/a.jpg")
    assert not n.wants("ObjectCreated:Put", "doc/a.jpg")
    assert not n.wants("ObjectCreated:Put", "img/a.png")
    assert not n.wants("ObjectCreated:Put", "IMG/a.jpg")  # keys are case-sensitive


def test_wants_regex_must_match_the_whole_key() -> None:
    n = Notification("n", PHOTOS, CREATED, prefix="img/", regex=r"img/\d+\.jpg")
    assert n.wants("ObjectCreated:Put", "img/2024.jpg")
    assert not n.wants("ObjectCreated:Put", "img/2024.jpg.bak")  # re.search would match
    assert not n.wants("ObjectCreated:Put", "img/x2024.jpg")
    assert not n.wants("ObjectCreated:Put", "other/img/1.jpg")


def test_wants_metadata() -> None:
    n = Notification("n", PHOTOS, CREATED, metadata=(("x-amz-meta-Color", "red"), ("size", "L")))
    assert n.wants("ObjectCreated:Put", "k", {"color": "red", "x-amz-meta-SIZE": "L"})
    assert n.wants("ObjectCreated:Put", "k", {"X-Amz-Meta-Color": "red", "size": "L", "x": "y"})
    assert not n.wants("ObjectCreated:Put", "k", {"color": "Red", "size": "L"})  # values exact
    assert not n.wants("ObjectCreated:Put", "k", {"color": "red"})
    assert not n.wants("ObjectCreated:Put", "k", {})
    assert not n.wants("ObjectCreated:Put", "k", None)
    assert not n.wants("ObjectRemoved:Delete", "k", {"color": "red", "size": "L"})


def test_wants_without_metadata_rules_ignores_metadata() -> None:
    n = Notification("n", PHOTOS, CREATED)
    assert n.wants("ObjectCreated:Post", "any", None)
    assert n.wants("ObjectCreated:Post", "any", {"color": "red"})


# --- topic ARNs and destination validation -----------------------------------------------


def test_parse_topic_arn() -> None:
    assert parse_topic_arn(PHOTOS) == ("us-east-1", "123456789012", "photos")
    assert parse_topic_arn("arn:aws-cn:sns::p1:projects/team/topics/t") == (
        "",
        "p1",
        "projects/team/topics/t",
    )
    for arn in ["", "arn:aws:sns:us-east-1:1", "arn:aws:s3:::bucket", "arn:aws:sns:r:1:a:b"]:
        with pytest.raises(ValueError, match="not a topic ARN"):
            parse_topic_arn(arn)


def test_validate_topics() -> None:
    asked: list[str] = []
    gone = "arn:aws:sns:us-east-1:123456789012:gone"
    also_gone = "arn:aws:sns:eu-west-1:123456789012:also-gone"
    notifications = [
        Notification("a", gone, CREATED),
        Notification("b", PHOTOS, CREATED),
        Notification("c", also_gone, CREATED),
        Notification("d", gone, REMOVED),
    ]

    def exists(arn: str) -> bool:
        asked.append(arn)
        return arn == PHOTOS

    with pytest.raises(NotificationError) as info:
        validate_topics(notifications, exists)
    e = info.value
    assert (e.code, e.message) == (
        "InvalidArgument",
        "Unable to validate the following destination configurations",
    )
    value = "The destination topic does not exist or is not owned by you"
    assert e.extra == {
        "ArgumentName1": gone,
        "ArgumentValue1": value,
        "ArgumentName2": also_gone,
        "ArgumentValue2": value,
    }
    assert asked == [gone, PHOTOS, also_gone]  # once per topic


def test_validate_topics_all_exist() -> None:
    validate_topics(FULL, lambda arn: True)
    validate_topics([], lambda arn: False)


# --- JSON ----------------------------------------------------------------------------------


def test_json_round_trip() -> None:
    for n in FULL:
        stored = json.dumps(notification_to_json(n))
        assert notification_from_json(json.loads(stored)) == n
    assert notification_to_json(FULL[1]) == {
        "id": "plain",
        "topic_arn": PHOTOS,
        "events": ["s3:ObjectRemoved:*"],
        "prefix": "trash/",
        "suffix": "",
        "regex": None,
        "metadata": [],
        "tags": [],
    }


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"id": "a", "topic_arn": PHOTOS},
        {"id": 1, "topic_arn": PHOTOS, "events": []},
        {"id": "a", "topic_arn": PHOTOS, "events": "s3:ObjectCreated:*"},
        {"id": "a", "topic_arn": PHOTOS, "events": [], "metadata": [["k"]]},
        {"id": "a", "topic_arn": PHOTOS, "events": [], "regex": 3},
    ],
)
def test_json_that_is_not_a_notification(data: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="not a stored notification"):
        notification_from_json(data)
