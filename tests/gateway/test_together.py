"""`Together`: calls sent to the metabase threads in groups; a group that fails as a whole
answers its calls with the error and the calls that waited behind it still go."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from ripple.gateway.threads import Workers
from ripple.gateway.together import Together
from ripple.metabase.group import AgainAlone, Outcome
from tests.waiting import wait_for


def test_calls_waiting_behind_a_failed_group_are_sent() -> None:
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

    together = Together(Workers(2, "test"), group, flights=1)

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


def test_a_call_cancelled_while_waiting_is_not_made() -> None:
    running = threading.Event()
    release = threading.Event()
    made: list[str] = []

    def group(calls: list[Callable[[], Any]]) -> list[Outcome[Any]]:
        running.set()
        release.wait(10)
        return [Outcome(value=call()) for call in calls]

    together = Together(Workers(2, "test"), group, flights=1)

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


def test_as_many_groups_as_flights_go_at_once_and_the_rest_wait() -> None:
    release = threading.Event()
    groups: list[list[Any]] = []

    def group(calls: list[Callable[[], Any]]) -> list[Outcome[Any]]:
        outcomes = [Outcome(value=call()) for call in calls]
        groups.append([o.value for o in outcomes])
        release.wait(10)
        return outcomes

    together = Together(Workers(4, "test"), group, flights=2)

    async def scenario() -> list[Any]:
        loop = asyncio.get_running_loop()
        calls = [asyncio.ensure_future(together.run(lambda: "a"))]
        await loop.run_in_executor(None, wait_for, lambda: len(groups) == 1, "a's group")
        calls.append(asyncio.ensure_future(together.run(lambda: "b")))
        # b goes at once, beside a's group, not behind it
        await loop.run_in_executor(None, wait_for, lambda: len(groups) == 2, "b's group")
        calls += [asyncio.ensure_future(together.run(lambda: "c"))]
        calls += [asyncio.ensure_future(together.run(lambda: "d"))]
        await asyncio.sleep(0)
        assert together.unanswered() == 4
        assert len(groups) == 2  # c and d wait: two groups are out
        release.set()
        return await asyncio.wait_for(asyncio.gather(*calls), timeout=10)

    assert asyncio.run(scenario()) == ["a", "b", "c", "d"]
    assert groups == [["a"], ["b"], ["c", "d"]]


def test_a_call_to_make_again_alone_goes_in_a_group_of_its_own() -> None:
    """The others of its group are answered first: its run alone may wait long."""
    alone_running, release = threading.Event(), threading.Event()
    groups: list[int] = []

    def group(calls: list[Callable[[], Any]]) -> list[Outcome[Any]]:
        groups.append(len(calls))
        if len(groups) == 2:  # b and c: b waited too long
            return [Outcome(error=AgainAlone("waited")), Outcome(value=calls[1]())]
        if len(groups) == 3:  # b made again
            alone_running.set()
            release.wait(10)
        return [Outcome(value=call()) for call in calls]

    together = Together(Workers(4, "test"), group, flights=1)

    async def scenario() -> list[Any]:
        loop = asyncio.get_running_loop()
        hold = threading.Event()
        first = asyncio.ensure_future(together.run(lambda: hold.wait(10) and "a"))
        await asyncio.sleep(0)
        rest = [asyncio.ensure_future(together.run(_value(v))) for v in ("b", "c")]
        await asyncio.sleep(0)
        hold.set()  # a's group of one goes; b and c make the next group, b made again
        await asyncio.wait_for(rest[1], timeout=10)
        await loop.run_in_executor(None, alone_running.wait, 10)
        assert not rest[0].done()  # c was answered while b runs alone
        release.set()
        return await asyncio.wait_for(asyncio.gather(first, *rest), timeout=10)

    assert asyncio.run(scenario()) == ["a", "b", "c"]
    assert groups == [1, 2, 1]


def test_a_group_holds_at_most_most_calls() -> None:
    release = threading.Event()
    groups: list[int] = []

    def group(calls: list[Callable[[], Any]]) -> list[Outcome[Any]]:
        groups.append(len(calls))
        release.wait(10)
        return [Outcome(value=call()) for call in calls]

    together = Together(Workers(2, "test"), group, flights=1, most=2)

    async def scenario() -> list[Any]:
        calls = [asyncio.ensure_future(together.run(_value(v))) for v in range(5)]
        await asyncio.sleep(0)
        release.set()
        return await asyncio.wait_for(asyncio.gather(*calls), timeout=10)

    assert asyncio.run(scenario()) == [0, 1, 2, 3, 4]
    assert groups == [2, 2, 1]


def _value(value: object) -> Callable[[], object]:
    return lambda: value
