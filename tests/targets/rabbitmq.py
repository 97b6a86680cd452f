"""The local RabbitMQ as the AMQP tests reach it: its URL, connections of the tests' own
(never the target's), and a fresh exchange and queue for a test, deleted afterwards."""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, field
from typing import Any

import pika
from pika.adapters.blocking_connection import BlockingChannel

HOST, PORT = "127.0.0.1", 5672
URL = f"amqp://guest:guest@{HOST}:{PORT}/"


def connect(
    vhost: str = "/", user: str = "guest", password: str = "guest"
) -> pika.BlockingConnection:
    """An independent blocking connection (the tests' own, not the target's)."""
    return pika.BlockingConnection(
        pika.ConnectionParameters(
            HOST,
            PORT,
            vhost,
            pika.PlainCredentials(user, password),
            connection_attempts=1,
            socket_timeout=2,
            blocked_connection_timeout=5,
        )
    )


@dataclass
class Route:
    """A fresh exchange and a durable queue bound to it with the topic name."""

    exchange: str
    topic: str
    queue: str
    vhost: str = "/"
    user: str = "guest"
    password: str = "guest"
    exchange_type: str = "topic"
    conns: list[pika.BlockingConnection] = field(default_factory=list)

    def channel(self) -> BlockingChannel:
        conn = connect(self.vhost, self.user, self.password)
        self.conns.append(conn)
        return conn.channel()

    def declare_exchange(self) -> None:
        self.channel().exchange_declare(self.exchange, self.exchange_type, durable=True)

    def bind_queue(self) -> None:
        channel = self.channel()
        channel.queue_declare(self.queue, durable=True)
        channel.queue_bind(self.queue, self.exchange, self.topic)

    def exchange_exists(self) -> bool:
        try:
            self.channel().exchange_declare(self.exchange, passive=True)
        except pika.exceptions.ChannelClosedByBroker as e:
            if e.reply_code == 404:
                return False
            raise
        return True

    def consume(self, idle_s: float = 1.0) -> list[tuple[Any, Any, Any]]:
        """Every message in the queue: until none has come for `idle_s` seconds."""
        channel = self.channel()
        messages: list[tuple[Any, Any, Any]] = []
        for method, properties, body in channel.consume(
            self.queue, auto_ack=True, inactivity_timeout=idle_s
        ):
            if method is None:
                break
            messages.append((method, properties, body))
        channel.cancel()
        return messages

    def cleanup(self) -> None:
        with contextlib.suppress(pika.exceptions.AMQPError):
            channel = self.channel()
            channel.queue_delete(self.queue)
            channel.exchange_delete(self.exchange)
        for conn in self.conns:
            if conn.is_open:
                with contextlib.suppress(pika.exceptions.AMQPError):  # broken by a restart
                    conn.close()


def fresh_route(**fields: Any) -> Route:
    tag = uuid.uuid4().hex[:10]
    return Route(f"ripple-test-{tag}", f"photos-events-{tag}", f"ripple-test-q-{tag}", **fields)
