"""The SNS-compatible topic API on the S3 endpoint: boto3's `sns` client and plain form POSTs
signed with botocore's SigV4 against a running gateway; ownership proved with two users;
credentials refused over plain HTTP, accepted over HTTPS (or when the server allows them)
and never shown."""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from ripple.config import ConfigError, load_settings
from ripple.gateway.app import create_app
from ripple.gateway.request import Services
from ripple.gateway.server import build_services
from ripple.gateway.topics import SNS_NAMESPACE
from ripple.identity import create_key, create_user
from ripple.metabase import Metabase
from ripple.targets.guard import DestinationGuard, set_default_guard
from tests.gateway.conftest import Running

AMQP = {"push-endpoint": "amqp://127.0.0.1/", "amqp-exchange": "ripple-events"}
PASSWORD = "pa55w0rd-not-shown"
NS = {"sns": SNS_NAMESPACE}


def sns_client(gateway: Running, access_key: str | None = None, secret: str | None = None) -> Any:
    return gateway.sns(access_key, secret)


@pytest.fixture
def sns(gateway: Running) -> Any:
    return sns_client(gateway)


@pytest.fixture
def bob(gateway: Running) -> Any:
    """A second user's sns client."""
    _, key, secret = create_user(gateway.services.db, gateway.data_dir, "bob")
    return sns_client(gateway, key.access_key_id, secret)


def error_of(call: Any, *args: Any, **kwargs: Any) -> tuple[str, str, int]:
    with pytest.raises(ClientError) as info:
        call(*args, **kwargs)
    error = info.value.response["Error"]
    status = info.value.response["ResponseMetadata"]["HTTPStatusCode"]
    return error["Code"], error["Message"], status


def arn_of(gateway: Running, name: str) -> str:
    return f"arn:aws:sns:us-east-1:{gateway.key.project_public_id}:{name}"


def signed_post(
    url: str, form: dict[str, str], access_key: str, secret: str, service: str = "sns"
) -> AWSRequest:
    request = AWSRequest(
        method="POST",
        url=url,
        data=urlencode(form),
        headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
    )
    SigV4Auth(Credentials(access_key, secret), service, "us-east-1").add_auth(request)
    return request


def post(gateway: Running, form: dict[str, str], service: str = "sns") -> httpx.Response:
    request = signed_post(
        gateway.url + "/", form, gateway.key.access_key_id, gateway.secret, service
    )
    return httpx.post(request.url, content=request.body, headers=dict(request.headers.items()))


def error_code(response: httpx.Response) -> str:
    root = ET.fromstring(response.content)
    assert root.tag == f"{{{SNS_NAMESPACE}}}ErrorResponse"
    code = root.findtext("sns:Error/sns:Code", namespaces=NS)
    assert code is not None
    return code


# --- CreateTopic, GetTopicAttributes, SetTopicAttributes ---------------------------------------


def test_create_topic_answers_the_arn_of_the_project(gateway: Running, sns: Any) -> None:
    created = sns.create_topic(Name="photos", Attributes=AMQP)
    assert created["TopicArn"] == arn_of(gateway, "photos")
    stored = gateway.services.eventing.get_topic(gateway.key.project_id, "photos")
    assert stored is not None
    assert (stored.arn, stored.push_endpoint) == (arn_of(gateway, "photos"), "amqp://127.0.0.1/")
    assert stored.arguments == {"amqp-exchange": "ripple-events"}
    change = gateway.services.eventing.changes()[0]
    assert change["action"] == "create-topic"
    assert change["principal"] == f"{gateway.key.access_key_id} (alice)"
    # the gateway applied the change at once
    watcher = gateway.services.watcher
    assert watcher.generation == gateway.services.eventing.generation()


def test_get_topic_attributes(gateway: Running, sns: Any) -> None:
    arn = sns.create_topic(Name="photos", Attributes={**AMQP, "amqp-ack-level": "routable"})[
        "TopicArn"
    ]
    attributes = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert attributes == {
        "push-endpoint": "amqp://127.0.0.1/",
        "amqp-exchange": "ripple-events",
        "amqp-ack-level": "routable",
        "TopicArn": arn,
        "Owner": str(gateway.key.project_public_id),
        "Name": "photos",
    }


