"""A test's hold on the metabase's write transactions: code run after a transaction's
change records are written and before it commits, to hold it there or make it fail."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import sqlalchemy as sa

from ripple.changestream.capture import Capture
from ripple.metabase.db import Metabase


@contextmanager
def before_commit(db: Metabase, hook: Callable[[sa.Connection], None]) -> Iterator[None]:
    """While the block runs, `hook(connection)` runs in every write transaction of `db` (a
    group commit's one transaction among them) once its change records are written, before
    it commits; an exception it raises rolls the transaction back. PostgreSQL then sends the
    records and the COMMIT apart, not in one pipeline.

    It wraps the change stream writer's `flush_all`, the last step of every write
    transaction before its commit, and asks it not to commit."""
    writer = db.changestreams
    own = vars(writer).get("flush_all")  # another hook's wrapper, if one is in place
    flush_all = writer.flush_all

    def flush_then_hook(
        conn: sa.Connection, captures: Sequence[Capture], now_ns: int, *, commit: bool = False
    ) -> int:
        flushed = flush_all(conn, captures, now_ns, commit=False)
        hook(conn)
        return flushed

    writer.flush_all = flush_then_hook  # type: ignore[method-assign]
    try:
        yield
    finally:
        if own is None:
            del writer.flush_all
        else:
            writer.flush_all = own  # type: ignore[method-assign]
