"""Destination URIs: one parser for every push endpoint a topic can name.

    http[s]://host[:port]/path                      a webhook (ports 80 / 443)
    amqp[s]://[user:password@]host[:port][/vhost]   RabbitMQ (5672 / 5671, guest/guest, vhost /)
    nats://[user:password@]host[:port]              NATS JetStream (4222)
    mqtt[s]://[user:password@]host[:port]           MQTT (1883 / 8883)
    redis://[:password@]host[:port][/db]            Redis (6379, db 0)
    kafka://host[:port][,host[:port]…]              Kafka bootstrap servers (9092)
    pubsub://projects/P/topics/T                    Google Pub/Sub
    snapshot://NAME                                 a snapshotter of the configuration

Anything else, or a malformed one, is `ValueError` with one line saying what is wrong and
what is accepted. The password is kept out of `repr` and of `redacted`. A Kafka endpoint
takes no user info: its credentials are the topic's `user-name` and `password` arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import SplitResult, unquote, urlsplit

__all__ = ["KINDS", "Endpoint", "EndpointKind", "parse_endpoint"]

EndpointKind = Literal["webhook", "pubsub", "amqp", "nats", "mqtt", "redis", "kafka", "snapshot"]
KINDS: dict[str, EndpointKind] = {
    "http": "webhook",
    "https": "webhook",
    "amqp": "amqp",
    "amqps": "amqp",
    "nats": "nats",
    "mqtt": "mqtt",
    "mqtts": "mqtt",
    "redis": "redis",
    "kafka": "kafka",
    "pubsub": "pubsub",
    "snapshot": "snapshot",
}
DEFAULT_PORTS = {
    "http": 80,
    "https": 443,
    "amqp": 5672,
    "amqps": 5671,
    "nats": 4222,
    "mqtt": 1883,
    "mqtts": 8883,
    "redis": 6379,
    "kafka": 9092,
}
SUPPORTED = (
    "http[s]://host[:port]/path, amqp[s]://[user:password@]host[:port][/vhost], "
    "nats://host[:port], mqtt[s]://[user:password@]host[:port], "
    "redis://[:password@]host[:port][/db], kafka://host[:port][,host[:port]…], "
    "pubsub://projects/P/topics/T, snapshot://NAME"
)


@dataclass(frozen=True)
class Endpoint:
    """A parsed push endpoint. `path` is the vhost (AMQP), the database number (Redis), the
    topic (Pub/Sub) or the URL path (webhooks). `servers` are every (host, port) a Kafka
    endpoint lists (`host` and `port` are the first)."""

    uri: str = field(repr=False)
    scheme: str
    host: str = ""
    port: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    path: str = ""  # …or the snapshotter's name
    servers: tuple[tuple[str, int], ...] = ()  # Kafka: the bootstrap servers

    @property
    def kind(self) -> EndpointKind:
        return KINDS[self.scheme]

    @property
    def tls(self) -> bool:
        return self.scheme in ("https", "amqps", "mqtts")

    @property
    def redacted(self) -> str:
        """The URI without its password, for logs and tables."""
        if self.password is None:
            return self.uri
        return self.uri.replace(f":{_quoted_password(self.uri)}@", ":***@", 1)


def _quoted_password(uri: str) -> str:
    netloc = urlsplit(uri).netloc
    userinfo = netloc.rpartition("@")[0]
    return userinfo.partition(":")[2]


def parse_endpoint(uri: str) -> Endpoint:
    """Parse and check a destination URI (see the module docstring)."""
    text = uri.strip()
    scheme, sep, _ = text.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in KINDS:
        shown = repr(scheme) if sep else "no scheme"
        raise ValueError(f"endpoint {uri!r} has {shown}; supported: {SUPPORTED}")
    if scheme == "pubsub":
        return Endpoint(uri, scheme, path=text[len("pubsub://") :])
    if scheme == "snapshot":
        name = text[len("snapshot://") :]
        if not name or not name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(
                f"endpoint {uri!r}: name a snapshotter of the configuration, e.g. "
                "snapshot://default (letters, digits, '-' and '_')"
            )
        return Endpoint(uri, scheme, path=name)
    if scheme == "kafka":
        return _kafka(uri, text)
    parts = urlsplit(text)
    host = parts.hostname or ""
    if not host:
        raise ValueError(f"endpoint {uri!r} names no host; e.g. {scheme}://127.0.0.1")
    port = _port(uri, parts, scheme)
    username = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    if (parts.query or parts.fragment) and scheme not in ("http", "https"):
        raise ValueError(
            f"endpoint {uri!r} has a query or fragment; give options as topic arguments"
        )
    path = parts.path
    if scheme in ("amqp", "amqps"):
        vhost = unquote(path[1:]) if len(path) > 1 else "/"
        return Endpoint(uri, scheme, host, port, username or "guest", password or "guest", vhost)
    if scheme == "redis":
        db = path[1:] if path.startswith("/") else path
        if db and not db.isdigit():
            raise ValueError(f"endpoint {uri!r}: the database must be a number, e.g. /0")
        return Endpoint(uri, scheme, host, port, username, password, db or "0")
    if scheme in ("nats", "mqtt", "mqtts") and path not in ("", "/"):
        argument = "nats-subject" if scheme == "nats" else "mqtt-topic"
        raise ValueError(
            f"endpoint {uri!r} has a path; {scheme} endpoints are host[:port] "
            f"(name the subject or topic with the {argument} argument)"
        )
    return Endpoint(uri, scheme, host, port, username, password, path)


def _kafka(uri: str, text: str) -> Endpoint:
    """`kafka://host[:port][,host[:port]…]`: the bootstrap servers, nothing else."""
    rest = text[len("kafka://") :]
    if "@" in rest:
        raise ValueError(
            f"endpoint {uri!r} has user info; give Kafka credentials as the topic's "
            "user-name and password arguments"
        )
    servers, path = rest.partition("/")[::2]
    if path or any(c in rest for c in "?#"):
        raise ValueError(
            f"endpoint {uri!r} has a path or query; kafka endpoints are "
            "host[:port][,host[:port]…] (name the Kafka topic with the kafka-topic argument)"
        )
    found: list[tuple[str, int]] = []
    for entry in servers.split(","):
        parts = urlsplit(f"kafka://{entry.strip()}")
        host = parts.hostname or ""
        if not host:
            raise ValueError(
                f"endpoint {uri!r} has an empty server; e.g. kafka://127.0.0.1:9092,10.0.0.2"
            )
        found.append((host, _port(uri, parts, "kafka")))
    host, port = found[0]
    return Endpoint(uri, "kafka", host, port, servers=tuple(found))


def _port(uri: str, parts: SplitResult, scheme: str) -> int:
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"endpoint {uri!r}: the port must be a number from 1 to 65535") from None
    if port == 0:
        raise ValueError(f"endpoint {uri!r}: the port must be a number from 1 to 65535")
    return port or DEFAULT_PORTS[scheme]
