"""The gateway's worker threads: where blocking work runs, off the event loop. Two kinds:

- a gateway's metabase threads (`Workers`, one set per `Services`): metabase operations,
  each a few statements. 2 over SQLite (one writer at a time; its reads are CPU work, and
  more threads only take turns for the GIL, each turn costing CPU); over PostgreSQL as many
  as its pool keeps connections for (`ripple.metabase.db`), so a thread never waits for one;
- the data threads (`run_data`, one pool per process): work that may take long or wait for
  another request or machine, so it never holds up metabase operations.

A plain `ThreadPoolExecutor` through `loop.run_in_executor`, not anyio's `to_thread`: anyio
adds a capacity limiter, a cancel scope and its own queue to every call, which cost a
PutObject more CPU than its metabase statements. Pools are made on first use. What runs
where: docs/gateway.md, "Processes"; the figures: BENCHMARKS.md, "Issue 26, sixth session".
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

METABASE_THREADS = {"sqlite": 2, "postgresql": 32}
# Object reads and writes go to the metabase threads in groups (`ripple.gateway.together`),
# over PostgreSQL this many groups of each at a time (over SQLite one): a group's calls run one
# after another on one connection, and PostgreSQL can run several groups at once
POSTGRES_GROUPS = 4
# and at most this many writes in one group: each write is a subtransaction or three, and
# past 64 in one transaction PostgreSQL's snapshots of every session look them up on disk
POSTGRES_GROUP_CALLS = 16
DATA_THREADS = 32


def metabase_threads(dialect: str) -> int:
    """How many metabase threads a gateway over this kind of metabase (`Metabase.dialect`:
    sqlite or postgresql) runs."""
    return METABASE_THREADS[dialect]


class Workers:
    """A pool of `threads` worker threads, made on first use."""

    def __init__(self, threads: int, name: str) -> None:
        self.threads = threads
        self.name = name
        self._pool: ThreadPoolExecutor | None = None
        self._made = threading.Lock()

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            with self._made:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix=self.name)
        return self._pool

    async def run(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        """`fn(*args, **kwargs)` on one of the threads; its result, or its exception."""
        call = functools.partial(fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._executor(), call)


_DATA = Workers(DATA_THREADS, "gateway-data")


async def run_data(fn: Callable[..., T], *args: object, **kwargs: object) -> T:
    """`fn(*args, **kwargs)` on a data thread (file work); its result, or its exception."""
    return await _DATA.run(fn, *args, **kwargs)