def test_create_again_replaces_endpoint_and_attributes(gateway: Running, sns: Any) -> None:
    first = sns.create_topic(Name="photos", Attributes={**AMQP, "amqp-ack-level": "none"})
    again = sns.create_topic(
        Name="photos",
        Attributes={"push-endpoint": "redis://127.0.0.1:6379/0", "redis-key": "events"},
    )
    assert again["TopicArn"] == first["TopicArn"]
    attributes = sns.get_topic_attributes(TopicArn=again["TopicArn"])["Attributes"]
    assert attributes["push-endpoint"] == "redis://127.0.0.1:6379/0"
    assert attributes["redis-key"] == "events"
    assert "amqp-exchange" not in attributes
    assert "amqp-ack-level" not in attributes
    assert len(gateway.services.eventing.list_topics(gateway.key.project_id)) == 1
    assert [c["action"] for c in gateway.services.eventing.changes()[:2]] == [
        "update-topic",
        "create-topic",
    ]


def test_pull_only_topic(sns: Any) -> None:
    for endpoint in ({}, {"push-endpoint": ""}, {"push-endpoint": "none"}):
        arn = sns.create_topic(Name="pulled", Attributes=endpoint)["TopicArn"]
        assert sns.get_topic_attributes(TopicArn=arn)["Attributes"]["push-endpoint"] == ""


def test_set_topic_attributes(sns: Any) -> None:
    arn = sns.create_topic(Name="photos", Attributes=AMQP)["TopicArn"]
    sns.set_topic_attributes(TopicArn=arn, AttributeName="amqp-ack-level", AttributeValue="none")
    sns.set_topic_attributes(TopicArn=arn, AttributeName="OpaqueData", AttributeValue="team-a")
    sns.set_topic_attributes(TopicArn=arn, AttributeName="time-to-live", AttributeValue="60")
    sns.set_topic_attributes(TopicArn=arn, AttributeName="ordering", AttributeValue="per-key")
    attributes = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert attributes["ordering"] == "per-key"
    assert attributes["amqp-ack-level"] == "none"
    assert attributes["OpaqueData"] == "team-a"
    assert attributes["time-to-live"] == "60"
    # an empty value removes an argument
    sns.set_topic_attributes(TopicArn=arn, AttributeName="OpaqueData", AttributeValue="")
    assert "OpaqueData" not in sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    sns.set_topic_attributes(
        TopicArn=arn, AttributeName="push-endpoint", AttributeValue="amqp://127.0.0.1:5673/"
    )
    attributes = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert attributes["push-endpoint"] == "amqp://127.0.0.1:5673/"
    assert attributes["amqp-exchange"] == "ripple-events"


def test_set_topic_attributes_is_checked(sns: Any) -> None:
    arn = sns.create_topic(Name="photos", Attributes=AMQP)["TopicArn"]
    set_ = sns.set_topic_attributes
    code, message, _ = error_of(
        set_, TopicArn=arn, AttributeName="amqp-ack-level", AttributeValue="end2end"
    )
    assert code == "InvalidParameter"
    assert "amqp-ack-level" in message
    code, message, _ = error_of(set_, TopicArn=arn, AttributeName="TopicArn", AttributeValue="x")
    assert code == "InvalidParameter"
    assert "read-only" in message
    # pull-only, with an AMQP argument left over
    code, message, _ = error_of(
        set_, TopicArn=arn, AttributeName="push-endpoint", AttributeValue=""
    )
    assert code == "InvalidParameter"
    assert "amqp-exchange" in message
    code, message, _ = error_of(
        set_, TopicArn=arn, AttributeName="max-retries", AttributeValue="many"
    )
    assert code == "InvalidParameter"
    assert "max-retries" in message
    code, message, _ = error_of(
        set_, TopicArn=arn, AttributeName="ordering", AttributeValue="sometimes"
    )
    assert code == "InvalidParameter"
    assert "'ordering' must be one of per-key, off" in message
    # nothing of it was stored
    assert sns.get_topic_attributes(TopicArn=arn)["Attributes"]["push-endpoint"] == (
        "amqp://127.0.0.1/"
    )


