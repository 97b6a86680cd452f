"""`OpaqueData`: a topic argument copied into each of its events as `opaqueData`, as a peer
object store's topics do, so a consumer can tell which topic (or tenant) an event came by.

A wrapper around the topic's push target: the event bytes are extended, never re-parsed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import orjson

from ripple.targets.base import Delivery, Result, Target


def with_opaque_data(message: bytes, opaque: bytes) -> bytes:
    """The event JSON object `message` with `"opaqueData": <opaque>` as its last member."""
    body = message.rstrip()
    if not body.endswith(b"}"):
        raise ValueError("an event message must be a JSON object")
    head = body[:-1].rstrip()
    separator = b"" if head.endswith(b"{") else b","
    return head + separator + b'"opaqueData":' + opaque + b"}"


class OpaqueDataTarget:
    def __init__(self, target: Target, opaque_data: str) -> None:
        self.target = target
        self.name = target.name
        self._opaque = orjson.dumps(opaque_data)

    def open(self) -> None:
        self.target.open()

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]:
        return self.target.publish(
            [replace(d, message=with_opaque_data(d.message, self._opaque)) for d in deliveries]
        )

    def close(self) -> None:
        self.target.close()
