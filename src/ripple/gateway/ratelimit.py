"""Per-project rate limits: a token bucket per project, refilled continuously.

DeleteObject and DeleteObjects each take one token (a bulk delete of 1000 keys is ONE
operation); an empty bucket answers 503 `SlowDown`, as S3 does when a client goes too fast.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ripple.gateway.errors import S3Error


@dataclass
class _Bucket:
    tokens: float
    updated: float


class TokenBuckets:
    def __init__(
        self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if rate <= 0 or burst <= 0:
            raise ValueError("rate and burst must be positive")
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def try_take(self, owner: str, tokens: float = 1.0) -> bool:
        now = self.clock()
        with self._lock:
            bucket = self._buckets.get(owner)
            if bucket is None:
                bucket = self._buckets[owner] = _Bucket(self.burst, now)
            bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.updated) * self.rate)
            bucket.updated = now
            if bucket.tokens < tokens:
                return False
            bucket.tokens -= tokens
            return True

    def take(self, owner: str, what: str = "delete") -> None:
        """One token, or `SlowDown`."""
        if not self.try_take(owner):
            raise S3Error(
                "SlowDown",
                f"please reduce your request rate: this project may make {self.rate:g} "
                f"{what} requests per second (bursts of {self.burst:g})",
            )
