"""How hard to try a destination: the retry policy of a target.

A topic's `time-to-live`, `max-retries`, `retry-sleep-duration`, `persistent` and
`ordering` arguments set it (`ripple.targets.destinations.policy_of`); the pipeline's delivery
(`ripple.pipeline.deliver`) follows it: a few attempts within the batch with exponential
backoff and jitter, then the target's durable retry queue, then the dead letters; with
`ordering = per-key`, each object's events in sequencer order through all of them
(`ripple.pipeline.ordering`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try a destination (per destination: `time-to-live`, `max-retries`)."""

    attempts_in_batch: int = 3  # tries within the batch before queueing
    base_delay_s: float = 0.05  # first backoff; doubles each attempt, with jitter
    max_delay_s: float = 60.0  # backoff cap (queue drains)
    time_to_live_s: float = 24 * 3600.0  # past this since the first failure: dead letter
    max_retries: int = 1000  # queue attempts before dead letter
    persistent: bool = True  # False: no retry queue; what the batch cannot deliver is buried
    per_key_order: bool = False  # `ordering = per-key`: a key's events in sequencer order

    def backoff_s(self, attempt: int, rng: random.Random) -> float:
        """Delay before attempt `attempt + 1` (attempt counts from 1): exponential, capped,
        with jitter (between half and all of the ceiling) so many failed events do not
        come back at once."""
        ceiling = min(self.max_delay_s, self.base_delay_s * (2 ** (attempt - 1)))
        return rng.uniform(ceiling / 2, ceiling)
