"""Per-project rate limits, one budget across every gateway over the metabase: a token
bucket per project, refilled continuously (`ripple.metabase.rate_limits`).

DeleteObject and DeleteObjects each take one token (a bulk delete of 1000 keys is ONE
operation); an empty bucket answers 503 `SlowDown`, as S3 does when a client goes too fast.
"""

from __future__ import annotations

import uuid

from ripple.gateway.errors import S3Error
from ripple.metabase import Metabase
from ripple.metabase.rate_limits import take_token


class RateLimit:
    """`rate` requests per second per project, in bursts of up to `burst`, named `name` in
    the metabase (every gateway with the same name shares the budget)."""

    def __init__(self, db: Metabase, name: str, rate: float, burst: float) -> None:
        if rate <= 0 or burst <= 0:
            raise ValueError("rate and burst must be positive")
        self.db = db
        self.name = name
        self.rate = rate
        self.burst = burst

    def take(self, project_id: uuid.UUID) -> None:
        """One token, or `SlowDown`."""
        if not take_token(self.db, project_id, self.name, rate=self.rate, burst=self.burst):
            raise S3Error(
                "SlowDown",
                f"please reduce your request rate: this project may make {self.rate:g} "
                f"{self.name} requests per second (bursts of {self.burst:g})",
            )
