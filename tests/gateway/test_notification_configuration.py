"""S3's NotificationConfiguration document: parsing and S3's validation errors, the GET
document, botocore's serializer and parser, overlap. The model without XML (`wants`, the
JSON round trip): tests/notifications/test_configuration.py."""

from __future__ import annotations

import base64
import uuid
import xml.etree.ElementTree as ET
from typing import Any

import botocore.parsers  # type: ignore[import-untyped]
import botocore.serialize  # type: ignore[import-untyped]
import botocore.session  # type: ignore[import-untyped]
import pytest

from ripple.gateway.errors import S3Error
from ripple.gateway.notification_xml import (
    MALFORMED_XML,
    notification_configuration_xml,
    parse_notification_configuration,
)
from ripple.notifications.configuration import EVENT_TYPES, MAX_CONFIGURATIONS, Notification
from tests.notifications.helpers import FULL, LOGS, PHOTOS

NS = "http://s3.amazonaws.com/doc/2006-03-01/"
AMBIGUOUS = (
    "Configuration is ambiguously defined. Cannot have overlapping suffixes in two rules "
    "if the prefixes are overlapping for the same event type."
)


def topic(
    id_: str | None = "n1",
    arn: str | None = PHOTOS,
    events: tuple[str, ...] = ("s3:ObjectCreated:*",),
    rules: tuple[tuple[str, str], ...] = (),
    metadata: tuple[tuple[str, str], ...] = (),
) -> str:
    """One <TopicConfiguration>; None leaves an element out."""
    parts = []
    if id_ is not None:
        parts.append(f"<Id>{id_}</Id>")
    if arn is not None:
        parts.append(f"<Topic>{arn}</Topic>")
    parts += [f"<Event>{event}</Event>" for event in events]
    filters = ""
    if rules:
        filters += "<S3Key>" + "".join(_rule(n, v) for n, v in rules) + "</S3Key>"
    if metadata:
        filters += "<S3Metadata>" + "".join(_rule(n, v) for n, v in metadata) + "</S3Metadata>"
    if filters:
        parts.append(f"<Filter>{filters}</Filter>")
    return "<TopicConfiguration>" + "".join(parts) + "</TopicConfiguration>"


def _rule(name: str, value: str) -> str:
    return f"<FilterRule><Name>{name}</Name><Value>{value}</Value></FilterRule>"


def doc(*configurations: str, namespace: bool = True) -> bytes:
    xmlns = f' xmlns="{NS}"' if namespace else ""
    body = "".join(configurations)
    return f"<NotificationConfiguration{xmlns}>{body}</NotificationConfiguration>".encode()


def error(body: bytes) -> S3Error:
    with pytest.raises(S3Error) as info:
        parse_notification_configuration(body)
    return info.value


def invalid(body: bytes, message: str) -> S3Error:
    e = error(body)
    assert (e.code, e.status) == ("InvalidArgument", 400)
    assert e.message == message
    return e


# --- parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize("namespace", [True, False])
def test_parse_with_or_without_namespace(namespace: bool) -> None:
    body = doc(topic("n1", PHOTOS, ("s3:ObjectCreated:Put",)), namespace=namespace)
    assert parse_notification_configuration(body) == [
        Notification("n1", PHOTOS, ("s3:ObjectCreated:Put",))
    ]


def test_parse_every_field() -> None:
    body = doc(
        topic(
            "thumbs",
            PHOTOS,
            ("s3:ObjectCreated:*", "s3:ObjectRemoved:Delete", "s3:ObjectCreated:*"),
            rules=(("Prefix", "images/"), ("SUFFIX", ".jpg"), ("regex", r"images/\d+\.jpg")),
            metadata=(("x-amz-meta-Color", "red"), ("size", "")),
        ),
        topic("logs", LOGS, ("s3:ObjectRemoved:*",), rules=(("prefix", "logs/"),)),
    )
    assert parse_notification_configuration(body) == [
        Notification(
            "thumbs",
            PHOTOS,
            ("s3:ObjectCreated:*", "s3:ObjectRemoved:Delete"),  # the repeat is dropped
            "images/",
            ".jpg",
            r"images/\d+\.jpg",
            (("x-amz-meta-Color", "red"), ("size", "")),
        ),
        Notification("logs", LOGS, ("s3:ObjectRemoved:*",), prefix="logs/"),
    ]


def test_filter_values_keep_their_spaces() -> None:
    body = doc(topic(rules=(("prefix", " a "),)))
    assert parse_notification_configuration(body)[0].prefix == " a "


