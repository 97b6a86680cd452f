"""The one protocol every destination implements, and what passes through it.

A target publishes a batch of deliveries and answers one result per delivery, in order:
`ok` (acknowledged), `retry` (a failure worth trying again: timeout, 5xx, 408/429,
connection refused) or `permanent` (the destination refused it for good: goes to the dead
letters at once). A failure of one delivery never raises; `publish` raises only for a bug.
Retries, backoff, the retry queue and dead letters are the pipeline's job
(`ripple.pipeline.deliver`); a target only bounds its own in-flight requests.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

import orjson


class Outcome(enum.Enum):
    OK = "ok"
    RETRY = "retry"
    PERMANENT = "permanent"


@dataclass(frozen=True)
class Result:
    outcome: Outcome
    error: str | None = None  # one line, for logs and the dead-letter table

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK


OK = Result(Outcome.OK)


def one_line(e: object) -> str:
    """An error's text on one line (for results, logs and the dead letters)."""
    return " ".join(str(e).split()) or type(e).__name__


@dataclass(frozen=True)
class Delivery:
    """One event on its way to one destination.

    It carries the event as JSON bytes, as the pipeline made it; `event` (the parsed dict)
    and `body` (the message) are built on first use, so a target that stores or forwards
    the bytes never parses them."""

    event_id: str  # stable across redeliveries: consumers de-duplicate on it
    message: bytes  # one S3 event record (an element of "Records"), JSON
    attributes: Mapping[str, str] = field(
        default_factory=dict
    )  # eventName, bucket, key, versionId, sequencer
    batch_id: int = -1  # the Spark batch that delivers it (-1: a retry or a replay)

    @classmethod
    def of(
        cls,
        event_id: str,
        event: Mapping[str, Any],
        attributes: Mapping[str, str] | None = None,
        batch_id: int = -1,
    ) -> Delivery:
        """A delivery of an event given as a mapping."""
        message = orjson.dumps(event, default=_plain)
        return cls(event_id, message, attributes or {}, batch_id)

    @classmethod
    def raw(cls, event_id: str, body: bytes, attributes: Mapping[str, str]) -> Delivery:
        """A delivery whose message is `body` as it is, not an event record: the
        `s3:TestEvent` a new notification sends. `attributes` name its bucket (key "")."""
        delivery = cls(event_id, body, attributes)
        delivery.__dict__["body"] = body  # what cached_property `body` would hold
        return delivery

    @cached_property
    def event(self) -> Mapping[str, Any]:
        """The S3 event record."""
        event: Mapping[str, Any] = orjson.loads(self.message)
        return event

    @cached_property
    def body(self) -> bytes:
        """The message: JSON `{"Records":[event]}`."""
        return b'{"Records":[' + self.message + b"]}"

    @property
    def bucket(self) -> str:
        if "bucket" in self.attributes:
            return self.attributes["bucket"]
        return str(self.event["s3"]["bucket"]["name"])

    @property
    def key(self) -> str:
        """The key as the event record writes it (URL-encoded)."""
        if "key" in self.attributes and not self.attributes["key"]:
            return ""  # a test event
        return str(self.event["s3"]["object"]["key"])

    @property
    def object_path(self) -> str:
        """`<bucket>/<key>`, the same for every event of one object: what a target that
        keeps an object's events together (a partition, a connection) keys them by. From
        the attributes when they name both, else from the event."""
        a = self.attributes
        bucket, key = a.get("bucket"), a.get("key")
        if bucket is None or key is None:
            bucket, key = self.bucket, self.key
        return f"{bucket}/{key}"


def _plain(value: Any) -> Any:
    """orjson's fallback for mappings that are not dicts."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


class Target(Protocol):
    """A destination: opened once, given batches, closed at the end."""

    name: str  # the destination's name, e.g. the topic; retry queues are kept per name

    def open(self) -> None: ...

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]: ...

    def close(self) -> None: ...
