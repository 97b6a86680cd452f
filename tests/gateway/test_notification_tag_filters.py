"""`Filter/S3Tags` rules of bucket notification configurations: parsed, validated as S3 would
(InvalidArgument naming the rule), written back in the GET document as sent, stored as JSON,
and matched against an object's tags exactly."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from ripple.gateway.errors import S3Error
from ripple.gateway.notification_xml import (
    notification_configuration_xml,
    parse_notification_configuration,
)
from ripple.notifications.configuration import (
    Notification,
    notification_from_json,
    notification_to_json,
)

NS = "http://s3.amazonaws.com/doc/2006-03-01/"
PHOTOS = "arn:aws:sns:us-east-1:123456789012:photos"
CREATED = ("s3:ObjectCreated:*",)


def _rules(rules: tuple[tuple[str, str], ...]) -> str:
    return "".join(f"<FilterRule><Name>{n}</Name><Value>{v}</Value></FilterRule>" for n, v in rules)


def doc(
    tags: tuple[tuple[str, str], ...],
    metadata: tuple[tuple[str, str], ...] = (),
    prefix: str = "",
) -> bytes:
    filters = ""
    if prefix:
        filters += "<S3Key>" + _rules((("prefix", prefix),)) + "</S3Key>"
    if metadata:
        filters += "<S3Metadata>" + _rules(metadata) + "</S3Metadata>"
    filters += "<S3Tags>" + _rules(tags) + "</S3Tags>"
    return (
        f'<NotificationConfiguration xmlns="{NS}"><TopicConfiguration><Id>n</Id>'
        f"<Topic>{PHOTOS}</Topic><Event>s3:ObjectCreated:*</Event>"
        f"<Filter>{filters}</Filter></TopicConfiguration></NotificationConfiguration>"
    ).encode()


def invalid(body: bytes) -> S3Error:
    with pytest.raises(S3Error) as info:
        parse_notification_configuration(body)
    e = info.value
    assert (e.code, e.status) == ("InvalidArgument", 400)
    assert e.extra["ArgumentName"] == "FilterRule"
    return e


def test_parse_tag_rules_as_sent() -> None:
    body = doc(
        (("Project", "Blue Sky"), ("project", ""), ("team", " ops ")),
        metadata=(("color", "red"),),
        prefix="img/",
    )
    [n] = parse_notification_configuration(body)
    # names and values exactly as sent: case kept, spaces kept, an empty value is a value
    assert n.tags == (("Project", "Blue Sky"), ("project", ""), ("team", " ops "))
    assert n.metadata == (("color", "red"),)
    assert n.prefix == "img/"


def test_get_document_writes_tag_rules_as_sent_after_key_and_metadata_rules() -> None:
    n = Notification(
        "n", PHOTOS, CREATED, prefix="img/", metadata=(("color", "red"),), tags=(("B", "2"),)
    )
    root = ET.fromstring(notification_configuration_xml([n]))
    filter_ = root.find(f"{{{NS}}}TopicConfiguration/{{{NS}}}Filter")
    assert filter_ is not None
    assert [child.tag.split("}")[1] for child in filter_] == ["S3Key", "S3Metadata", "S3Tags"]
    rules = filter_.findall(f"{{{NS}}}S3Tags/{{{NS}}}FilterRule")
    assert [(r.findtext(f"{{{NS}}}Name"), r.findtext(f"{{{NS}}}Value")) for r in rules] == [
        ("B", "2")
    ]


def test_round_trip_through_xml_and_json() -> None:
    [n] = parse_notification_configuration(doc((("env", "prod"), ("Env", "Prod"), ("x", ""))))
    assert parse_notification_configuration(notification_configuration_xml([n])) == [n]
    stored = json.loads(json.dumps(notification_to_json(n)))
    assert stored["tags"] == [["env", "prod"], ["Env", "Prod"], ["x", ""]]
    assert notification_from_json(stored) == n


def test_stored_json_without_tags_has_none() -> None:
    """Notifications stored before S3Tags existed have no `tags` member."""
    n = notification_from_json({"id": "a", "topic_arn": PHOTOS, "events": list(CREATED)})
    assert n.tags == ()
    with pytest.raises(ValueError, match="not a stored notification"):
        notification_from_json({"id": "a", "topic_arn": PHOTOS, "events": [], "tags": [["k"]]})


def test_a_name_given_twice_is_refused_but_names_differing_in_case_are_not() -> None:
    e = invalid(doc((("env", "a"), ("env", "b"))))
    assert e.message == "Cannot specify more than one tag rule for env in a filter."
    assert e.extra["ArgumentValue"] == "env"
    [n] = parse_notification_configuration(doc((("env", "a"), ("ENV", "b"))))
    assert n.tags == (("env", "a"), ("ENV", "b"))


@pytest.mark.parametrize("name", ["", "   "])
def test_an_empty_name_is_refused(name: str) -> None:
    e = invalid(doc(((name, "v"),)))
    assert e.message == "A tag filter rule needs a Name: the tag key"


def test_more_than_ten_rules_is_refused() -> None:
    ten = tuple((f"k{i}", "v") for i in range(10))
    assert len(parse_notification_configuration(doc(ten))[0].tags) == 10
    e = invalid(doc((*ten, ("k10", "v"))))
    assert e.message == (
        "Cannot specify more than 10 tag rules in a filter (an object has at most 10 tags); got 11"
    )
    assert e.extra["ArgumentValue"] == "11"


def test_names_and_values_longer_than_a_tags_are_refused() -> None:
    assert parse_notification_configuration(doc((("k" * 128, "v" * 256),)))[0].tags
    e = invalid(doc((("k" * 129, "v"),)))
    assert e.message == "The Name of a tag filter rule is a tag key: at most 128 characters"
    e = invalid(doc((("k", "v" * 257),)))
    assert e.message == "The Value of a tag filter rule is a tag value: at most 256 characters"
    assert e.extra["ArgumentValue"] == "k"


def test_an_unknown_filter_element_is_still_malformed() -> None:
    body = doc((("k", "v"),)).replace(b"S3Tags>", b"S3Tag>")
    with pytest.raises(S3Error) as info:
        parse_notification_configuration(body)
    assert info.value.code == "MalformedXML"


def test_same_topic_configurations_differing_only_in_tag_rules_overlap() -> None:
    """Tag rules are not compared (like metadata and regex rules): two same-topic
    configurations for the same events and keys are ambiguous whatever their tags."""
    one = (
        f"<TopicConfiguration><Id>{id_}</Id><Topic>{PHOTOS}</Topic>"
        f"<Event>s3:ObjectCreated:*</Event><Filter><S3Tags>{_rules(((tag, 'v'),))}</S3Tags>"
        "</Filter></TopicConfiguration>"
        for id_, tag in (("a", "x"), ("b", "y"))
    )
    body = f"<NotificationConfiguration>{''.join(one)}</NotificationConfiguration>".encode()
    with pytest.raises(S3Error) as info:
        parse_notification_configuration(body)
    assert info.value.message.startswith("Configuration is ambiguously defined.")


def test_wants_tags_exactly() -> None:
    n = Notification("n", PHOTOS, CREATED, tags=(("env", "prod"), ("team", "")))
    assert n.wants("ObjectCreated:Put", "k", tags={"env": "prod", "team": "", "x": "y"})
    assert not n.wants("ObjectCreated:Put", "k", tags={"env": "prod"})  # every rule
    assert not n.wants("ObjectCreated:Put", "k", tags={"env": "Prod", "team": ""})  # values
    assert not n.wants("ObjectCreated:Put", "k", tags={"Env": "prod", "team": ""})  # keys
    assert not n.wants("ObjectCreated:Put", "k", tags={})
    assert not n.wants("ObjectCreated:Put", "k", tags=None)  # not known: no rule holds
    assert not n.wants("ObjectRemoved:Delete", "k", tags={"env": "prod", "team": ""})


def test_wants_tags_and_metadata_together() -> None:
    n = Notification("n", PHOTOS, CREATED, metadata=(("color", "red"),), tags=(("env", "a"),))
    assert n.wants("ObjectCreated:Put", "k", {"color": "red"}, {"env": "a"})
    assert not n.wants("ObjectCreated:Put", "k", {"color": "blue"}, {"env": "a"})
    assert not n.wants("ObjectCreated:Put", "k", {"color": "red"}, {"env": "b"})


def test_without_tag_rules_tags_do_not_matter() -> None:
    n = Notification("n", PHOTOS, CREATED)
    assert n.wants("ObjectCreated:Put", "k", tags=None)
    assert n.wants("ObjectCreated:Put", "k", tags={"env": "prod"})
    assert n.destination().tags == ()
    assert Notification("n", PHOTOS, CREATED, tags=(("a", "b"),)).destination().tags == (
        ("a", "b"),
    )
