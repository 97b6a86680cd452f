"""Routing by the tags and metadata the change records carry, through the gateway (boto3,
SQLite and PostgreSQL) without Spark: the change records the gateway's writes make go
through the transform (`events_of_rows`) and routing (`route`) as the pipeline runs them.
Each event is routed by the tags current in its own transaction: a PutObjectTagging that
changes them decides the routing of every later event of the object. A topic with
`include-tags` / `include-metadata` gets them in its events."""

from __future__ import annotations

from typing import Any

from tests.gateway.conftest import Running, gateway, s3, services  # noqa: F401
from tests.gateway.helpers import with_tag_rules
from tests.pipeline.helpers import routed, seen


def test_events_route_by_the_tags_of_their_transaction(
    gateway: Running,  # noqa: F811
    s3: Any,  # noqa: F811
    sns: Any,
) -> None:
    db = gateway.services.db
    db.eventing = gateway.services.registry.is_eventing
    prod = sns.create_topic(
        Name="prod", Attributes={"include-tags": "true", "include-metadata": "true"}
    )["TopicArn"]
    plain = sns.create_topic(Name="plain")["TopicArn"]
    s3.create_bucket(Bucket="photos")
    every = ["s3:ObjectCreated:*", "s3:ObjectRemoved:*", "s3:ObjectTagging:*"]
    with_tag_rules(s3, [("env", "prod")])
    s3.put_bucket_notification_configuration(
        Bucket="photos",
        NotificationConfiguration={
            "TopicConfigurations": [
                {
                    "Id": "prod",
                    "TopicArn": prod,
                    "Events": every,
                    "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": ""}]}},
                },
                {"Id": "plain", "TopicArn": plain, "Events": every},
            ]
        },
    )
    dev, production = (
        {"TagSet": [{"Key": "env", "Value": "dev"}]},
        {"TagSet": [{"Key": "env", "Value": "prod"}, {"Key": "owner", "Value": "ann"}]},
    )
    # a.jpg: made for dev, then tagged prod, then deleted
    s3.put_object(Bucket="photos", Key="a.jpg", Body=b"a", Tagging="env=dev",
                  Metadata={"camera": "x100v"})  # fmt: skip
    s3.put_object_tagging(Bucket="photos", Key="a.jpg", Tagging=production)
    s3.delete_object(Bucket="photos", Key="a.jpg")
    # b.jpg: made for prod, then tagged dev, then deleted
    s3.put_object(Bucket="photos", Key="b.jpg", Body=b"b", Tagging="env=prod")
    s3.put_object_tagging(Bucket="photos", Key="b.jpg", Tagging=dev)
    s3.delete_object(Bucket="photos", Key="b.jpg")

    by_topic = routed(gateway)
    assert seen(by_topic[prod]) == [
        ("ObjectTagging:Put", "a.jpg"),
        ("ObjectRemoved:Delete", "a.jpg"),  # the removed row's tags: prod
        ("ObjectCreated:Put", "b.jpg"),
    ]
    assert len(by_topic[plain]) == 6  # every event, without tags or metadata

    tagged, removed, created = (d.event["s3"]["object"] for d in by_topic[prod])
    tags = [{"key": "env", "val": "prod"}, {"key": "owner", "val": "ann"}]
    camera = [{"key": "x-amz-meta-camera", "val": "x100v"}]
    assert (tagged["tags"], tagged["metadata"]) == (tags, camera)
    assert (removed["tags"], removed["metadata"]) == (tags, camera)
    assert (created["tags"], created["metadata"]) == ([{"key": "env", "val": "prod"}], [])
    assert {d.event["s3"]["configurationId"] for d in by_topic[prod]} == {"prod"}
    for delivery in by_topic[plain]:
        assert "tags" not in delivery.event["s3"]["object"]
        assert "metadata" not in delivery.event["s3"]["object"]