@pytest.mark.parametrize(
    ("name", "attributes", "named"),
    [
        ("has space", {}, "Name"),
        ("x" * 257, {}, "Name"),
        ("dots.are.not.allowed", {}, "Name"),
        ("photos", {"push-endpoint": "ftp://127.0.0.1/"}, "push-endpoint"),
        ("photos", {"push-endpoint": "amqp://127.0.0.1:99999/"}, "port"),
        ("photos", {**AMQP, "amqp-ack-level": "end2end"}, "amqp-ack-level"),
        ("photos", {"push-endpoint": "amqp://127.0.0.1/"}, "amqp-exchange"),
        ("photos", {"push-endpoint": "redis://127.0.0.1/"}, "redis-key"),
        ("photos", {**AMQP, "no-such-thing": "1"}, "no-such-thing"),
        ("photos", {**AMQP, "persistent": "maybe"}, "persistent"),
        ("photos", {"mqtt-qos": "1"}, "pull-only"),
        ("photos", {"push-endpoint": "mqtt://127.0.0.1", "mqtt-qos": "2"}, "mqtt-qos"),
        ("photos", {"push-endpoint": "http://127.0.0.1/", "verify-ssl": "perhaps"}, "verify-ssl"),
        ("photos", {**AMQP, "Owner": "me"}, "Owner"),
        ("photos", {"push-endpoint": "http://[::1"}, "push-endpoint"),
        ("photos", {"push-endpoint": "http://user:pw@[::1"}, "push-endpoint"),
    ],
)
def test_create_topic_is_checked(
    gateway: Running, sns: Any, name: str, attributes: dict[str, str], named: str
) -> None:
    code, message, status = error_of(sns.create_topic, Name=name, Attributes=attributes)
    assert (code, status) == ("InvalidParameter", 400)
    assert named in message
    assert "arn:aws:sns" not in message  # the topic is named as its owner named it
    assert gateway.services.eventing.list_topics() == []


def test_the_destination_guard_is_applied(gateway: Running, sns: Any) -> None:
    previous = set_default_guard(DestinationGuard(mode="production"))
    try:
        code, message, _ = error_of(sns.create_topic, Name="photos", Attributes=AMQP)
    finally:
        set_default_guard(previous)
    assert code == "InvalidParameter"
    assert "127.0.0.1" in message
    assert gateway.services.eventing.list_topics() == []


def test_a_pubsub_endpoint_and_project_are_checked_by_the_guard(gateway: Running, sns: Any) -> None:
    """Issue 24: a Pub/Sub topic's `endpoint` (a gRPC target) is checked when the topic is
    made, in every spelling gRPC takes; and the project must be allowed, endpoint or not."""
    pubsub = {"push-endpoint": "pubsub://projects/my-team/topics/photos"}
    set_default_guard(DestinationGuard("pubsub:projects/my-team", "production"))
    for endpoint, says in (
        ("ipv4:127.0.0.1:8085", "destination 127.0.0.1 is a loopback address"),
        ("dns:///%31%36%39.254.169.254:80", "169.254.169.254 is a cloud metadata address"),
        ("unix:/run/emulator.sock", "'unix:/run/emulator.sock' is a local socket"),
    ):
        attributes = {**pubsub, "endpoint": endpoint}
        code, message, status = error_of(sns.create_topic, Name="photos", Attributes=attributes)
        assert (code, status) == ("InvalidParameter", 400)
        assert says in message
    set_default_guard(DestinationGuard("", "production"))
    for attributes in (pubsub, {**pubsub, "endpoint": "203.0.113.7:443"}):
        code, message, _ = error_of(sns.create_topic, Name="photos", Attributes=attributes)
        assert code == "InvalidParameter"
        assert "add pubsub:projects/my-team to RIPPLE_DESTINATIONS_ALLOW" in message
    assert gateway.services.eventing.list_topics() == []


# --- ListTopics, DeleteTopic --------------------------------------------------------------------


def test_list_topics(gateway: Running, sns: Any) -> None:
    assert sns.list_topics()["Topics"] == []
    for name in ("b", "a", "c"):
        sns.create_topic(Name=name)
    listed = sns.list_topics()
    assert [t["TopicArn"] for t in listed["Topics"]] == [arn_of(gateway, n) for n in "abc"]
    assert "NextToken" not in listed


