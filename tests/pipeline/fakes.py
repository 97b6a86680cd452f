"""In-process targets for the pipeline's tests: they answer as told and record what they got."""

from __future__ import annotations

import fcntl
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from ripple.targets.base import OK, Delivery, Outcome, Result


class RecordingTarget:
    """Answers each delivery with `answer(delivery, call number)`; records every call."""

    def __init__(self, name: str, answer: Callable[[Delivery, int], Result] | None = None) -> None:
        self.name = name
        self.answer = answer or (lambda _d, _n: OK)
        self.calls: list[list[Delivery]] = []
        self.acked: list[Delivery] = []
        self.lock = threading.Lock()
        self.opened = self.closed = False

    def open(self) -> None:
        self.opened = True

    def close(self) -> None:
        self.closed = True

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]:
        with self.lock:
            self.calls.append(list(deliveries))
            n = len(self.calls)
            results = [self.answer(d, n) for d in deliveries]
            self.acked.extend(
                d for d, r in zip(deliveries, results, strict=True) if r.outcome is Outcome.OK
            )
        return results

    def acked_ids(self) -> list[str]:
        with self.lock:
            return [d.event_id for d in self.acked]


def delivery(n: int, bucket: str = "photos", name: str = "ObjectCreated:Put") -> Delivery:
    event: dict[str, Any] = {
        "eventVersion": "2.1",
        "eventName": name,
        "eventTime": "2026-11-21T12:00:00.000Z",
        "s3": {
            "configurationId": "ObjectEvents",
            "bucket": {"name": bucket},
            "object": {"key": f"k{n}", "size": 1, "sequencer": f"{n:024X}"},
        },
    }
    return Delivery.of(
        f"0-{n:024X}", event, {"eventName": name, "bucket": bucket, "key": f"k{n}"}, batch_id=1
    )


class FileRecordingTarget:
    """Acknowledges everything and records each delivery as a line of `path`, so a test
    reads what Spark's Python workers (other processes) delivered: `acked`."""

    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.path = path

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]:
        lines = b"".join(
            orjson.dumps(
                [d.event_id, d.message.decode(), d.attributes, d.batch_id],
            )
            + b"\n"
            for d in deliveries
        )
        with self.path.open("ab") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.write(lines)
        return [OK] * len(deliveries)

    @property
    def acked(self) -> list[Delivery]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as f:
            fcntl.flock(f, fcntl.LOCK_SH)
            lines = f.read().splitlines()
        out = []
        for line in lines:
            event_id, message, attributes, batch_id = orjson.loads(line)
            out.append(Delivery(event_id, message.encode(), attributes, batch_id))
        return out


def each_key_once(taken: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Each key's sequencers from (key, sequencer) pairs as a destination took them, repeats
    of one already taken removed: what per-key ordering promises is in sequencer order."""
    seen: set[tuple[str, str]] = set()
    per_key: dict[str, list[str]] = {}
    for key, sequencer in taken:
        if (key, sequencer) not in seen:
            seen.add((key, sequencer))
            per_key.setdefault(key, []).append(sequencer)
    return per_key
