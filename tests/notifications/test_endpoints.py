"""The one destination-URI parser: what each scheme means, its defaults, and one clear line
for anything malformed or unsupported."""

from __future__ import annotations

import pytest

from ripple.notifications.endpoints import parse_endpoint


@pytest.mark.parametrize(
    ("uri", "kind", "host", "port", "path"),
    [
        ("http://127.0.0.1/hook", "webhook", "127.0.0.1", 80, "/hook"),
        ("https://hooks.example:8443/s3", "webhook", "hooks.example", 8443, "/s3"),
        ("amqp://127.0.0.1", "amqp", "127.0.0.1", 5672, "/"),
        ("amqps://broker:5000/events", "amqp", "broker", 5000, "events"),
        ("amqp://127.0.0.1/%2F", "amqp", "127.0.0.1", 5672, "/"),
        ("nats://127.0.0.1", "nats", "127.0.0.1", 4222, ""),
        ("mqtt://127.0.0.1:1884", "mqtt", "127.0.0.1", 1884, ""),
        ("mqtts://127.0.0.1", "mqtt", "127.0.0.1", 8883, ""),
        ("redis://127.0.0.1", "redis", "127.0.0.1", 6379, "0"),
        ("redis://127.0.0.1:6380/3", "redis", "127.0.0.1", 6380, "3"),
        ("pubsub://projects/p/topics/t", "pubsub", "", 0, "projects/p/topics/t"),
        ("kafka://127.0.0.1", "kafka", "127.0.0.1", 9092, ""),
    ],
)
def test_schemes_and_defaults(uri: str, kind: str, host: str, port: int, path: str) -> None:
    endpoint = parse_endpoint(uri)
    assert (endpoint.kind, endpoint.host, endpoint.port, endpoint.path) == (kind, host, port, path)


def test_kafka_lists_its_bootstrap_servers() -> None:
    endpoint = parse_endpoint("kafka://k1.example:9093,[::1],10.0.0.2:19092")
    assert endpoint.servers == (("k1.example", 9093), ("::1", 9092), ("10.0.0.2", 19092))
    assert (endpoint.host, endpoint.port) == ("k1.example", 9093)


def test_amqp_credentials_default_to_guest_and_are_kept_out_of_sight() -> None:
    assert (parse_endpoint("amqp://127.0.0.1").username, parse_endpoint("amqp://h").password) == (
        "guest",
        "guest",
    )
    endpoint = parse_endpoint("amqp://alice:s%40cret@127.0.0.1:5672/prod")
    assert (endpoint.username, endpoint.password, endpoint.path) == ("alice", "s@cret", "prod")
    assert "s@cret" not in repr(endpoint)
    assert "s%40cret" not in repr(endpoint)
    assert endpoint.redacted == "amqp://alice:***@127.0.0.1:5672/prod"
    assert endpoint.tls is False
    assert parse_endpoint("amqps://h").tls is True


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("kafkas://127.0.0.1", "has 'kafkas'; supported: http"),
        ("127.0.0.1:5672", "has no scheme"),
        ("amqp://", "names no host"),
        ("nats://127.0.0.1:0", "port must be a number from 1 to 65535"),
        ("mqtt://127.0.0.1:99999", "port must be a number from 1 to 65535"),
        ("mqtt://127.0.0.1:x", "port must be a number from 1 to 65535"),
        ("redis://127.0.0.1/zero", "the database must be a number"),
        ("nats://127.0.0.1/events", "use the nats-subject argument|name the subject"),
        ("mqtt://127.0.0.1/a/b", "mqtt-topic argument"),
        ("amqp://127.0.0.1/?heartbeat=5", "query or fragment"),
    ],
)
def test_malformed_or_unsupported(uri: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as e:
        parse_endpoint(uri)
    assert "\n" not in str(e.value)