def test_list_topics_pages_by_100(gateway: Running, sns: Any) -> None:
    store = gateway.services.eventing
    project = gateway.key.project_id
    names = sorted(f"t-{i:03d}" for i in range(205))
    for name in names:
        store.put_topic(project, name, arn_of(gateway, name), "", {}, "test")
    first = sns.list_topics()
    assert len(first["Topics"]) == 100
    assert first["NextToken"]
    pages = list(sns.get_paginator("list_topics").paginate())
    assert [len(p["Topics"]) for p in pages] == [100, 100, 5]
    arns = [t["TopicArn"] for p in pages for t in p["Topics"]]
    assert arns == [arn_of(gateway, n) for n in names]
    code, _, _ = error_of(sns.list_topics, NextToken="not a token!")
    assert code == "InvalidParameter"


def test_delete_topic(gateway: Running, sns: Any) -> None:
    arn = sns.create_topic(Name="photos", Attributes=AMQP)["TopicArn"]
    sns.delete_topic(TopicArn=arn)
    assert sns.list_topics()["Topics"] == []
    assert gateway.services.eventing.get_topic(gateway.key.project_id, "photos") is None
    change = gateway.services.eventing.changes()[0]
    assert change["action"] == "delete-topic"
    assert change["principal"] == f"{gateway.key.access_key_id} (alice)"
    code, message, status = error_of(sns.get_topic_attributes, TopicArn=arn)
    assert (code, status) == ("NotFound", 404)
    assert arn in message
    code, _, status = error_of(
        sns.set_topic_attributes, TopicArn=arn, AttributeName="OpaqueData", AttributeValue="x"
    )
    assert (code, status) == ("NotFound", 404)
    # deleting what is not there is not an error (SNS)
    sns.delete_topic(TopicArn=arn)
    sns.delete_topic(TopicArn=arn_of(gateway, "never-was"))
    code, _, _ = error_of(sns.delete_topic, TopicArn="not-an-arn")
    assert code == "InvalidParameter"


# --- ownership ----------------------------------------------------------------------------------


def test_a_user_manages_only_their_own_topics(gateway: Running, sns: Any, bob: Any) -> None:
    arn = sns.create_topic(Name="photos", Attributes=AMQP)["TopicArn"]
    assert bob.list_topics()["Topics"] == []
    for call, kwargs in (
        (bob.get_topic_attributes, {}),
        (bob.set_topic_attributes, {"AttributeName": "amqp-exchange", "AttributeValue": "x"}),
        (bob.delete_topic, {}),
    ):
        code, message, status = error_of(call, TopicArn=arn, **kwargs)
        assert (code, status) == ("AuthorizationError", 403)
        assert "another project" in message
    # bob's topic of the same name is his own, under his project's ARN
    bobs = bob.create_topic(Name="photos")["TopicArn"]
    assert bobs != arn
    assert bobs.endswith(":photos")
    assert [t["TopicArn"] for t in bob.list_topics()["Topics"]] == [bobs]
    assert [t["TopicArn"] for t in sns.list_topics()["Topics"]] == [arn]
    code, _, _ = error_of(sns.delete_topic, TopicArn=bobs)
    assert code == "AuthorizationError"
    bob.delete_topic(TopicArn=bobs)
    # alice's topic is untouched
    attributes = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert attributes["amqp-exchange"] == "ripple-events"


def test_a_key_restricted_to_a_bucket_cannot_manage_topics(gateway: Running) -> None:
    key, secret = create_key(gateway.services.db, gateway.data_dir, "alice", bucket="photos")
    restricted = sns_client(gateway, key.access_key_id, secret)
    code, _, status = error_of(restricted.create_topic, Name="photos")
    assert (code, status) == ("AuthorizationError", 403)
    code, _, _ = error_of(restricted.list_topics)
    assert code == "AuthorizationError"


# --- credentials --------------------------------------------------------------------------------