def test_empty_configuration_is_no_notifications() -> None:
    assert parse_notification_configuration(doc()) == []
    assert (
        parse_notification_configuration(f'<NotificationConfiguration xmlns="{NS}"/>'.encode())
        == []
    )


@pytest.mark.parametrize("id_", [None, "", "   "])
def test_missing_id_is_generated_like_s3s(id_: str | None) -> None:
    body = doc(topic(id_))
    first = parse_notification_configuration(body)[0].id
    second = parse_notification_configuration(body)[0].id
    assert first != second
    assert uuid.UUID(base64.b64decode(first, validate=True).decode()).version == 4


def test_every_event_type_ripple_knows_is_accepted() -> None:
    body = doc(topic(events=EVENT_TYPES))
    assert parse_notification_configuration(body)[0].events == EVENT_TYPES
    assert set(EVENT_TYPES) == {
        "s3:ObjectCreated:*",
        "s3:ObjectCreated:Put",
        "s3:ObjectCreated:Post",
        "s3:ObjectCreated:Copy",
        "s3:ObjectCreated:CompleteMultipartUpload",
        "s3:ObjectRemoved:*",
        "s3:ObjectRemoved:Delete",
        "s3:ObjectRemoved:DeleteMarkerCreated",
        "s3:ObjectTagging:*",
        "s3:ObjectTagging:Put",
        "s3:ObjectTagging:Delete",
        "s3:ObjectAcl:*",
        "s3:ObjectAcl:Put",
        "s3:ObjectMetadata:*",
        "s3:ObjectMetadata:Update",
        "s3:ObjectRenamed:*",
        "s3:ObjectRenamed:Rename",
        "s3:LifecycleExpiration:*",
        "s3:LifecycleExpiration:Delete",
        "s3:LifecycleExpiration:DeleteMarkerCreated",
    }
    # bucket events are a topic's (`project-events`), not a bucket notification's
    assert not any(t.startswith("s3:Bucket") for t in EVENT_TYPES)


def test_tagging_event_types_select_only_tagging_events() -> None:
    [notification] = parse_notification_configuration(
        doc(topic(events=("s3:ObjectTagging:*", "s3:ObjectCreated:*")))
    )
    assert notification.events == ("s3:ObjectTagging:*", "s3:ObjectCreated:*")
    created = notification.destination()
    assert created.wants("ObjectTagging:Put", "k")
    assert created.wants("ObjectTagging:Delete", "k")
    only_created = Notification("c", PHOTOS, ("s3:ObjectCreated:*",)).destination()
    assert not only_created.wants("ObjectTagging:Put", "k")
    assert only_created.wants("ObjectCreated:Put", "k")
    only_delete = Notification("d", PHOTOS, ("s3:ObjectTagging:Delete",)).destination()
    assert only_delete.wants("ObjectTagging:Delete", "k")
    assert not only_delete.wants("ObjectTagging:Put", "k")


# --- the GET document and round trips -------------------------------------------------


def test_get_document() -> None:
    body = notification_configuration_xml(FULL[:2])
    assert body.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n')
    root = ET.fromstring(body)
    assert root.tag == f"{{{NS}}}NotificationConfiguration"
    first, second = root.findall(f"{{{NS}}}TopicConfiguration")
    assert [(c.tag.split("}")[1], c.text) for c in first][:4] == [
        ("Id", "thumbs"),
        ("Topic", PHOTOS),
        ("Event", "s3:ObjectCreated:Put"),
        ("Event", "s3:ObjectCreated:Copy"),
    ]
    key_rules = first.findall(f"{{{NS}}}Filter/{{{NS}}}S3Key/{{{NS}}}FilterRule")
    names = [(r.findtext(f"{{{NS}}}Name"), r.findtext(f"{{{NS}}}Value")) for r in key_rules]
    # S3 answers Prefix and Suffix capitalised (aws/aws-sdk#389)
    assert names == [("Prefix", "images/"), ("Suffix", ".jpg"), ("Regex", r"images/[^/]+\.jpg")]
    meta = first.findall(f"{{{NS}}}Filter/{{{NS}}}S3Metadata/{{{NS}}}FilterRule")
    assert [(r.findtext(f"{{{NS}}}Name"), r.findtext(f"{{{NS}}}Value") or "") for r in meta] == [
        ("x-amz-meta-color", "red"),
        ("Owner", ""),
    ]
    assert second.find(f"{{{NS}}}Filter/{{{NS}}}S3Metadata") is None
    assert second.find(f"{{{NS}}}Filter/{{{NS}}}S3Key") is not None


