"""The pull-subscriptions target: a topic's events stored in each of its subscriptions.

Storing is one transaction per batch and idempotent on (subscription, event id), so a batch
Spark replays after a crash, or a retried delivery, is stored once: delivery into pull
subscriptions is exactly once. A database error answers `retry` for the whole batch (nothing
of it was stored); a topic without subscriptions acknowledges everything and stores nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from ripple.subscriptions.store import SubscriptionStore
from ripple.targets.base import OK, Delivery, Outcome, Result

__all__ = ["SubscriptionTarget"]

_MAX_ERROR = 500


class SubscriptionTarget:
    """The pull subscriptions of one topic, behind the `Target` protocol."""

    def __init__(self, store: SubscriptionStore, topic: str) -> None:
        self.store = store
        self.topic = topic
        self.name = f"subscriptions:{topic}"

    def open(self) -> None:
        pass

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]:
        if not deliveries:
            return []
        try:
            # each row records its delivery's own batch id: retries (-1) may ride along
            self.store.store(self.topic, deliveries)
        except sa.exc.SQLAlchemyError as e:
            return [Result(Outcome.RETRY, _one_line(e))] * len(deliveries)
        return [OK] * len(deliveries)

    def close(self) -> None:
        pass


def _one_line(error: sa.exc.SQLAlchemyError) -> str:
    cause = getattr(error, "orig", None) or error
    lines = str(cause).strip().splitlines()
    text = f"{type(cause).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text[:_MAX_ERROR]
