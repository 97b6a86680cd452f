"""Rate limits every gateway over one metabase shares: a token bucket per project and limit
(`delete`: DeleteObject and DeleteObjects) in the `rate_limits` table.

Taking a token is one upsert: the row's tokens, refilled at `rate` per second since it was
last updated and capped at `burst`, lose one, unless fewer than one is left. Time is the
database's clock, so gateways on machines whose clocks disagree still share one budget; a
clock that seems to go back (a transaction that waited for another's row lock) refills
nothing.
"""

from __future__ import annotations

import functools
import uuid

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ripple.metabase.db import Metabase
from ripple.metabase.schema import rate_limits

__all__ = ["take_token"]


def _now_s(dialect: str) -> sa.ColumnElement[float]:
    """The database's clock, seconds since the epoch."""
    if dialect == "postgresql":  # the transaction's start: one value through the statement
        return sa.cast(sa.func.extract("epoch", sa.func.now()), sa.Float)
    return (sa.func.julianday("now") - 2440587.5) * 86400.0


@functools.cache
def _take(dialect: str) -> sa.Insert:
    """The upsert that takes a token, built once per dialect (its parameters: project_id,
    name, rate, burst)."""
    t = rate_limits.c
    now = _now_s(dialect)
    rate = sa.bindparam("rate", type_=sa.Float)
    burst = sa.bindparam("burst", type_=sa.Float)
    elapsed = sa.case((now > t.updated_s, now - t.updated_s), else_=0.0)
    refilled = t.tokens + elapsed * rate
    capped = sa.case((refilled > burst, burst), else_=refilled)
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    return (
        insert(rate_limits)
        .values(
            project_id=sa.bindparam("project_id"),
            name=sa.bindparam("name"),
            tokens=burst - 1,
            updated_s=now,
        )
        .on_conflict_do_update(
            index_elements=[t.project_id, t.name],
            # never back: a transaction that waited for the row lock started earlier
            set_={
                "tokens": capped - 1,
                "updated_s": sa.case((now > t.updated_s, now), else_=t.updated_s),
            },
            where=capped >= 1,
        )
        .returning(t.tokens)
    )


def take_token(
    db: Metabase, project_id: uuid.UUID, name: str, *, rate: float, burst: float
) -> bool:
    """Take one token of the project's `name` bucket (full, `burst` tokens, the first
    time); False when less than one is left."""
    if burst < 1:
        return False
    parameters = {"project_id": project_id, "name": name, "rate": rate, "burst": burst}
    with db.write() as conn:
        return conn.execute(_take(db.dialect), parameters).first() is not None