def test_get_document_without_filters_has_no_filter_element() -> None:
    body = notification_configuration_xml([Notification("a", PHOTOS, ("s3:ObjectCreated:*",))])
    assert b"Filter" not in body


def test_empty_get_document() -> None:
    body = notification_configuration_xml([])
    root = ET.fromstring(body)
    assert root.tag == f"{{{NS}}}NotificationConfiguration"
    assert list(root) == []


def test_round_trip() -> None:
    assert parse_notification_configuration(notification_configuration_xml(FULL)) == FULL


def test_round_trip_keeps_generated_ids() -> None:
    parsed = parse_notification_configuration(doc(topic(None), topic(None, LOGS)))
    assert parse_notification_configuration(notification_configuration_xml(parsed)) == parsed


# --- botocore ----------------------------------------------------------------------------


def _s3_model() -> Any:
    return botocore.session.get_session().get_service_model("s3")


def test_what_botocore_sends_parses() -> None:
    operation = _s3_model().operation_model("PutBucketNotificationConfiguration")
    params = {
        "Bucket": "photos",
        "NotificationConfiguration": {
            "TopicConfigurations": [
                {
                    "Id": "thumbs",
                    "TopicArn": PHOTOS,
                    "Events": ["s3:ObjectCreated:Put", "s3:ObjectCreated:Post"],
                    "Filter": {
                        "Key": {
                            "FilterRules": [
                                {"Name": "prefix", "Value": "images/"},
                                {"Name": "suffix", "Value": ".png"},
                            ]
                        }
                    },
                },
                {"TopicArn": LOGS, "Events": ["s3:ObjectRemoved:*"]},
            ]
        },
    }
    request = botocore.serialize.create_serializer("rest-xml").serialize_to_request(
        params, operation
    )
    first, second = parse_notification_configuration(request["body"])
    assert first == Notification(
        "thumbs",
        PHOTOS,
        ("s3:ObjectCreated:Put", "s3:ObjectCreated:Post"),
        "images/",
        ".png",
    )
    assert (second.topic_arn, second.events, second.prefix) == (LOGS, ("s3:ObjectRemoved:*",), "")
    assert second.id  # generated


def test_botocore_parses_the_get_document() -> None:
    operation = _s3_model().operation_model("GetBucketNotificationConfiguration")
    response = {"body": notification_configuration_xml(FULL), "headers": {}, "status_code": 200}
    parsed = botocore.parsers.create_parser("rest-xml").parse(response, operation.output_shape)
    assert parsed["TopicConfigurations"] == [
        {
            "Id": "thumbs",
            "TopicArn": PHOTOS,
            "Events": ["s3:ObjectCreated:Put", "s3:ObjectCreated:Copy"],
            "Filter": {
                "Key": {
                    "FilterRules": [
                        {"Name": "Prefix", "Value": "images/"},
                        {"Name": "Suffix", "Value": ".jpg"},
                        {"Name": "Regex", "Value": r"images/[^/]+\.jpg"},
                    ]
                }
            },
        },
        {
            "Id": "plain",
            "TopicArn": PHOTOS,
            "Events": ["s3:ObjectRemoved:*"],
            "Filter": {"Key": {"FilterRules": [{"Name": "Prefix", "Value": "trash/"}]}},
        },
        {
            "Id": "suffix-only",
            "TopicArn": LOGS,
            "Events": ["s3:ObjectCreated:*"],
            "Filter": {"Key": {"FilterRules": [{"Name": "Suffix", "Value": ".log & <more>"}]}},
        },
    ]
    assert "QueueConfigurations" not in parsed


def test_botocore_parses_the_empty_get_document() -> None:
    operation = _s3_model().operation_model("GetBucketNotificationConfiguration")
    response = {"body": notification_configuration_xml([]), "headers": {}, "status_code": 200}
    parsed = botocore.parsers.create_parser("rest-xml").parse(response, operation.output_shape)
    assert "TopicConfigurations" not in parsed


# --- malformed documents -----------------------------------------------------------------

BILLION_LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
    b"<NotificationConfiguration>&b;</NotificationConfiguration>"
)


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"   ",
        b"not xml",
        b"<NotificationConfiguration>",
        f'<Notification xmlns="{NS}"/>'.encode(),
        b"<DeleteConfiguration/>",
        BILLION_LAUGHS,
        doc("<Unknown/>"),
        doc("stray text", topic()),
        doc(topic().replace("<Topic>", "text<Topic>")),
        doc(topic().replace("<Id>n1</Id>", "<Id>a</Id><Id>b</Id>")),
        doc(topic().replace("<Id>n1</Id>", "<Queue>x</Queue>")),
        doc(topic(rules=(("prefix", "a"),)).replace("<S3Key>", "<Key>").replace("S3Key>", "Key>")),
        doc(
            topic(rules=(("prefix", "a"),)).replace("<Value>", "<Valu>").replace("Value>", "Valu>")
        ),
        b"<NotificationConfiguration>" + b"x" * (1024 * 1024) + b"</NotificationConfiguration>",
    ],
)
def test_malformed_xml(body: bytes) -> None:
    e = error(body)
    assert (e.code, e.message, e.status) == ("MalformedXML", MALFORMED_XML, 400)


