"""Put/GetBucketNotificationConfiguration through the gateway with boto3, and ripple's
single-notification extension over signed plain HTTP: what is stored and read back, the
s3:TestEvent each new destination receives (a webhook on 127.0.0.1), S3's validation errors
with nothing changed, ownership, and the gateway's registry following along so the bucket's
next write records its change."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from ripple.identity import create_user
from ripple.notifications.configuration import Notification
from ripple.notifications.store import topic_arn
from tests.gateway.conftest import Running
from tests.gateway.helpers import REGION, make_topic, recorded_request_ids, signed_put
from tests.receiver import Receiver, receiver


@pytest.fixture
def hook() -> Iterator[Receiver]:
    with receiver() as r:
        yield r


def configuration(*topics: tuple[str, str], prefix: str = "") -> dict[str, Any]:
    """TopicConfigurations (id, arn) for created events, optionally under a prefix."""
    configs: list[dict[str, Any]] = []
    for notification_id, arn in topics:
        config: dict[str, Any] = {
            "Id": notification_id,
            "TopicArn": arn,
            "Events": ["s3:ObjectCreated:*"],
        }
        if prefix:
            config["Filter"] = {"Key": {"FilterRules": [{"Name": "prefix", "Value": prefix}]}}
        configs.append(config)
    return {"TopicConfigurations": configs}


def error(raised: pytest.ExceptionInfo[ClientError]) -> dict[str, Any]:
    return dict(raised.value.response["Error"])


def signed(gateway: Running, method: str, path: str) -> httpx.Response:
    request = AWSRequest(
        method=method, url=gateway.url + path, headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"}
    )
    credentials = Credentials(gateway.key.access_key_id, gateway.secret)
    S3SigV4Auth(credentials, "s3", REGION).add_auth(request)
    return httpx.request(method, gateway.url + path, headers=dict(request.headers.items()))


def test_put_get_and_the_test_event(gateway: Running, s3: Any, hook: Receiver) -> None:
    topic = make_topic(gateway, "photos", hook.url)
    s3.create_bucket(Bucket="photos")

    put = s3.put_bucket_notification_configuration(
        Bucket="photos",
        NotificationConfiguration=configuration(("jpegs", topic.arn), prefix="2026/"),
    )

    [post] = hook.posts
    message = post.json()
    assert message["Event"] == "s3:TestEvent"
    assert message["Bucket"] == "photos"
    assert message["RequestId"] == put["ResponseMetadata"]["RequestId"]
    assert message["HostId"] == put["ResponseMetadata"]["HostId"]
    assert message["Time"].endswith("Z")
    got = s3.get_bucket_notification_configuration(Bucket="photos")
    assert got["TopicConfigurations"] == [
        {
            "Id": "jpegs",
            "TopicArn": topic.arn,
            "Events": ["s3:ObjectCreated:*"],
            "Filter": {"Key": {"FilterRules": [{"Name": "Prefix", "Value": "2026/"}]}},
        }
    ]
    key = gateway.key
    assert gateway.services.registry.is_eventing(key.project_id, "photos")
    [destination] = gateway.services.registry.destinations(key.project_id, "photos")
    assert (destination.topic, destination.prefix) == (topic.arn, "2026/")

    # the same destination again: not new, no second test message
    s3.put_bucket_notification_configuration(
        Bucket="photos", NotificationConfiguration=configuration(("all", topic.arn))
    )
    assert len(hook.posts) == 1
    assert gateway.services.registry.destinations(key.project_id, "photos")[0].prefix == ""

    # an empty configuration removes everything
    s3.put_bucket_notification_configuration(Bucket="photos", NotificationConfiguration={})
    assert "TopicConfigurations" not in s3.get_bucket_notification_configuration(Bucket="photos")
    assert not gateway.services.registry.is_eventing(key.project_id, "photos")


def test_skip_destination_validation(gateway: Running, s3: Any, hook: Receiver) -> None:
    topic = make_topic(gateway, "photos", hook.url)
    s3.create_bucket(Bucket="photos")
    s3.put_bucket_notification_configuration(
        Bucket="photos",
        NotificationConfiguration=configuration(("n", topic.arn)),
        SkipDestinationValidation=True,
    )
    assert hook.posts == []
    assert (
        len(s3.get_bucket_notification_configuration(Bucket="photos")["TopicConfigurations"]) == 1
    )


def test_a_destination_that_refuses_the_test_event_fails_the_put(
    gateway: Running, s3: Any, hook: Receiver
) -> None:
    good = make_topic(gateway, "good", hook.url)
    s3.create_bucket(Bucket="photos")
    s3.put_bucket_notification_configuration(
        Bucket="photos", NotificationConfiguration=configuration(("old", good.arn))
    )
    bad = make_topic(gateway, "bad", hook.url.replace("/events", "/refused"))
    hook.status = 403
    with pytest.raises(ClientError) as raised:
        s3.put_bucket_notification_configuration(
            Bucket="photos",
            NotificationConfiguration={
                "TopicConfigurations": [
                    {"Id": "old", "TopicArn": good.arn, "Events": ["s3:ObjectCreated:*"]},
                    {"Id": "new", "TopicArn": bad.arn, "Events": ["s3:ObjectRemoved:*"]},
                ]
            },
        )
    e = error(raised)
    assert e["Code"] == "InvalidArgument"
    assert e["Message"] == "Unable to validate the following destination configurations"
    assert e["ArgumentName1"] == bad.arn
    assert "403" in e["ArgumentValue1"]
    assert [p.path for p in hook.posts] == ["/events", "/refused"]  # only the new one tested
    got = s3.get_bucket_notification_configuration(Bucket="photos")["TopicConfigurations"]
    assert [c["Id"] for c in got] == ["old"]  # nothing changed


def test_unknown_and_foreign_topics_are_refused(gateway: Running, s3: Any) -> None:
    bob, _, _ = create_user(gateway.services.db, gateway.data_dir, "bob")
    foreign = topic_arn(REGION, str(bob.public_id), "theirs")
    gateway.services.eventing.put_topic(bob.id, "theirs", foreign, "none", {}, "bob")
    missing = topic_arn(REGION, str(gateway.key.project_public_id), "missing")
    s3.create_bucket(Bucket="photos")
    with pytest.raises(ClientError) as raised:
        s3.put_bucket_notification_configuration(
            Bucket="photos",
            NotificationConfiguration=configuration(("a", missing), ("b", foreign)),
        )
    e = error(raised)
    assert (e["Code"], e["Message"]) == (
        "InvalidArgument",
        "Unable to validate the following destination configurations",
    )
    assert {e["ArgumentName1"], e["ArgumentName2"]} == {missing, foreign}
    assert "TopicConfigurations" not in s3.get_bucket_notification_configuration(Bucket="photos")


def test_malformed_and_ambiguous_configurations(gateway: Running, s3: Any) -> None:
    topic = make_topic(gateway, "t", "none")
    s3.create_bucket(Bucket="photos")
    with pytest.raises(ClientError) as raised:
        s3.put_bucket_notification_configuration(
            Bucket="photos",
            NotificationConfiguration={
                "TopicConfigurations": [
                    {"Id": "a", "TopicArn": topic.arn, "Events": ["s3:ObjectCreated:*"]},
                    {"Id": "b", "TopicArn": topic.arn, "Events": ["s3:ObjectCreated:Put"]},
                ]
            },
        )
    assert error(raised)["Code"] == "InvalidArgument"
    assert "ambiguously defined" in error(raised)["Message"]
    with pytest.raises(ClientError) as raised:
        s3.put_bucket_notification_configuration(
            Bucket="photos",
            NotificationConfiguration={
                "QueueConfigurations": [
                    {"QueueArn": "arn:aws:sqs:us-east-1:1:q", "Events": ["s3:ObjectCreated:*"]}
                ]
            },
        )
    assert error(raised)["Code"] == "InvalidArgument"
    assert "QueueConfiguration" in error(raised)["Message"]
    response = signed_put(gateway, "/photos?notification", b"<NotificationConfiguration><Topic")
    assert response.status_code == 400
    assert ET.fromstring(response.content).findtext("Code") == "MalformedXML"
    assert "TopicConfigurations" not in s3.get_bucket_notification_configuration(Bucket="photos")


def test_one_notification_by_id(gateway: Running, s3: Any) -> None:
    one, two = make_topic(gateway, "one", "none"), make_topic(gateway, "two", "none")
    s3.create_bucket(Bucket="photos")
    s3.put_bucket_notification_configuration(
        Bucket="photos", NotificationConfiguration=configuration(("n1", one.arn), ("n2", two.arn))
    )
    response = signed(gateway, "GET", "/photos?notification=n2")
    assert response.status_code == 200, response.text
    root = ET.fromstring(response.content)
    ns = {"s3": "http://s3.amazonaws.com/doc/2006-03-01/"}
    assert [e.text for e in root.findall("s3:TopicConfiguration/s3:Id", ns)] == ["n2"]

    assert signed(gateway, "DELETE", "/photos?notification=n1").status_code == 204
    got = s3.get_bucket_notification_configuration(Bucket="photos")["TopicConfigurations"]
    assert [c["Id"] for c in got] == ["n2"]
    missing = signed(gateway, "GET", "/photos?notification=n1")
    assert missing.status_code == 404
    assert ET.fromstring(missing.content).findtext("Code") == "NoSuchNotification"
    assert signed(gateway, "DELETE", "/photos?notification").status_code == 204
    assert "TopicConfigurations" not in s3.get_bucket_notification_configuration(Bucket="photos")


def test_only_the_buckets_owner_configures_it(gateway: Running, s3: Any) -> None:
    topic = make_topic(gateway, "t", "none")
    s3.create_bucket(Bucket="photos")
    _, key, secret = create_user(gateway.services.db, gateway.data_dir, "bob")
    bob = gateway.client(key.access_key_id, secret)
    with pytest.raises(ClientError) as raised:
        bob.put_bucket_notification_configuration(
            Bucket="photos", NotificationConfiguration=configuration(("n", topic.arn))
        )
    assert error(raised)["Code"] == "AccessDenied"
    with pytest.raises(ClientError) as raised:
        bob.get_bucket_notification_configuration(Bucket="photos")
    assert error(raised)["Code"] == "AccessDenied"
    with pytest.raises(ClientError) as raised:
        bob.get_bucket_notification_configuration(Bucket="nobody-has-this")
    assert error(raised)["Code"] == "NoSuchBucket"


def test_the_gateway_records_changes_once_the_bucket_has_a_notification(
    gateway: Running, s3: Any
) -> None:
    db = gateway.services.db
    db.eventing = gateway.services.registry.is_eventing  # as `ripple serve` wires it
    topic = make_topic(gateway, "t", "none")
    s3.create_bucket(Bucket="photos")
    s3.put_object(Bucket="photos", Key="before", Body=b"x")
    s3.put_bucket_notification_configuration(
        Bucket="photos", NotificationConfiguration=configuration(("n", topic.arn))
    )
    put = s3.put_object(Bucket="photos", Key="after", Body=b"x")
    assert recorded_request_ids(db) == [put["ResponseMetadata"]["RequestId"]]


def test_deleting_the_bucket_deletes_its_notifications(gateway: Running, s3: Any) -> None:
    topic = make_topic(gateway, "t", "none")
    s3.create_bucket(Bucket="photos")
    s3.put_bucket_notification_configuration(
        Bucket="photos", NotificationConfiguration=configuration(("n", topic.arn))
    )
    key = gateway.key
    assert gateway.services.registry.is_eventing(key.project_id, "photos")
    s3.delete_bucket(Bucket="photos")
    assert not gateway.services.registry.is_eventing(key.project_id, "photos")
    s3.create_bucket(Bucket="photos")
    assert "TopicConfigurations" not in s3.get_bucket_notification_configuration(Bucket="photos")
    assert gateway.services.eventing.changes()[0]["action"] == "delete-bucket-notifications"


def test_a_failed_test_message_does_not_show_credentials(gateway: Running, s3: Any) -> None:
    # nothing listens on port 1: the test message fails with an error naming the endpoint
    topic = make_topic(gateway, "t", "http://hooks:s3cr3t-pw@127.0.0.1:1/x", secret="sign-me")
    s3.create_bucket(Bucket="photos")
    with pytest.raises(ClientError) as raised:
        s3.put_bucket_notification_configuration(
            Bucket="photos", NotificationConfiguration=configuration(("n", topic.arn))
        )
    e = error(raised)
    assert e["ArgumentName1"] == topic.arn
    assert "127.0.0.1:1" in e["ArgumentValue1"]  # the error is there, naming the endpoint
    assert "s3cr3t-pw" not in str(raised.value.response)
    assert "sign-me" not in str(raised.value.response)


def test_s3metadata_rules_are_stored_and_read_back(gateway: Running, s3: Any) -> None:
    topic = make_topic(gateway, "t", "none")
    s3.create_bucket(Bucket="photos")
    body = (
        b'<NotificationConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b"<TopicConfiguration><Id>reds</Id><Topic>" + topic.arn.encode() + b"</Topic>"
        b"<Event>s3:ObjectCreated:*</Event><Filter><S3Metadata><FilterRule>"
        b"<Name>x-amz-meta-color</Name><Value>red</Value></FilterRule></S3Metadata></Filter>"
        b"</TopicConfiguration></NotificationConfiguration>"
    )
    response = signed_put(gateway, "/photos?notification", body)
    assert response.status_code == 200, response.text
    [destination] = gateway.services.registry.destinations(gateway.key.project_id, "photos")
    assert destination.metadata == (("x-amz-meta-color", "red"),)
    got = signed(gateway, "GET", "/photos?notification=reds")
    assert b"<S3Metadata>" in got.content
    assert b"<Value>red</Value>" in got.content


def test_a_new_bucket_starts_without_notifications_left_behind(gateway: Running, s3: Any) -> None:
    """Notifications a failed DeleteBucket left behind do not attach to a bucket made again
    under the name."""
    topic = make_topic(gateway, "t", "none")
    key = gateway.key
    store = gateway.services.eventing
    store.put_notifications(
        key.project_id,
        "photos",
        [Notification("stale", topic.arn, ("s3:ObjectCreated:*",))],
        "test",
    )
    s3.create_bucket(Bucket="photos")
    assert "TopicConfigurations" not in s3.get_bucket_notification_configuration(Bucket="photos")
    assert not gateway.services.registry.is_eventing(key.project_id, "photos")
