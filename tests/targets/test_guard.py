"""The destination guard: its allow list, what production mode refuses (at configuration and
at connection time, after DNS changes), and each push target answering `permanent` without
connecting when the guard refuses, and delivering when the allow list lets the address in.

Names resolve through a fake `socket.getaddrinfo` (a table the test fills; literal IPs and
`localhost` go to the real resolver, anything else fails): no test looks up a public name.
Every test leaves the process-wide guard as it found it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pika
import pytest
import redis
from pika.adapters.select_connection import SelectConnection

from ripple.config import Settings, load_settings
from ripple.notifications.endpoints import parse_endpoint
from ripple.notifications.topics import Topic
from ripple.targets import amqp, destinations
from ripple.targets.amqp import AmqpTarget
from ripple.targets.base import Outcome, Result
from ripple.targets.guard import (
    DestinationGuard,
    DestinationRefused,
    default_guard,
    set_default_guard,
)
from ripple.targets.mqtt import MqttTarget
from ripple.targets.mqtt import from_arguments as mqtt_target
from ripple.targets.nats import from_arguments as nats_target
from ripple.targets.pubsub import PubSubTarget
from ripple.targets.redis import from_arguments as redis_target
from ripple.targets.webhook import WebhookConfig, WebhookTarget
from tests.conftest import service_missing
from tests.targets.conftest import Use, delivery
from tests.targets.pubsub_fake import FakePublisher
from tests.targets.rabbitmq import URL as AMQP_URL
from tests.targets.rabbitmq import fresh_route
from tests.targets.webhook_server import HookServer

PUBLIC = "203.0.113.7"  # TEST-NET-3: a stand-in for a public address
ALLOW_LOOPBACK = {"RIPPLE_MODE": "production", "RIPPLE_DESTINATIONS_ALLOW": "127.0.0.1/32"}


def refused(action: Callable[[], object]) -> str:
    """The message of the `DestinationRefused` that `action` raises (one line)."""
    with pytest.raises(DestinationRefused) as caught:
        action()
    message = str(caught.value)
    assert "\n" not in message
    assert "RIPPLE_DESTINATIONS_ALLOW" in message
    return message


# the allow list ----------------------------------------------------------------------------


def test_the_allow_list_parses_cidrs_addresses_and_patterns() -> None:
    guard = DestinationGuard(
        " 10.0.0.0/8, ::1/128 ,192.0.2.1,[fe80::1], Hooks.Example.COM, *.example.org., "
    )
    assert [str(n) for n in guard.networks] == [
        "10.0.0.0/8",
        "::1/128",
        "192.0.2.1/32",
        "fe80::1/128",
    ]
    assert guard.patterns == ("hooks.example.com", "*.example.org")
    assert guard.mode == "dev"
    assert DestinationGuard().networks == ()
    assert DestinationGuard().patterns == ()


@pytest.mark.parametrize(
    ("allow", "message"),
    [
        ("10.0.0.0/8,10.1.2.3/8", "entry '10.1.2.3/8' has host bits set; did you mean 10.0.0.0/8?"),
        ("10.0.0.0/33", "entry '10.0.0.0/33' is not a CIDR"),
        ("https://hooks.example.com", "entry 'https://hooks.example.com' is a URL"),
        ("hooks.example.com:443", "entry 'hooks.example.com:443' is neither a CIDR"),
        ("*", "entry '*' is neither a CIDR"),
        ("a.*.example.com", "entry 'a.*.example.com' is neither a CIDR"),
        ("bad host", "entry 'bad host' is neither a CIDR"),
    ],
)
def test_a_bad_entry_is_one_line_naming_it(allow: str, message: str) -> None:
    with pytest.raises(
        ValueError, match=r"^RIPPLE_DESTINATIONS_ALLOW \(destinations\.allow\): "
    ) as caught:
        DestinationGuard(allow, "production")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode must be one of dev, production, not 'staging'"):
        DestinationGuard("", "staging")


def test_the_guard_of_the_settings_and_the_default_guard() -> None:
    guard = Settings(mode="production", destinations_allow="10.0.0.0/8,*.internal.test").guard
    assert (guard.mode, guard.enforcing) == ("production", True)
    assert [str(n) for n in guard.networks] == ["10.0.0.0/8"]
    assert guard.patterns == ("*.internal.test",)
    default = default_guard()
    assert (default.mode, default.networks, default.patterns) == ("dev", (), ())
    assert set_default_guard(guard) is default
    assert default_guard() is guard
    assert not guard.secrets_in_cleartext
    allowing = Settings(topics_allow_secrets_in_cleartext=True).guard
    assert allowing.secrets_in_cleartext
    assert "secrets_in_cleartext=True" in repr(allowing)


# what is refused ---------------------------------------------------------------------------


def test_dev_mode_allows_everything_and_resolves_nothing(dns: dict[str, list[str]]) -> None:
    guard = DestinationGuard()
    for host in ("127.0.0.1", "::1", "169.254.169.254", "10.1.2.3", "localhost", "nowhere.test"):
        guard.check_host(host)
        assert guard.check_address(host, 80) == [host]


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.5.4", "private"),
        ("192.168.0.1", "private"),
        ("169.254.169.254", "cloud metadata"),
        ("169.254.1.1", "link-local"),
        ("100.100.100.200", "cloud metadata"),
        ("fe80::1", "link-local"),
        ("[::1]", "loopback"),
        ("fd00:ec2::254", "cloud metadata"),
        ("fd12:3456::1", "private"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.251", "multicast"),
        ("240.0.0.1", "reserved"),
        ("::ffff:127.0.0.1", "loopback"),
        ("168.63.129.16", "cloud metadata"),
        ("192.0.0.192", "special-purpose"),
        ("198.18.0.1", "special-purpose"),
    ],
)
def test_production_refuses_addresses_naming_the_reason(use: Use, host: str, reason: str) -> None:
    guard = use()
    message = refused(lambda: guard.check_host(host))
    assert host.strip("[]") in message or "IPv4" in message
    assert f"{reason} address, refused in production mode" in message
    assert refused(lambda: guard.check_address(host, 443)) == message


def test_production_allows_public_addresses(use: Use) -> None:
    guard = use()
    for host in (PUBLIC, "8.8.8.8", "2001:db8::1", "2a00:1450:4001::200e"):
        guard.check_host(host)
        assert guard.check_address(host, 443) == [host]


def test_a_cidr_of_the_allow_list_lets_an_address_through(use: Use) -> None:
    guard = use("127.0.0.0/8, fd00::/8")
    guard.check_host("127.0.0.1")
    assert guard.check_address("127.0.0.1", 5672) == ["127.0.0.1"]
    assert guard.check_address("::ffff:127.0.0.2", 5672) == ["::ffff:127.0.0.2"]
    assert guard.check_address("fd00:ec2::254", 80) == ["fd00:ec2::254"]
    message = refused(lambda: guard.check_address("10.0.0.1", 80))
    assert "add 10.0.0.1/32 to RIPPLE_DESTINATIONS_ALLOW" in message


def test_a_name_is_judged_by_every_address_it_resolves_to(
    use: Use, dns: dict[str, list[str]]
) -> None:
    guard = use()
    dns["hooks.internal.test"] = ["10.0.0.5"]
    dns["mixed.example.test"] = [PUBLIC, "192.168.1.9"]
    dns["public.example.test"] = [PUBLIC, "2001:db8::7"]
    message = refused(lambda: guard.check_host("hooks.internal.test"))
    assert message.startswith(
        "destination 'hooks.internal.test' resolves to 10.0.0.5, a private address"
    )
    assert "add hooks.internal.test (or 10.0.0.5/32) to RIPPLE_DESTINATIONS_ALLOW" in message
    assert "192.168.1.9" in refused(lambda: guard.check_address("mixed.example.test", 443))
    guard.check_host("public.example.test")
    assert guard.check_address("public.example.test", 443) == [PUBLIC, "2001:db8::7"]
    assert "loopback" in refused(lambda: guard.check_host("localhost"))


def test_a_host_pattern_allows_a_name_whatever_it_resolves_to(
    use: Use, dns: dict[str, list[str]]
) -> None:
    guard = use("*.internal.test, rabbit.example.test")
    dns["hooks.internal.test"] = ["10.0.0.5"]
    dns["deep.hooks.internal.test"] = ["10.0.0.6"]
    dns["internal.test"] = ["10.0.0.7"]
    dns["rabbit.example.test"] = ["10.0.0.8"]
    dns["other.example.test"] = ["10.0.0.9"]
    for host in ("hooks.internal.test", "Deep.Hooks.INTERNAL.test.", "rabbit.example.test"):
        guard.check_host(host)
        assert guard.check_address(host, 443) == [host]  # the library resolves it itself
    refused(lambda: guard.check_host("internal.test"))  # *. is for the names below it
    refused(lambda: guard.check_host("other.example.test"))
    refused(lambda: guard.check_host("10.0.0.5"))  # a pattern never matches an address


def test_a_name_that_does_not_resolve_passes_configuration_but_cannot_connect(
    use: Use, dns: dict[str, list[str]]
) -> None:
    guard = use()
    guard.check_host("not-yet.example.test")
    with pytest.raises(OSError, match="not in the test's DNS"):
        guard.check_address("not-yet.example.test", 443)


def test_a_dns_change_after_configuration_is_refused_at_connection_time(
    use: Use, dns: dict[str, list[str]]
) -> None:
    guard = use()
    dns["hooks.example.test"] = [PUBLIC]
    guard.check_host("hooks.example.test")  # configuration: a public address
    assert guard.check_address("hooks.example.test", 443) == [PUBLIC]
    dns["hooks.example.test"] = ["169.254.169.254"]  # the name now points at the metadata
    message = refused(lambda: guard.check_address("hooks.example.test", 443))
    assert "'hooks.example.test' resolves to 169.254.169.254, a cloud metadata address" in message


# configuration time: the pipeline's topics -------------------------------------------------


def test_push_target_refuses_a_destination_at_configuration_time(
    use: Use, dns: dict[str, list[str]]
) -> None:
    use()
    dns["rabbit.internal.test"] = ["10.0.0.5"]
    topics = [
        Topic("hooks", "http://127.0.0.1:9/hook"),
        Topic("rabbit", "amqp://rabbit.internal.test", {"amqp-exchange": "events"}),
        Topic("stream", "redis://[::1]:6379", {"redis-key": "events"}),
        Topic("kafka", "kafka://kafka.example.test:9092,rabbit.internal.test:9092"),
        Topic("projects/my-team/topics/photos", "", {"endpoint": "169.254.169.254:8085"}),
    ]
    for topic in topics:
        with pytest.raises(ValueError, match=f"^topic {topic.name!r}: destination ") as caught:
            destinations.push_target(topic)
        assert "refused in production mode" in str(caught.value)
    # not refused: a name that does not resolve yet, a public address, and in dev mode
    assert destinations.push_target(Topic("later", "nats://nats.example.test")) is not None
    assert destinations.push_target(Topic("public", f"mqtt://{PUBLIC}")) is not None
    use("", "dev")
    for topic in topics:
        assert destinations.push_target(topic) is not None


def test_a_malformed_allow_list_stops_the_pipeline_and_the_gateway() -> None:
    from ripple.gateway.server import GatewayError, build_services
    from ripple.pipeline.service import Pipeline, PipelineError

    settings = Settings(mode="production", destinations_allow="10.0.0.0/8,https://hooks.test")
    with pytest.raises(PipelineError, match=r"entry 'https://hooks\.test' is a URL"):
        Pipeline.from_settings(settings)
    with pytest.raises(GatewayError, match=r"entry 'https://hooks\.test' is a URL"):
        build_services(settings, None)  # type: ignore[arg-type]  # fails before using it


# connection time: each target --------------------------------------------------------------


@pytest.fixture
def hooks() -> Iterator[HookServer]:
    server = HookServer()
    yield server
    server.closing.set()
    server.stop()


def publish_once(target: Any, n: int = 2) -> list[Result]:
    target.open()
    try:
        return list(target.publish([delivery(f"2026/cat-{i}.jpg", n=i) for i in range(n)]))
    finally:
        target.close()


def assert_refused(results: list[Result], address: str = "127.0.0.1") -> None:
    for result in results:
        assert result.outcome is Outcome.PERMANENT, result
        assert result.error is not None
        assert f"destination {address} is a loopback address, refused" in result.error


def test_webhook_refused_is_permanent_and_sends_nothing(use: Use, hooks: HookServer) -> None:
    use()
    assert_refused(publish_once(WebhookTarget(WebhookConfig(url=hooks.url))))
    assert hooks.requests == []


def test_webhook_allowed_delivers_to_the_checked_address(
    hooks: HookServer, dns: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no ripple.toml of the working directory
    set_default_guard(load_settings(environ=ALLOW_LOOPBACK).guard)
    assert publish_once(WebhookTarget(WebhookConfig(url=hooks.url))) == [Result(Outcome.OK)] * 2
    # a name: the request goes to the address the guard checked, with the name as Host
    dns["hooks.example.test"] = ["127.0.0.1"]
    url = hooks.url.replace("127.0.0.1", "hooks.example.test")
    assert publish_once(WebhookTarget(WebhookConfig(url=url)), 1) == [Result(Outcome.OK)]
    assert hooks.requests[-1].headers["host"] == url.split("/")[2]
    # re-pointed at an address the allow list does not hold: refused at the next connection
    dns["hooks.example.test"] = ["10.9.8.7"]
    [result] = publish_once(WebhookTarget(WebhookConfig(url=url)), 1)
    assert result.outcome is Outcome.PERMANENT
    assert "'hooks.example.test' resolves to 10.9.8.7, a private address" in (result.error or "")
    assert len(hooks.requests) == 3


def test_webhook_name_that_does_not_resolve_is_retry(use: Use, dns: dict[str, list[str]]) -> None:
    use()
    target = WebhookTarget(WebhookConfig(url="http://gone.example.test/hook", timeout_s=1))
    [result] = publish_once(target, 1)
    assert result.outcome is Outcome.RETRY
    assert "not in the test's DNS" in (result.error or "")


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[pika.ConnectionParameters]:
    """The parameters of every connection the AMQP target opens."""
    opened: list[pika.ConnectionParameters] = []
    real = SelectConnection

    def spy(params: pika.ConnectionParameters, **kwargs: Any) -> Any:
        opened.append(params)
        return real(params, **kwargs)

    monkeypatch.setattr(amqp, "SelectConnection", spy)
    return opened


def amqp_target(exchange: str, url: str = AMQP_URL, name: str = "photos-events") -> AmqpTarget:
    return amqp.from_arguments(name, url, {"amqp-exchange": exchange, "timeout": "5"})


def test_amqp_refused_is_permanent_without_connecting(
    use: Use, connections: list[pika.ConnectionParameters]
) -> None:
    use()
    assert_refused(publish_once(amqp_target("ripple-guard-test")))
    assert connections == []


def test_amqp_allowed_delivers_through_the_checked_address(
    connections: list[pika.ConnectionParameters],
    dns: dict[str, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(tmp_path)
    set_default_guard(load_settings(environ=ALLOW_LOOPBACK).guard)
    route = fresh_route()
    try:
        try:
            route.declare_exchange()
        except pika.exceptions.AMQPError as e:
            service_missing("RabbitMQ at 127.0.0.1:5672", repr(e))
        route.bind_queue()
        dns["rabbit.example.test"] = ["127.0.0.1"]
        for url in (AMQP_URL, AMQP_URL.replace("127.0.0.1", "rabbit.example.test")):
            target = amqp_target(route.exchange, url, route.topic)
            assert publish_once(target, 1) == [Result(Outcome.OK)]
        assert len(route.consume(idle_s=0.5)) == 2
        assert connections
        assert {p.host for p in connections} == {"127.0.0.1"}
    finally:
        route.cleanup()


def test_nats_refused_is_permanent_and_allowed_connects(use: Use) -> None:
    use()
    endpoint = parse_endpoint("nats://127.0.0.1:4222")
    subject = f"ripple.guard.{uuid.uuid4().hex[:8]}"
    target = nats_target("guard", endpoint, {"nats-subject": subject, "timeout": "2"})
    assert_refused(publish_once(target))
    assert not target.connected
    use("127.0.0.1/32")
    [result] = publish_once(target, 1)
    assert result.outcome is Outcome.RETRY, result  # connected: no stream takes the subject
    if "not connected" in (result.error or ""):
        service_missing("NATS at 127.0.0.1:4222", result.error or "")
    assert "no stream captures subject" in (result.error or "")


def test_mqtt_refused_is_permanent_and_allowed_delivers(use: Use) -> None:
    use()
    endpoint = parse_endpoint("mqtt://127.0.0.1:1883")
    target = mqtt_target("ripple-guard-test", endpoint, {"timeout": "2"})
    assert isinstance(target, MqttTarget)
    assert_refused(publish_once(target))
    use("127.0.0.1/32")
    [result] = publish_once(target, 1)
    if result.outcome is Outcome.RETRY and "not connected" in (result.error or ""):
        service_missing("MQTT at 127.0.0.1:1883", result.error or "")
    assert result == Result(Outcome.OK)


def test_redis_refused_is_permanent_and_allowed_delivers(use: Use) -> None:
    use()
    key = f"ripple-guard-test-{uuid.uuid4().hex[:12]}"
    endpoint = parse_endpoint("redis://127.0.0.1:6379/0")
    target = redis_target("guard", endpoint, {"redis-key": key, "timeout": "2"})
    assert_refused(publish_once(target))
    use("127.0.0.0/8")
    server = redis.Redis(host="127.0.0.1", port=6379, socket_timeout=5)
    try:
        server.ping()
    except redis.RedisError as e:
        service_missing("Redis on 127.0.0.1:6379", str(e))
    try:
        assert publish_once(target) == [Result(Outcome.OK)] * 2
        assert server.xlen(key) == 2
    finally:
        server.delete(key)
        server.close()


def test_pubsub_endpoint_refused_is_permanent_and_allowed_delivers(use: Use) -> None:
    use()
    with FakePublisher() as fake:
        target = PubSubTarget("projects/p/topics/t", endpoint=fake.endpoint, timeout_s=5)
        assert_refused(publish_once(target))
        assert fake.calls == 0
        use("127.0.0.1/32")
        assert publish_once(target) == [Result(Outcome.OK)] * 2
        assert len(fake.messages) == 2


def test_api_topics_name_only_allowed_google_pubsub_projects(use: Use) -> None:
    """ripple publishes to Google with its own credentials: in production an API topic (one
    with a label) may name a Pub/Sub topic only in a project the allow list names; a topic
    of the configuration file (no label) is the operator's and is not checked."""
    api = Topic("arn:aws:sns:us-east-1:p:t", "pubsub://projects/other-team/topics/events", {}, "t")
    configured = Topic("projects/other-team/topics/events")
    use()
    with pytest.raises(ValueError, match=r"add pubsub:projects/other-team to RIPPLE_DEST"):
        destinations.push_target(api)
    assert isinstance(destinations.push_target(configured), PubSubTarget)
    use("pubsub:projects/other-team")
    assert isinstance(destinations.push_target(api), PubSubTarget)
    use(mode="dev")
    assert isinstance(destinations.push_target(api), PubSubTarget)
    with pytest.raises(ValueError, match="not pubsub:projects/GCP_PROJECT_ID"):
        DestinationGuard("pubsub:projects/X", "production")