def test_credentials_are_refused_over_plain_http(gateway: Running, sns: Any) -> None:
    for attributes in (
        {**AMQP, "push-endpoint": f"amqp://user:{PASSWORD}@127.0.0.1/"},
        {"push-endpoint": f"redis://:{PASSWORD}@127.0.0.1/", "redis-key": "k"},
        {"push-endpoint": "http://127.0.0.1:8080/hook", "secret": PASSWORD},
        {"push-endpoint": "http://127.0.0.1:8080/hook", "header.Authorization": PASSWORD},
    ):
        code, message, _ = error_of(sns.create_topic, Name="photos", Attributes=attributes)
        assert code == "InvalidParameter"
        assert "accepted only over TLS" in message
        assert "topics.allow-secrets-in-cleartext" in message
        assert PASSWORD not in message
    arn = sns.create_topic(Name="photos", Attributes=AMQP)["TopicArn"]
    code, message, _ = error_of(
        sns.set_topic_attributes,
        TopicArn=arn,
        AttributeName="push-endpoint",
        AttributeValue=f"amqp://user:{PASSWORD}@127.0.0.1/",
    )
    assert code == "InvalidParameter"
    assert "accepted only over TLS" in message
    assert gateway.services.eventing.get_topic(gateway.key.project_id, "photos") is not None


def test_credentials_when_the_server_allows_them_are_never_shown(
    gateway: Running, sns: Any
) -> None:
    gateway.services.allow_secrets_in_cleartext = True
    endpoint = f"amqp://user:{PASSWORD}@127.0.0.1/"
    arn = sns.create_topic(Name="photos", Attributes={**AMQP, "push-endpoint": endpoint})[
        "TopicArn"
    ]
    hook = sns.create_topic(
        Name="hook",
        Attributes={
            "push-endpoint": "http://127.0.0.1:8080/hook",
            "secret": PASSWORD,
            "header.X-Api-Key": PASSWORD,
            "header.X-Team": "blue",
        },
    )["TopicArn"]
    token = sns.create_topic(
        Name="nats",
        Attributes={"push-endpoint": f"nats://{PASSWORD}@127.0.0.1:4222"},
    )["TopicArn"]
    shown = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert shown["push-endpoint"] == "amqp://user:***@127.0.0.1/"
    shown = sns.get_topic_attributes(TopicArn=hook)["Attributes"]
    assert (shown["secret"], shown["header.X-Api-Key"], shown["header.X-Team"]) == (
        "***",
        "***",
        "blue",
    )
    shown = sns.get_topic_attributes(TopicArn=token)["Attributes"]
    assert shown["push-endpoint"] == "nats://***@127.0.0.1:4222"
    for topic in (arn, hook, token):
        raw = post(gateway, {"Action": "GetTopicAttributes", "TopicArn": topic})
        assert raw.status_code == 200
        assert PASSWORD not in raw.text
    # what the pipeline reads has them
    stored = gateway.services.eventing.get_topic(gateway.key.project_id, "photos")
    assert stored is not None
    assert stored.push_endpoint == endpoint


def test_credentials_are_accepted_over_https(gateway: Running) -> None:
    """The same app behind TLS: the request's scheme is https."""
    services: Services = gateway.services
    assert not services.allow_secrets_in_cleartext
    endpoint = f"amqp://user:{PASSWORD}@127.0.0.1/"
    form = {
        "Action": "CreateTopic",
        "Name": "photos",
        "Attributes.entry.1.key": "push-endpoint",
        "Attributes.entry.1.value": endpoint,
        "Attributes.entry.2.key": "amqp-exchange",
        "Attributes.entry.2.value": "ripple-events",
    }
    request = signed_post("https://testserver/", form, gateway.key.access_key_id, gateway.secret)

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app(services))
        async with httpx.AsyncClient(transport=transport) as client:
            return await client.post(
                request.url, content=request.body, headers=dict(request.headers.items())
            )

    response = asyncio.run(send())
    assert response.status_code == 200, response.text
    stored = services.eventing.get_topic(gateway.key.project_id, "photos")
    assert stored is not None
    assert stored.push_endpoint == endpoint


# --- the wire -----------------------------------------------------------------------------------


def test_plain_form_post_signed_with_sigv4(gateway: Running) -> None:
    response = post(gateway, {"Action": "CreateTopic", "Name": "photos", "Version": "2010-03-31"})
    assert response.status_code == 200, response.text
    root = ET.fromstring(response.content)
    assert root.tag == f"{{{SNS_NAMESPACE}}}CreateTopicResponse"
    arn = root.findtext("sns:CreateTopicResult/sns:TopicArn", namespaces=NS)
    assert arn == arn_of(gateway, "photos")
    request_id = root.findtext("sns:ResponseMetadata/sns:RequestId", namespaces=NS)
    assert request_id
    assert response.headers["x-amz-request-id"] == request_id
    listed = post(gateway, {"Action": "ListTopics"})
    assert arn in listed.text
    deleted = post(gateway, {"Action": "DeleteTopic", "TopicArn": arn})
    assert deleted.status_code == 200
    assert ET.fromstring(deleted.content).tag == f"{{{SNS_NAMESPACE}}}DeleteTopicResponse"


