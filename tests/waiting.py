"""Waiting for a condition in tests, instead of sleeping a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(
    condition: Callable[[], object], what: str = "the condition", timeout: float = 60.0
) -> None:
    """Return as soon as `condition()` is true; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.01)
