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
from typing import Any, Protocol


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
    """One event on its way to one destination."""

    event_id: str  # stable across redeliveries: consumers de-duplicate on it
    event: Mapping[str, Any]  # one S3 event record (an element of "Records")
    body: bytes  # the message: JSON `{"Records":[event]}`
    attributes: Mapping[str, str] = field(
        default_factory=dict
    )  # eventName, bucket, key, versionId, sequencer
    batch_id: int = -1  # the Spark batch that delivers it (-1: a retry or a replay)

    @property
    def bucket(self) -> str:
        return str(self.event["s3"]["bucket"]["name"])

    @property
    def key(self) -> str:
        return str(self.event["s3"]["object"]["key"])


class Target(Protocol):
    """A destination: opened once, given batches, closed at the end."""

    name: str  # the destination's name, e.g. the topic; retry queues are kept per name

    def open(self) -> None: ...

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]: ...

    def close(self) -> None: ...
