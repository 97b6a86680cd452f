"""`Together`: calls sent to the metabase threads in groups; a group that fails as a whole
answers its calls with the error and the calls that waited behind it still go."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ripple.gateway.threads import Workers
from ripple.gateway.together import Together
from ripple.metabase import Metabase
from ripple.metabase.group import Outcome


def test_calls_waiting_behind_a_failed_group_are_sent(tmp_path: Path) -> None:
    db = Metabase(f"sqlite:///{tmp_path}/metabase.db")  # only its dialect is asked
    first_running = threading.Event()
    release = threading.Event()
    groups: list[int] = []

    def group(calls: list[Callable[[], Any]]) -> list[Outcome[Any]]:
        groups.append(len(calls))
        if len(groups) == 1:  # the first group fails as a whole, once the next call waits
            first_running.set()
            release.wait(10)
            raise OSError("no connection")
        return [Outcome(value=call()) for call in calls]

    together = Together(db, Workers(2, "test"), group)

    async def scenario() -> list[Any]:
        first = asyncio.ensure_future(together.run(lambda: "first"))
        await asyncio.get_running_loop().run_in_executor(None, first_running.wait, 10)
        second = asyncio.ensure_future(together.run(lambda: "second"))
        await asyncio.sleep(0)  # `second` is waiting now
        assert together.unanswered() == 2
        release.set()
        return await asyncio.wait_for(
            asyncio.gather(first, second, return_exceptions=True), timeout=10
        )

    first, second = asyncio.run(scenario())
    assert isinstance(first, OSError)
    assert second == "second"
    assert groups == [1, 1]
    db.dispose()


def test_a_call_cancelled_while_waiting_is_not_made(tmp_path: Path) -> None:
    db = Metabase(f"sqlite:///{tmp_path}/metabase.db")
    running = threading.Event()
    release = threading.Event()
    made: list[str] = []

    def group(calls: list[Callable[[], Any]]) -> list[Outcome[Any]]:
        running.set()
        release.wait(10)
        return [Outcome(value=call()) for call in calls]

    together = Together(db, Workers(2, "test"), group)

    async def scenario() -> None:
        first = asyncio.ensure_future(together.run(lambda: made.append("first")))
        await asyncio.get_running_loop().run_in_executor(None, running.wait, 10)
        second = asyncio.ensure_future(together.run(lambda: made.append("second")))
        await asyncio.sleep(0)
        second.cancel()
        release.set()
        await first
        with pytest.raises(asyncio.CancelledError):
            await second

    asyncio.run(scenario())
    assert made == ["first"]
    db.dispose()
