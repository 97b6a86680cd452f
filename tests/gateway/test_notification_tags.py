"""`Filter/S3Tags` rules through the gateway with boto3: boto3's model has no `S3Tags`, so a
`before-sign` hook adds the rules to the document boto3 makes (a user can do the same), and
an `after-call` hook keeps the GET answer's body, which boto3's parser reads without them.
What is stored, what GET answers, and S3's InvalidArgument for a wrong rule set, with
nothing changed. Also the topic arguments `include-tags` / `include-metadata` through boto3's
`sns` client."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.gateway.conftest import Running
from tests.gateway.helpers import make_topic, with_tag_rules

NS = {"s3": "http://s3.amazonaws.com/doc/2006-03-01/"}
GET = "after-call.s3.GetBucketNotificationConfiguration"


@pytest.fixture
def answers(s3: Any) -> Iterator[list[bytes]]:
    """The bodies of GetBucketNotificationConfiguration answers, as sent."""
    bodies: list[bytes] = []

    def keep(http_response: Any, **_: Any) -> None:
        bodies.append(http_response.content)

    s3.meta.events.register(GET, keep)
    yield bodies
    s3.meta.events.unregister(GET, keep)


def put(s3: Any, arn: str, notification_id: str = "prod") -> Any:
    return s3.put_bucket_notification_configuration(
        Bucket="photos",
        NotificationConfiguration={
            "TopicConfigurations": [
                {
                    "Id": notification_id,
                    "TopicArn": arn,
                    "Events": ["s3:ObjectCreated:*"],
                    "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "2026/"}]}},
                }
            ]
        },
    )


def tag_rules(body: bytes) -> list[tuple[str | None, str]]:
    root = ET.fromstring(body)
    rules = root.findall("s3:TopicConfiguration/s3:Filter/s3:S3Tags/s3:FilterRule", NS)
    return [(r.findtext("s3:Name", None, NS), r.findtext("s3:Value", "", NS)) for r in rules]


def test_s3tags_rules_round_trip_through_boto3(
    gateway: Running, s3: Any, answers: list[bytes]
) -> None:
    topic = make_topic(gateway, "t", "none")
    s3.create_bucket(Bucket="photos")
    with_tag_rules(s3, [("Env", "prod"), ("team", "Blue Sky"), ("empty", "")])
    put(s3, topic.arn)
    [destination] = gateway.services.registry.destinations(gateway.key.project_id, "photos")
    assert destination.tags == (("Env", "prod"), ("team", "Blue Sky"), ("empty", ""))
    assert destination.prefix == "2026/"

    got = s3.get_bucket_notification_configuration(Bucket="photos")
    [config] = got["TopicConfigurations"]
    assert config["Id"] == "prod"
    assert config["Filter"]["Key"]["FilterRules"] == [{"Name": "Prefix", "Value": "2026/"}]
    [body] = answers
    assert tag_rules(body) == [("Env", "prod"), ("team", "Blue Sky"), ("empty", "")]


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        (
            [("env", "a"), ("env", "b")],
            "Cannot specify more than one tag rule for env in a filter.",
        ),
        ([("", "a")], "A tag filter rule needs a Name: the tag key"),
        (
            [(f"k{i}", "v") for i in range(11)],
            "Cannot specify more than 10 tag rules in a filter (an object has at most 10 tags); "
            "got 11",
        ),
    ],
)
def test_wrong_tag_rules_are_invalid_argument_and_change_nothing(
    gateway: Running, s3: Any, rules: list[tuple[str, str]], message: str
) -> None:
    topic = make_topic(gateway, "t", "none")
    s3.create_bucket(Bucket="photos")
    put(s3, topic.arn, "before")
    with_tag_rules(s3, rules)
    with pytest.raises(ClientError) as raised:
        put(s3, topic.arn, "after")
    error = raised.value.response["Error"]
    assert (error["Code"], error["Message"]) == ("InvalidArgument", message)
    assert error["ArgumentName"] == "FilterRule"
    [config] = s3.get_bucket_notification_configuration(Bucket="photos")["TopicConfigurations"]
    assert config["Id"] == "before"


def test_include_arguments_through_the_sns_api(gateway: Running) -> None:
    sns = gateway.sns()
    arn = sns.create_topic(Name="t", Attributes={"include-tags": "true"})["TopicArn"]
    sns.set_topic_attributes(TopicArn=arn, AttributeName="include-metadata", AttributeValue="true")
    attributes = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert (attributes["include-tags"], attributes["include-metadata"]) == ("true", "true")
    with pytest.raises(ClientError) as raised:
        sns.set_topic_attributes(TopicArn=arn, AttributeName="include-tags", AttributeValue="2")
    assert "include-tags" in raised.value.response["Error"]["Message"]
