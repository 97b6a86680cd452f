"""A target that could not be opened (a broker away, credentials missing) standing in for
itself: it answers `retry` until it opens, so its events wait in its retry queue and the
other targets go on (`ripple.pipeline.deliver.Deliverer.open`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from ripple.targets.base import Delivery, Outcome, Result, Target, one_line

__all__ = ["Unopened", "opened"]

log = logging.getLogger(__name__)


class Unopened:
    """A target whose `open` failed: every publish first tries to open it again (at most
    every `retry_s`), and answers `retry` with the reason while it cannot."""

    def __init__(self, inner: Target, error: str, retry_s: float = 10.0) -> None:
        self.inner = inner
        self.name = inner.name
        self.error = error
        self.retry_s = retry_s
        self._tried = time.monotonic()
        self._open = False

    def open(self) -> None:
        self._try()

    def _try(self) -> None:
        self._tried = time.monotonic()
        try:
            self.inner.open()
        except Exception as e:
            self.error = one_line(e)
            log.error("target %s still cannot be opened: %s", self.name, self.error)
        else:
            self._open = True
            log.warning("target %s is open now", self.name)

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]:
        if not self._open and time.monotonic() - self._tried >= self.retry_s:
            self._try()
        if self._open:
            return self.inner.publish(deliveries)
        failed = Result(Outcome.RETRY, f"the target cannot be opened: {self.error}")
        return [failed] * len(deliveries)

    def close(self) -> None:
        if self._open:
            self.inner.close()


def opened(target: Target) -> Target:
    """`target`, opened; or, when that fails, an `Unopened` standing in for it."""
    if isinstance(target, Unopened):
        return target
    try:
        target.open()
    except Exception as e:
        log.error(
            "target %s cannot be opened; its events wait in its retry queue: %s",
            target.name,
            one_line(e),
        )
        return Unopened(target, one_line(e))
    return target
