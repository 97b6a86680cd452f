"""Idempotency tokens every gateway over one metabase shares: RenameObject's
`x-amz-client-token`, kept per project and bucket in the `client_tokens` table.

A request with a token first claims it (`claim`): one row, inserted unless it exists. The
claimant does the work, then marks the token done (`finish`, kept `ttl` seconds) or, if
the work failed, lets it go (`release`). Whoever finds the row instead is told what it
holds: another request's token (`Claim.MISMATCH`), the same request done already
(`Claim.DONE`: answer as the first did), or in progress (`Claim.BUSY`: wait, or ask the
client to come back). A claim whose gateway died is taken over once `in_progress_s` has
passed. A claim removes its bucket's lapsed tokens (a bucket renamed in no more keeps the
rows of its last 10 minutes). Times are the gateway's clock: they only bound how long a row
is kept.
"""

from __future__ import annotations

import enum
import time
import uuid

import sqlalchemy as sa

from ripple.metabase.db import Metabase
from ripple.metabase.schema import client_tokens

__all__ = ["Claim", "claim", "finish", "release"]

TTL_S = 600.0  # how long a done token answers retries
IN_PROGRESS_S = 60.0  # how long a claim holds without being finished


class Claim(enum.Enum):
    CLAIMED = "claimed"  # the token is this request's: do the work
    DONE = "done"  # the same request was done with this token
    BUSY = "busy"  # the same request is in progress with this token
    MISMATCH = "mismatch"  # the token was used for another request


def _key(project_id: uuid.UUID, bucket: str, token: str) -> sa.ColumnElement[bool]:
    t = client_tokens.c
    return sa.and_(t.project_id == project_id, t.bucket_name == bucket, t.token == token)


def claim(
    db: Metabase,
    project_id: uuid.UUID,
    bucket: str,
    token: str,
    request: str,
    *,
    in_progress_s: float = IN_PROGRESS_S,
) -> Claim:
    """Claim `token` for `request` (what the request asks, to compare with a retry's)."""
    key = _key(project_id, bucket, token)

    t = client_tokens.c

    def tx(conn: sa.Connection) -> sa.Row[tuple[str, bool]] | None:
        now = time.time_ns()
        # the bucket's lapsed tokens go (boto3 sends a new token with every rename)
        conn.execute(
            sa.delete(client_tokens).where(
                t.project_id == project_id, t.bucket_name == bucket, t.expires_ns <= now
            )
        )
        row = conn.execute(
            sa.select(client_tokens.c.request, client_tokens.c.done).where(key)
        ).first()
        if row is None:  # two claimants at once: one insert fails, and its retry reads
            conn.execute(
                sa.insert(client_tokens).values(
                    project_id=project_id,
                    bucket_name=bucket,
                    token=token,
                    request=request,
                    done=False,
                    expires_ns=now + int(in_progress_s * 1e9),
                )
            )
        return row

    row = db.run_write(tx)
    if row is None:
        return Claim.CLAIMED
    if row.request != request:
        return Claim.MISMATCH
    return Claim.DONE if row.done else Claim.BUSY


def finish(
    db: Metabase, project_id: uuid.UUID, bucket: str, token: str, *, ttl_s: float = TTL_S
) -> None:
    """The claimed work is done: retries are answered as done for `ttl_s` seconds."""
    expires = time.time_ns() + int(ttl_s * 1e9)
    with db.write() as conn:
        conn.execute(
            sa.update(client_tokens)
            .where(_key(project_id, bucket, token))
            .values(done=True, expires_ns=expires)
        )


def release(db: Metabase, project_id: uuid.UUID, bucket: str, token: str) -> None:
    """The claimed work failed: the token is free again."""
    with db.write() as conn:
        conn.execute(
            sa.delete(client_tokens).where(
                _key(project_id, bucket, token), client_tokens.c.done == sa.false()
            )
        )
