"""The private parts of the brokers' client libraries that ripple's targets rely on: each
test fails, saying what changed, when a new version of the library moves or drops one.

- pika keeps private how many bytes a connection has not yet written to its socket
  (`SelectConnection._get_write_buffer_size`): the AMQP target with ack level none counts a
  message delivered only once the socket has taken it.
- redis-py opens a connection's socket in `Connection._connect`: the Redis target overrides
  it to connect to the address the destination guard checked.
- httpx builds its transport's connection pool with no way to pass httpcore a network
  backend: the webhook target replaces the pool (`HTTPTransport._pool`) with one that
  connects through the destination guard.
"""

from __future__ import annotations

from typing import Any

import httpcore
import httpx
import pika
import pytest
import redis

from ripple.targets.amqp import _write_buffer_size
from ripple.targets.guard import DestinationRefused
from ripple.targets.redis import _GuardedConnection
from ripple.targets.webhook import _guarded_transport, _GuardedBackend
from tests.conftest import service_missing
from tests.targets.conftest import Use

AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/"
REDIS_PORT = 6379


def test_pika_counts_the_bytes_a_connection_has_not_written() -> None:
    assert callable(getattr(pika.SelectConnection, "_get_write_buffer_size", None)), (
        "pika.SelectConnection has no _get_write_buffer_size any more: the AMQP target "
        "(ack level none) cannot tell when the socket has taken a message"
    )
    seen: dict[str, int] = {}
    failed: list[str] = []

    def on_open(conn: Any) -> None:
        seen["idle"] = _write_buffer_size(conn)
        conn.channel(on_open_callback=on_channel)

    def on_channel(channel: Any) -> None:
        channel.basic_publish("", "ripple-no-such-queue", b"x" * 100_000)
        seen["published"] = _write_buffer_size(channel.connection)  # the loop has not run
        channel.connection.close()

    def on_open_error(conn: Any, error: BaseException) -> None:
        failed.append(repr(error))
        conn.ioloop.stop()

    conn = pika.SelectConnection(
        pika.URLParameters(AMQP_URL),
        on_open_callback=on_open,
        on_open_error_callback=on_open_error,
        on_close_callback=lambda c, _reason: c.ioloop.stop(),
    )
    conn.ioloop.call_later(10, conn.ioloop.stop)
    conn.ioloop.start()
    if failed:
        service_missing("RabbitMQ at 127.0.0.1:5672", failed[0])
    assert seen["idle"] == 0
    assert seen["published"] >= 100_000, (
        "pika's _get_write_buffer_size no longer counts a published message not yet written"
    )


def test_redis_py_opens_its_socket_in_connection_connect(
    use: Use, dns: dict[str, list[str]]
) -> None:
    assert callable(getattr(redis.Connection, "_connect", None)), (
        "redis.Connection has no _connect any more: the Redis target's connections would "
        "no longer go to the address the destination guard checked"
    )
    use("127.0.0.0/8")
    dns["redis.example.test"] = ["127.0.0.1"]
    conn = _GuardedConnection(host="redis.example.test", port=REDIS_PORT, socket_timeout=5)
    try:
        conn.connect()
    except redis.ConnectionError as e:
        service_missing(f"Redis on 127.0.0.1:{REDIS_PORT}", str(e))
    try:
        conn.send_command("PING")
        assert conn.read_response() in (b"PONG", "PONG")
        assert conn.host == "redis.example.test"  # as given, for redis-py's messages
    finally:
        conn.disconnect()
    dns["redis.example.test"] = ["10.9.8.7"]  # not on the allow list
    refused = _GuardedConnection(host="redis.example.test", port=REDIS_PORT, socket_timeout=5)
    with pytest.raises((DestinationRefused, redis.ConnectionError), match="private address"):
        refused.connect()


def test_httpx_transport_keeps_its_pool_where_the_webhook_replaces_it(use: Use) -> None:
    pool = getattr(httpx.HTTPTransport(), "_pool", None)
    assert isinstance(pool, httpcore.ConnectionPool), (
        "httpx.HTTPTransport keeps no httpcore.ConnectionPool in _pool any more: the "
        "webhook target's requests would not connect through the destination guard"
    )
    use()  # production: loopback refused
    with (
        httpx.Client(transport=_guarded_transport(verify_ssl=True, max_connections=1)) as client,
        pytest.raises(DestinationRefused, match="loopback"),
    ):
        client.get("http://127.0.0.1:9/")  # refused before any connection is tried
    assert isinstance(_GuardedBackend(), httpcore.NetworkBackend)
