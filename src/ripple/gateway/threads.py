"""The gateway's worker threads: where blocking work (a metabase operation, file I/O, hashing
a large body) runs, off the event loop.

A plain `ThreadPoolExecutor` through `loop.run_in_executor`, not anyio's `to_thread` (what
Starlette's `run_in_threadpool` uses): anyio adds a capacity limiter, a cancel scope and
its own worker queue to every call, which cost a PutObject more CPU than its metabase
statements. The pool is made on first use, with as many threads as a PostgreSQL metabase keeps
connections for (`ripple.metabase.db`: 16 kept, 16 more at a peak), so a thread never
waits for a connection.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

THREADS = 32

_pool: ThreadPoolExecutor | None = None
_made = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _made:
            if _pool is None:
                _pool = ThreadPoolExecutor(THREADS, thread_name_prefix="gateway")
    return _pool


async def run(fn: Callable[..., T], *args: object, **kwargs: object) -> T:
    """`fn(*args, **kwargs)` on a worker thread; its result, or its exception."""
    call = functools.partial(fn, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_executor(), call)
