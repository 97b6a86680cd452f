"""A gateway's metabase work sent to its metabase threads in groups.

Object writes (PutObject, DeleteObject) are committed together (group commit,
`ripple.metabase.group`): while one group is being committed, the writes that arrive
wait; when it is done, every write waiting goes to the metabase threads as the next group:
one thread hop, one transaction and one fsync for all of them, where each used to pay its
own. What must follow a write's commit (removing the data of the versions it replaced)
runs after the group's commit, on the same thread. Object reads (GetObject, HeadObject)
go the same way, each its own read transaction on one connection (`Metabase.read_together`).

A call goes at once when fewer groups than allowed (`flights`) are on their way, so nothing
waits that would not have waited anyway. Over SQLite, one group at a time: it has one
writer, and its reads are CPU work that holds the interpreter lock. Over PostgreSQL, a few
groups at a time (`threads.POSTGRES_GROUPS`, a group of writes at most
`threads.POSTGRES_GROUP_CALLS`): a group's statements wait on the network, and the server
commits several transactions at once. A write that waited too long for a lock in its group
(`AgainAlone`, PostgreSQL) is made again in a group of its own, beside the others, so its
wait holds up no one else's answer."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ripple.gateway.threads import Workers
from ripple.metabase.group import AgainAlone, Outcome

T = TypeVar("T")


@dataclass
class _Call:
    call: Callable[[], Any]
    then: Callable[[Any], None] | None
    answer: asyncio.Future[Any]


@dataclass
class _Queue:
    """The calls waiting on one event loop, and the task sending them on, if one is."""

    waiting: list[_Call] = field(default_factory=list)
    senders: int = 0  # tasks sending groups on (at most `Together.flights`)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)  # kept from being collected
    on_their_way: int = 0  # calls in the groups sent on, not yet answered


Group = Callable[[list[Callable[[], Any]]], list[Outcome[Any]]]


class Together:
    """Calls of one kind (`group`: how a group of them runs on a metabase thread, e.g.
    `Metabase.write_together`) sent to the metabase threads in groups, at most `flights`
    groups on their way at once."""

    def __init__(
        self, workers: Workers, group: Group, *, flights: int, most: int | None = None
    ) -> None:
        if flights < 1 or (most is not None and most < 1):
            raise ValueError("flights and most must be at least 1")
        self.workers = workers
        self.group = group
        self.flights = flights
        self.most = most  # calls in one group, if limited
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue] = (
            weakref.WeakKeyDictionary()
        )

    async def run(self, call: Callable[[], T], then: Callable[[T], None] | None = None) -> T:
        """`call()` on a metabase thread (with others waiting now), then
        `then(result)` once its group is done (committed); the result, or the exception of
        either."""
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = _Queue()
        answer: asyncio.Future[T] = loop.create_future()
        queue.waiting.append(_Call(call, then, answer))
        if queue.senders < self.flights:
            # counted down as the task ends, not by its done callback: a call coming
            # between the two would find no sender and wait for ever
            queue.senders += 1
            _start(queue, self._send_waiting(queue))
        return await answer

    def unanswered(self) -> int:
        """How many calls are waiting or on their way (on every event loop)."""
        return sum(len(q.waiting) + q.on_their_way for q in list(self._queues.values()))

    async def _send_waiting(self, queue: _Queue) -> None:
        try:
            while queue.waiting:
                # a call whose request was cancelled before it went is not made, as one
                # that had not started on a metabase thread was not
                live = [w for w in queue.waiting if not w.answer.done()]
                most = len(live) if self.most is None else self.most
                group, queue.waiting = live[:most], live[most:]
                if not group:
                    continue
                queue.on_their_way += len(group)
                try:
                    outcomes = await self.workers.run(self._run, group)
                except asyncio.CancelledError:  # the loop is closing: nobody will be answered
                    for w in group + queue.waiting:
                        w.answer.cancel()
                    raise
                except Exception as e:  # the group as a whole failed (no connection, …)
                    outcomes = [Outcome(error=e) for _ in group]
                finally:
                    queue.on_their_way -= len(group)
                for w, outcome in zip(group, outcomes, strict=True):
                    if w.answer.done():  # its request was cancelled (the client went)
                        continue
                    if isinstance(outcome.error, AgainAlone):
                        self._again_alone(queue, w)
                    else:
                        _answer(w, outcome)
        finally:
            queue.senders -= 1

    def _again_alone(self, queue: _Queue, w: _Call) -> None:
        """Make `w` again in a group of its own, beside the groups on their way (its waits,
        which may be long, hold up no other call)."""

        async def alone() -> None:
            try:
                (outcome,) = await self.workers.run(self._run, [w])
            except Exception as e:
                outcome = Outcome(error=e)
            finally:
                queue.on_their_way -= 1
            if not w.answer.done():
                _answer(w, outcome)

        queue.on_their_way += 1
        _start(queue, alone())

    def _run(self, group: list[_Call]) -> list[Outcome[Any]]:
        """On a metabase thread: the group, then each call's `then` (if it succeeded)."""
        outcomes = self.group([w.call for w in group])
        for w, outcome in zip(group, outcomes, strict=True):
            if w.then is not None and outcome.error is None:
                try:
                    w.then(outcome.value)
                except Exception as e:
                    outcome.error = e
        return outcomes


def _start(queue: _Queue, work: Coroutine[Any, Any, None]) -> None:
    """Run `work` as a task of `queue`'s loop, kept until it ends."""
    task = asyncio.get_running_loop().create_task(work)
    queue.tasks.add(task)
    task.add_done_callback(queue.tasks.discard)


def _answer(w: _Call, outcome: Outcome[Any]) -> None:
    if outcome.error is not None:
        w.answer.set_exception(outcome.error)
    else:
        w.answer.set_result(outcome.value)