# --- unsupported configurations ----------------------------------------------------------


@pytest.mark.parametrize(
    "element", ["QueueConfiguration", "LambdaFunctionConfiguration", "CloudFunctionConfiguration"]
)
def test_other_destinations_are_invalid(element: str) -> None:
    body = doc(topic(), f"<{element}><Event>s3:ObjectCreated:*</Event></{element}>")
    e = invalid(body, f"ripple supports only TopicConfiguration; {element} is not supported")
    assert e.extra["ArgumentValue"] == element


def test_eventbridge_is_not_implemented() -> None:
    e = error(doc("<EventBridgeConfiguration/>"))
    assert (e.code, e.status) == ("NotImplemented", 501)
    assert "EventBridgeConfiguration" in e.message


# --- validation errors -------------------------------------------------------------------


@pytest.mark.parametrize(
    "event",
    [
        "s3:ObjectRestore:Post",  # an S3 type ripple never emits
        "s3:BucketCreated:*",  # a project-wide notification's, not a bucket's
        "s3:ObjectRestore:*",
        "s3:*",
        "s3:ObjectCreated:Bogus",
        "ObjectCreated:Put",  # the s3: prefix is required, as in S3
        "s3:objectcreated:put",
        "",
    ],
)
def test_unsupported_event(event: str) -> None:
    e = invalid(doc(topic(events=(event,))), "The event is not supported for notifications")
    assert e.extra == {"ArgumentName": "Event", "ArgumentValue": event}


def test_no_event() -> None:
    invalid(doc(topic(events=())), "A TopicConfiguration needs at least one Event")


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        (
            (("prefix", "a"), ("Prefix", "b")),
            "Cannot specify more than one prefix rule in a filter.",
        ),
        (
            (("suffix", "a"), ("SUFFIX", "b")),
            "Cannot specify more than one suffix rule in a filter.",
        ),
        ((("regex", "a"), ("regex", "b")), "Cannot specify more than one regex rule in a filter."),
        (
            (("contains", "a"),),
            "filter rule name must be either prefix or suffix (or regex, a ripple extension)",
        ),
        (
            (("", "a"),),
            "filter rule name must be either prefix or suffix (or regex, a ripple extension)",
        ),
        (
            (("prefix", "x" * 1025),),
            "The value of the prefix filter rule is longer than 1024 characters",
        ),
    ],
)
def test_key_filter_errors(rules: tuple[tuple[str, str], ...], message: str) -> None:
    invalid(doc(topic(rules=rules)), message)


def test_longest_filter_value_is_accepted() -> None:
    body = doc(topic(rules=(("suffix", "x" * 1024),)))
    assert parse_notification_configuration(body)[0].suffix == "x" * 1024


@pytest.mark.parametrize(
    "regex", ["images/(", "*.jpg", "[a-", "a{4294967296}", "(" * 500 + "a" + ")" * 500]
)
def test_invalid_regex(regex: str) -> None:
    e = error(doc(topic(rules=(("regex", regex),))))
    assert e.code == "InvalidArgument"
    assert e.message.startswith("The regex filter rule is not a valid regular expression: ")
    assert e.extra == {"ArgumentName": "FilterRule", "ArgumentValue": regex}


def test_metadata_filter_errors() -> None:
    invalid(
        doc(topic(metadata=(("x-amz-meta-Color", "red"), ("COLOR", "blue")))),
        "Cannot specify more than one metadata rule for COLOR in a filter.",
    )
    invalid(doc(topic(metadata=(("x-amz-meta-", "red"),))), "A metadata filter rule needs a Name")
    invalid(doc(topic(metadata=(("", "red"),))), "A metadata filter rule needs a Name")


@pytest.mark.parametrize("arn", [None, "", "  "])
def test_missing_topic(arn: str | None) -> None:
    e = invalid(
        doc(topic(arn=arn)), "A TopicConfiguration needs a Topic: arn:aws:sns:REGION:ACCOUNT:NAME"
    )
    assert e.extra["ArgumentName"] == "Topic"