def test_unknown_action(gateway: Running) -> None:
    response = post(gateway, {"Action": "Publish", "TopicArn": arn_of(gateway, "photos")})
    assert response.status_code == 400
    assert error_code(response) == "InvalidAction"
    assert error_code(post(gateway, {})) == "InvalidAction"


def test_signed_for_s3_is_refused(gateway: Running) -> None:
    response = post(gateway, {"Action": "ListTopics"}, service="s3")
    assert response.status_code == 400
    assert error_code(response) == "AuthorizationHeaderMalformed"
    assert 'incorrect service "s3"' in response.text


def test_s3_requests_signed_for_sns_are_refused(gateway: Running) -> None:
    request = AWSRequest(method="GET", url=gateway.url + "/", headers={})
    request.headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
    creds = Credentials(gateway.key.access_key_id, gateway.secret)
    SigV4Auth(creds, "sns", "us-east-1").add_auth(request)
    response = httpx.get(request.url, headers=dict(request.headers.items()))
    assert response.status_code == 400
    assert "<Code>AuthorizationHeaderMalformed</Code>" in response.text
    assert "<ErrorResponse" not in response.text  # S3's error XML


def test_unsigned_is_refused(gateway: Running) -> None:
    response = httpx.post(
        gateway.url + "/",
        content=urlencode({"Action": "CreateTopic", "Name": "photos"}),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 403
    assert error_code(response) == "AccessDenied"
    assert gateway.services.eventing.list_topics() == []


def test_a_body_other_than_the_one_signed_is_refused(gateway: Running) -> None:
    request = signed_post(
        gateway.url + "/",
        {"Action": "CreateTopic", "Name": "photos"},
        gateway.key.access_key_id,
        gateway.secret,
    )
    response = httpx.post(
        request.url,
        content=urlencode({"Action": "CreateTopic", "Name": "other"}),
        headers=dict(request.headers.items()),
    )
    assert response.status_code == 403
    assert error_code(response) == "SignatureDoesNotMatch"
    assert gateway.services.eventing.list_topics() == []


def test_wrong_secret(gateway: Running) -> None:
    wrong = sns_client(gateway, gateway.key.access_key_id, "not-the-secret")
    code, _, status = error_of(wrong.list_topics)
    assert (code, status) == ("SignatureDoesNotMatch", 403)
    unknown = sns_client(gateway, "RKNOSUCHKEY00000000", "x")
    code, _, _ = error_of(unknown.list_topics)
    assert code == "InvalidClientTokenId"


# --- the setting ----------------------------------------------------------------------------


def test_allow_secrets_in_cleartext_setting(
    tmp_path: Path, db: Metabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no ripple.toml but ours; the data directory in here
    assert load_settings(environ={}).topics_allow_secrets_in_cleartext is False
    variable = "RIPPLE_TOPICS_ALLOW_SECRETS_IN_CLEARTEXT"
    assert load_settings(environ={variable: "true"}).topics_allow_secrets_in_cleartext is True
    assert load_settings(environ={variable: "0"}).topics_allow_secrets_in_cleartext is False
    with pytest.raises(ConfigError, match=r"topics\.allow-secrets-in-cleartext"):
        load_settings(environ={variable: "perhaps"})
    config = tmp_path / "topics.toml"
    config.write_text(
        '[topics]\nallow-secrets-in-cleartext = true\n\n[topics.audit]\npush-endpoint = "none"\n',
        encoding="utf-8",
    )
    settings = load_settings(config, environ={})
    assert settings.topics_allow_secrets_in_cleartext is True
    assert list(settings.topics) == ["audit"]
    assert build_services(settings, db).allow_secrets_in_cleartext is True
    assert not build_services(load_settings(environ={}), db).allow_secrets_in_cleartext
