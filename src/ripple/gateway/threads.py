"""The gateway's worker threads: where blocking work runs, off the event loop. Two kinds:

- a gateway's metabase threads (`Workers`, one set per `Services`): metabase operations,
  each a few statements. How many follows the metabase. SQLite runs one writer at a time
  and its reads are CPU work that holds the GIL between statements, so 2 threads (one can
  wait for a commit's fsync while the other reads); more only take turns for the GIL, and
  each turn costs CPU (a 4 KiB GET, 16 requests at a time, measured in one process: 0.93 ms
  of CPU with 1 thread, 1.25 ms with 2, 1.81 ms with 32). PostgreSQL's operations mostly
  wait on the network, so as many threads as its pool keeps connections for
  (`ripple.metabase.db`: 16 kept, 16 more at a peak), so a thread never waits for one;
- the data threads (`run_data`, one pool per process): work that may take long or wait
  for another request or another machine (hashing and writing a large body, placing a
  large object's file, concatenating parts, copies, an upload's complete lock, a topic's
  destination checks and test events), so it never holds up metabase operations. Waits
  on another request in this process wait their turn on the event loop first (an upload's
  completes: `complete_multipart.one_at_a_time`), so they cannot take every data thread.

A plain `ThreadPoolExecutor` through `loop.run_in_executor`, not anyio's `to_thread` (what
Starlette's `run_in_threadpool` uses): anyio adds a capacity limiter, a cancel scope and
its own worker queue to every call, which cost a PutObject more CPU than its metabase
statements. Pools are made on first use.
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
