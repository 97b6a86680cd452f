"""The pull-subscription REST API under /_ripple/pubsub/ over plain HTTP signed with
botocore's S3SigV4Auth against a running gateway (SQLite and PostgreSQL): topics shared with
the SNS API, notifications added and removed one at a time beside the bucket's others,
subscriptions, pulling in pages with a marker and acknowledging, and each ownership boundary
proved with a second user."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from ripple.identity import create_key, create_user
from ripple.subscriptions.store import SubscriptionStore
from tests.gateway.conftest import Running
from tests.gateway.helpers import REGION, PubSub
from tests.targets.conftest import delivery

AMQP = {"push-endpoint": "amqp://127.0.0.1/", "amqp-exchange": "ripple-events"}


@pytest.fixture
def api(gateway: Running) -> PubSub:
    return PubSub(gateway.url, gateway.key.access_key_id, gateway.secret)


@pytest.fixture
def bob(gateway: Running) -> PubSub:
    _, key, secret = create_user(gateway.services.db, gateway.data_dir, "bob")
    return PubSub(gateway.url, key.access_key_id, secret)


def code(response: httpx.Response) -> tuple[int, str]:
    """(status, S3 error code)."""
    text = response.text
    assert response.headers["content-type"].startswith("application/xml"), text
    return response.status_code, text.split("<Code>", 1)[1].split("</Code>", 1)[0]


def arn_of(gateway: Running, name: str) -> str:
    return f"arn:aws:sns:{REGION}:{gateway.key.project_public_id}:{name}"


def sns_client(gateway: Running) -> Any:
    return gateway.sns()


def store_events(gateway: Running, arn: str, count: int) -> list[str]:
    """What the pipeline would do: `count` events into every subscription of the topic."""
    deliveries = [delivery(f"2026/{i}.jpg", n=i) for i in range(count)]
    SubscriptionStore(gateway.services.db).store(arn, deliveries)
    return [d.event_id for d in deliveries]


# --- topics ---------------------------------------------------------------------------------


def test_topic_crud_shared_with_the_sns_api(gateway: Running, api: PubSub) -> None:
    arn = arn_of(gateway, "photos")
    params: dict[str, str | None] = {**AMQP, "amqp-ack-level": "broker", "verify-ssl": "false"}
    assert api.ok("PUT", "topics/photos", params) == {"arn": arn}
    stored = gateway.services.eventing.get_topic(gateway.key.project_id, "photos")
    assert stored is not None
    assert (stored.arn, stored.push_endpoint) == (arn, "amqp://127.0.0.1/")
    assert stored.arguments == {
        "amqp-exchange": "ripple-events",
        "amqp-ack-level": "broker",
        "verify-ssl": "false",
    }
    assert gateway.services.watcher.generation == gateway.services.eventing.generation()
    sns = sns_client(gateway)
    assert [t["TopicArn"] for t in sns.list_topics()["Topics"]] == [arn]
    attributes = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert attributes["amqp-ack-level"] == "broker"

    user = str(gateway.key.project_public_id)
    expected = {
        "topic": {
            "user": user,
            "name": "photos",
            "dest": {
                "bucket_name": "",
                "oid_prefix": "",
                "push_endpoint": "amqp://127.0.0.1/",
                "push_endpoint_args": (
                    "amqp-exchange=ripple-events&amqp-ack-level=broker&verify-ssl=false"
                ),
            },
            "arn": arn,
        },
        "subs": [],
    }
    assert api.ok("GET", "topics/photos") == expected
    assert api.ok("GET", f"topics/{arn}") == expected  # by ARN too

    # PUT again replaces the endpoint and arguments; a topic made with sns is listed too
    api.ok("PUT", "topics/photos")
    sns.create_topic(Name="archive")
    listed = api.ok("GET", "topics")["topics"]
    assert [t["topic"]["name"] for t in listed] == ["archive", "photos"]
    assert listed[1]["topic"]["dest"]["push_endpoint"] == ""
    assert listed[1]["topic"]["dest"]["push_endpoint_args"] == ""

    assert api.ok("DELETE", "topics/photos") is None
    assert code(api("GET", "topics/photos")) == (404, "NoSuchTopic")
    assert api.ok("DELETE", "topics/photos") is None  # not there: fine, as in the SNS API
    assert [t["TopicArn"] for t in sns.list_topics()["Topics"]] == [arn_of(gateway, "archive")]
    assert gateway.services.eventing.changes()[0]["action"] == "delete-topic"


def test_topic_arguments_are_checked_as_in_the_sns_api(gateway: Running, api: PubSub) -> None:
    assert code(api("PUT", "topics/photos", {"push-endpoint": "amqp://127.0.0.1/"})) == (
        400,
        "InvalidArgument",
    )
    assert code(api("PUT", "topics/photos", {"bogus": "1"})) == (400, "InvalidArgument")
    assert code(api("PUT", "topics/bad.name")) == (400, "InvalidArgument")
    assert code(api("PUT", "topics/photos", {"push-endpoint": "ftp://x"})) == (
        400,
        "InvalidArgument",
    )
    for unclosed in ("http://[::1", "http://user:pw@[::1"):  # urlsplit refuses these
        assert code(api("PUT", "topics/photos", {"push-endpoint": unclosed})) == (
            400,
            "InvalidArgument",
        )
    assert gateway.services.eventing.list_topics() == []


def test_credentials_need_tls_and_are_never_shown(gateway: Running, api: PubSub) -> None:
    secret_endpoint = {**AMQP, "push-endpoint": "amqp://user:pa55w0rd@127.0.0.1/"}
    refused = api("PUT", "topics/photos", dict(secret_endpoint))
    assert code(refused) == (400, "InvalidArgument")
    assert "TLS" in refused.text
    assert "pa55w0rd" not in refused.text
    assert gateway.services.eventing.list_topics() == []

    gateway.services.allow_secrets_in_cleartext = True
    api.ok("PUT", "topics/photos", dict(secret_endpoint))
    shown = api.ok("GET", "topics/photos")
    assert shown["topic"]["dest"]["push_endpoint"] == "amqp://user:***@127.0.0.1/"
    assert "pa55w0rd" not in str(api.ok("GET", "topics"))


# --- notifications --------------------------------------------------------------------------


def test_notifications_added_replaced_and_removed_beside_the_others(
    gateway: Running, api: PubSub, s3: Any
) -> None:
    s3.create_bucket(Bucket="photos")
    api.ok("PUT", "topics/jpegs")
    api.ok("PUT", "topics/audit")
    audit = arn_of(gateway, "audit")
    kept = {
        "Id": "kept",
        "TopicArn": audit,
        "Events": ["s3:ObjectCreated:*"],
        "Filter": {"Key": {"FilterRules": [{"Name": "Prefix", "Value": "2026/"}]}},
    }
    s3.put_bucket_notification_configuration(
        Bucket="photos", NotificationConfiguration={"TopicConfigurations": [kept]}
    )

    api.ok("PUT", "notifications/bucket/photos", {"topic": "jpegs", "events": "OBJECT_CREATE"})
    configured = s3.get_bucket_notification_configuration(Bucket="photos")
    assert configured["TopicConfigurations"] == [
        kept,
        {"Id": "jpegs", "TopicArn": arn_of(gateway, "jpegs"), "Events": ["s3:ObjectCreated:*"]},
    ]
    key = gateway.key
    destinations = gateway.services.registry.destinations(key.project_id, "photos")
    assert {d.topic for d in destinations} == {audit, arn_of(gateway, "jpegs")}

    # again: replaces that one notification, in its place
    events = "OBJECT_DELETE,DELETE_MARKER_CREATE,s3:ObjectCreated:Put"
    api.ok("PUT", "notifications/bucket/photos", {"topic": "jpegs", "events": events})
    configured = s3.get_bucket_notification_configuration(Bucket="photos")
    assert [c["Id"] for c in configured["TopicConfigurations"]] == ["kept", "jpegs"]
    assert configured["TopicConfigurations"][1]["Events"] == [
        "s3:ObjectRemoved:Delete",
        "s3:ObjectRemoved:DeleteMarkerCreated",
        "s3:ObjectCreated:Put",
    ]
    listed = api.ok("GET", "notifications/bucket/photos")["topics"]
    assert [(t["topic"]["name"], t["events"]) for t in listed] == [
        ("audit", ["OBJECT_CREATE"]),  # the module's names where it has one
        ("jpegs", ["OBJECT_DELETE", "DELETE_MARKER_CREATE", "s3:ObjectCreated:Put"]),
    ]
    assert listed[1]["topic"]["arn"] == arn_of(gateway, "jpegs")
    assert api.ok("GET", "notifications/bucket/photos", {"topic": "audit"})["topics"] == [listed[0]]

    assert api.ok("DELETE", "notifications/bucket/photos", {"topic": "jpegs"}) is None
    configured = s3.get_bucket_notification_configuration(Bucket="photos")
    assert configured["TopicConfigurations"] == [kept]
    assert code(api("DELETE", "notifications/bucket/photos", {"topic": "jpegs"})) == (
        404,
        "NoSuchNotification",
    )
    # the default: every event the module knows
    api.ok("PUT", "notifications/bucket/photos", {"topic": "jpegs"})
    assert api.ok("GET", "notifications/bucket/photos", {"topic": "jpegs"})["topics"][0][
        "events"
    ] == ["OBJECT_CREATE", "OBJECT_DELETE", "DELETE_MARKER_CREATE"]
    actions = [c["action"] for c in gateway.services.eventing.changes(3)]
    assert actions == ["put-notification", "delete-notification", "put-notification"]


def test_notification_refusals_change_nothing(gateway: Running, api: PubSub, s3: Any) -> None:
    s3.create_bucket(Bucket="photos")
    api.ok("PUT", "topics/jpegs")
    api.ok("PUT", "notifications/bucket/photos", {"topic": "jpegs", "events": "OBJECT_CREATE"})
    before = s3.get_bucket_notification_configuration(Bucket="photos")["TopicConfigurations"]
    # a second notification to the same topic for the same events would deliver twice
    s3_only = {
        "Id": "other",
        "TopicArn": arn_of(gateway, "jpegs"),
        "Events": ["s3:ObjectRemoved:*"],
    }
    s3.put_bucket_notification_configuration(
        Bucket="photos", NotificationConfiguration={"TopicConfigurations": [*before, s3_only]}
    )
    overlapping = {"topic": "jpegs", "events": "OBJECT_DELETE"}
    assert code(api("PUT", "notifications/bucket/photos", overlapping)) == (
        400,
        "InvalidArgument",
    )
    bad = [
        ({"topic": "jpegs", "events": "OBJECT_EXPLODE"}, (400, "InvalidArgument")),
        ({"topic": "jpegs", "events": "s3:ObjectRestore:*"}, (400, "InvalidArgument")),
        ({"topic": "nope"}, (404, "NoSuchTopic")),
        ({}, (400, "InvalidArgument")),
    ]
    for params, expected in bad:
        assert code(api("PUT", "notifications/bucket/photos", dict(params))) == expected, params
    assert code(api("PUT", "notifications/bucket/missing", {"topic": "jpegs"})) == (
        404,
        "NoSuchBucket",
    )
    after = s3.get_bucket_notification_configuration(Bucket="photos")["TopicConfigurations"]
    assert after == [*before, s3_only]


# --- subscriptions --------------------------------------------------------------------------


def test_subscription_create_get_delete(gateway: Running, api: PubSub) -> None:
    api.ok("PUT", "topics/photos")
    arn = arn_of(gateway, "photos")
    assert api.ok("PUT", "subscriptions/audit", {"topic": "photos"}) is None
    made = SubscriptionStore(gateway.services.db).get("audit")
    assert (made.topic, made.format, made.owner) == (arn, "compact", gateway.key.project_id)
    assert api.ok("GET", "subscriptions/audit") == {
        "user": str(gateway.key.project_public_id),
        "name": "audit",
        "topic": "photos",
        "dest": {
            "bucket_name": "",
            "oid_prefix": "",
            "push_endpoint": "",
            "push_endpoint_args": "",
        },
        "s3_id": "",
    }
    assert api.ok("GET", "topics/photos")["subs"] == ["audit"]
    # again, by ARN and in S3 records: the format changes, nothing else
    api.ok("PUT", "subscriptions/audit", {"topic": arn, "format": "s3"})
    assert SubscriptionStore(gateway.services.db).get("audit").format == "s3"

    api.ok("PUT", "topics/other")
    assert code(api("PUT", "subscriptions/audit", {"topic": "other"})) == (400, "InvalidArgument")
    assert code(api("PUT", "subscriptions/new", {"topic": "nope"})) == (404, "NoSuchTopic")
    assert code(api("PUT", "subscriptions/new", {"topic": "photos", "format": "xml"})) == (
        400,
        "InvalidArgument",
    )
    assert code(api("PUT", "subscriptions/bad name", {"topic": "photos"})) == (
        400,
        "InvalidArgument",
    )
    pushed = api("PUT", "subscriptions/new", {"topic": "photos", "push-endpoint": "http://x/"})
    assert code(pushed) == (501, "NotImplemented")
    assert "push-endpoint" in pushed.text

    assert api.ok("DELETE", "subscriptions/audit") is None
    assert code(api("GET", "subscriptions/audit")) == (404, "NoSuchSubscription")
    assert code(api("DELETE", "subscriptions/audit")) == (404, "NoSuchSubscription")
    assert SubscriptionStore(gateway.services.db).list() == []


@pytest.mark.parametrize(
    ("event_format", "key", "id_field"), [("compact", "events", "id"), ("s3", "Records", "eventId")]
)
def test_pull_in_pages_and_ack(
    gateway: Running, api: PubSub, event_format: str, key: str, id_field: str
) -> None:
    api.ok("PUT", "topics/photos")
    api.ok("PUT", "subscriptions/audit", {"topic": "photos", "format": event_format})
    stored = store_events(gateway, arn_of(gateway, "photos"), 5)

    pulled: list[str] = []
    marker = ""
    truncated = []
    while True:
        params: dict[str, str | None] = {"events": None, "max-entries": "2"}
        if marker:
            params["marker"] = marker
        page = api.ok("GET", "subscriptions/audit", params)
        assert set(page) == {"next_marker", "is_truncated", key}
        pulled += [event[id_field] for event in page[key]]
        truncated.append(page["is_truncated"])
        marker = page["next_marker"]
        if not page["is_truncated"]:
            break
    assert pulled == stored
    assert truncated == [True, True, False]

    for event_id in pulled[:3]:
        assert api.ok("POST", "subscriptions/audit", {"ack": None, "event-id": event_id}) is None
    rest = api.ok("GET", "subscriptions/audit", {"events": None})
    assert [event[id_field] for event in rest[key]] == pulled[3:]
    for event_id in pulled[3:]:
        api.ok("POST", "subscriptions/audit", {"ack": None, "event-id": event_id})
    assert api.ok("GET", "subscriptions/audit", {"events": None}) == {
        "next_marker": "",
        "is_truncated": False,
        key: [],
    }
    again = api("POST", "subscriptions/audit", {"ack": None, "event-id": pulled[0]})
    assert code(again) == (404, "NoSuchKey")
    assert code(api("POST", "subscriptions/audit", {"ack": None})) == (400, "InvalidArgument")


def test_bad_pull_parameters(gateway: Running, api: PubSub) -> None:
    api.ok("PUT", "topics/photos")
    api.ok("PUT", "subscriptions/audit", {"topic": "photos"})
    for params in (
        {"max-entries": "abc"},
        {"max-entries": "0"},
        {"max-entries": "1001"},
        {"marker": "x"},
    ):
        response = api("GET", "subscriptions/audit", {"events": None, **params})
        assert code(response) == (400, "InvalidArgument"), params
    assert code(api("GET", "subscriptions/nope", {"events": None})) == (404, "NoSuchSubscription")


# --- who may do what ------------------------------------------------------------------------


def test_unauthenticated_and_unknown_requests(gateway: Running, api: PubSub) -> None:
    response = httpx.get(f"{gateway.url}/_ripple/pubsub/topics")
    assert code(response) == (403, "AccessDenied")
    assert code(api("PATCH", "topics/photos")) == (405, "MethodNotAllowed")
    assert code(api("POST", "subscriptions/audit")) == (400, "InvalidRequest")
    assert code(api("GET", "queues/x")) == (400, "InvalidURI")
    wrong = PubSub(gateway.url, gateway.key.access_key_id, "not-the-secret")
    assert code(wrong("GET", "topics")) == (403, "SignatureDoesNotMatch")


def test_a_key_restricted_to_a_bucket_manages_no_topics(gateway: Running, s3: Any) -> None:
    s3.create_bucket(Bucket="photos")
    key, secret = create_key(gateway.services.db, gateway.data_dir, "alice", bucket="photos")
    restricted = PubSub(gateway.url, key.access_key_id, secret)
    assert code(restricted("PUT", "topics/photos")) == (403, "AccessDenied")
    assert code(restricted("PUT", "subscriptions/a", {"topic": "photos"})) == (403, "AccessDenied")


def test_bob_cannot_touch_alices_topics(gateway: Running, api: PubSub, bob: PubSub) -> None:
    api.ok("PUT", "topics/photos", dict(AMQP))
    arn = arn_of(gateway, "photos")
    for method in ("GET", "PUT", "DELETE"):
        assert code(bob(method, f"topics/{arn}")) == (403, "AccessDenied"), method
    assert bob.ok("GET", "topics") == {"topics": []}
    # a name is in bob's own namespace: his "photos" is another topic
    assert code(bob("GET", "topics/photos")) == (404, "NoSuchTopic")
    bobs = bob.ok("PUT", "topics/photos")["arn"]
    assert bobs != arn
    bob.ok("DELETE", "topics/photos")
    stored = gateway.services.eventing.get_topic(gateway.key.project_id, "photos")
    assert stored is not None
    assert stored.push_endpoint == "amqp://127.0.0.1/"


def test_bob_cannot_notify_on_alices_bucket_nor_to_her_topic(
    gateway: Running, api: PubSub, bob: PubSub, s3: Any
) -> None:
    s3.create_bucket(Bucket="photos")
    api.ok("PUT", "topics/photos")
    api.ok("PUT", "notifications/bucket/photos", {"topic": "photos"})
    bob.ok("PUT", "topics/mine")
    for method in ("PUT", "GET", "DELETE"):
        response = bob(method, "notifications/bucket/photos", {"topic": "mine"})
        assert code(response) == (403, "AccessDenied"), method
    # on his own bucket, to alice's topic
    bobs_s3 = gateway.client(bob.access_key, bob.secret)
    bobs_s3.create_bucket(Bucket="bobs")
    alices = arn_of(gateway, "photos")
    response = bob("PUT", "notifications/bucket/bobs", {"topic": alices})
    assert code(response) == (403, "AccessDenied")
    assert gateway.services.eventing.notifications(gateway.key.project_id, "photos") != []
    assert (
        len(s3.get_bucket_notification_configuration(Bucket="photos")["TopicConfigurations"]) == 1
    )


def test_bob_cannot_subscribe_to_alices_topic_nor_use_her_subscription(
    gateway: Running, api: PubSub, bob: PubSub
) -> None:
    api.ok("PUT", "topics/photos")
    arn = arn_of(gateway, "photos")
    api.ok("PUT", "subscriptions/audit", {"topic": "photos"})
    [event_id] = store_events(gateway, arn, 1)

    assert code(bob("PUT", "subscriptions/mine", {"topic": arn})) == (403, "AccessDenied")
    bob.ok("PUT", "topics/photos")
    # the name is alice's: bob cannot take it over, even for his own topic
    assert code(bob("PUT", "subscriptions/audit", {"topic": "photos"})) == (403, "AccessDenied")
    refused = [
        ("GET", {}),
        ("GET", {"events": None}),
        ("POST", {"ack": None, "event-id": event_id}),
        ("DELETE", {}),
    ]
    for method, params in refused:
        response = bob(method, "subscriptions/audit", dict(params))
        assert code(response) == (403, "AccessDenied"), (method, params)
    assert bob.ok("GET", "topics/photos")["subs"] == []
    page = api.ok("GET", "subscriptions/audit", {"events": None})
    assert [e["id"] for e in page["events"]] == [event_id]  # still there, not acknowledged


def test_a_subscription_made_with_the_cli_is_not_reachable(gateway: Running, api: PubSub) -> None:
    api.ok("PUT", "topics/photos")
    SubscriptionStore(gateway.services.db).create("ops", arn_of(gateway, "photos"))
    for method, params in (("GET", {}), ("GET", {"events": None}), ("DELETE", {})):
        assert code(api(method, "subscriptions/ops", dict(params))) == (403, "AccessDenied")
    assert code(api("PUT", "subscriptions/ops", {"topic": "photos"})) == (403, "AccessDenied")
    assert api.ok("GET", "topics/photos")["subs"] == []