@pytest.mark.parametrize(
    "arn",
    [
        "photos",
        "arn:aws:sqs:us-east-1:123456789012:photos",
        "arn:aws:sns:us-east-1:123456789012",
        "arn:aws:sns:us-east-1::photos",
        "arn:aws:sns:us-east-1:123456789012:a:b",
        "arn:aws:sns:us-east-1:123456789012:pho tos",
    ],
)
def test_malformed_topic_arn(arn: str) -> None:
    e = invalid(doc(topic(arn=arn)), "The ARN is not well formed")
    assert e.extra == {"ArgumentName": "Topic", "ArgumentValue": arn}


def test_duplicate_ids() -> None:
    body = doc(topic("same", PHOTOS), topic("same", LOGS))
    e = invalid(body, "Same ID used for multiple configurations. IDs must be unique.")
    assert e.extra == {"ArgumentName": "Id", "ArgumentValue": "same"}


def test_id_length() -> None:
    assert parse_notification_configuration(doc(topic("i" * 255)))[0].id == "i" * 255
    invalid(doc(topic("i" * 256)), "The Id is longer than 255 characters")


def test_too_many_configurations() -> None:
    def many(count: int) -> bytes:
        return doc(*(topic(f"n{i}", rules=(("prefix", f"{i}/"),)) for i in range(count)))

    assert len(parse_notification_configuration(many(MAX_CONFIGURATIONS))) == 100
    invalid(many(MAX_CONFIGURATIONS + 1), "too many TopicConfigurations: 101; the limit is 100")


# --- overlap -----------------------------------------------------------------------------


def _pair(
    first: tuple[tuple[str, ...], str, str], second: tuple[tuple[str, ...], str, str]
) -> bytes:
    def one(id_: str, spec: tuple[tuple[str, ...], str, str]) -> str:
        events, prefix, suffix = spec
        rules = tuple((n, v) for n, v in (("prefix", prefix), ("suffix", suffix)) if v)
        return topic(id_, PHOTOS, events, rules)

    return doc(one("a", first), one("b", second))


CREATED = ("s3:ObjectCreated:*",)
PUT = ("s3:ObjectCreated:Put",)
COPY = ("s3:ObjectCreated:Copy",)
REMOVED = ("s3:ObjectRemoved:*",)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ((PUT, "", ""), (PUT, "", "")),
        ((CREATED, "", ""), (PUT, "", "")),  # the wildcard covers Put
        ((CREATED, "images/", ""), (COPY, "images/2024/", "")),
        ((PUT, "", ".jpg"), (PUT, "", "photo.jpg")),
        ((PUT, "images/", ""), (PUT, "", ".jpg")),  # prefix of one, suffix of the other
        ((PUT, "images/", ".jpg"), (PUT + REMOVED, "images/", ".jpg")),
    ],
)
def test_overlap_on_the_same_topic_is_ambiguous(
    first: tuple[tuple[str, ...], str, str], second: tuple[tuple[str, ...], str, str]
) -> None:
    e = invalid(_pair(first, second), AMBIGUOUS)
    assert e.extra == {"ArgumentName": "Id", "ArgumentValue": "a, b"}


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ((CREATED, "", ""), (REMOVED, "", "")),
        ((PUT, "", ""), (COPY, "", "")),
        (
            (("s3:ObjectRemoved:Delete",), "", ""),
            (("s3:ObjectRemoved:DeleteMarkerCreated",), "", ""),
        ),
        ((CREATED, "images/", ""), (CREATED, "logs/", "")),
        ((CREATED, "", ".jpg"), (CREATED, "", ".png")),
        ((CREATED, "a/", ".jpg"), (CREATED, "a/", ".png")),
    ],
)
def test_no_overlap(
    first: tuple[tuple[str, ...], str, str], second: tuple[tuple[str, ...], str, str]
) -> None:
    assert len(parse_notification_configuration(_pair(first, second))) == 2


def test_overlap_to_different_topics_is_allowed() -> None:
    # S3 refuses this; ripple sends each notification to its own topic (see the module)
    body = doc(topic("a", PHOTOS, CREATED), topic("b", LOGS, PUT))
    assert [n.topic_arn for n in parse_notification_configuration(body)] == [PHOTOS, LOGS]


def test_overlap_ignores_regex_and_metadata() -> None:
    body = doc(
        topic("a", PHOTOS, PUT, rules=(("regex", r".*\.jpg"),)),
        topic("b", PHOTOS, PUT, rules=(("regex", r".*\.png"),), metadata=(("k", "v"),)),
    )
    invalid(body, AMBIGUOUS)
