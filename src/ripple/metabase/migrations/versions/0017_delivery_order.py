"""Each queued and dead event's object and sequencer, for per-key ordered delivery
(ripple.pipeline.ordering): which keys a destination holds back, and in which order a key's
queued events go.

    ALTER TABLE delivery_retries ADD COLUMN object_path TEXT, ADD COLUMN sequencer VARCHAR(64)
    ALTER TABLE dead_letters ADD COLUMN object_path TEXT, ADD COLUMN sequencer VARCHAR(64)
    CREATE INDEX delivery_retries_key ON delivery_retries (destination, object_path, sequencer)
    CREATE INDEX dead_letters_key ON dead_letters (destination, object_path)

Rows already there are filled in from their event (`s3.bucket.name`, the decoded
`s3.object.key`, `s3.object.sequencer`), so turning ordering on after the upgrade holds the
keys they belong to.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote_plus

import orjson
import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_TABLES = ("delivery_retries", "dead_letters")
_PAGE = 1000


def upgrade() -> None:
    for table in _TABLES:
        op.add_column(table, sa.Column("object_path", sa.Text, nullable=True))
        op.add_column(table, sa.Column("sequencer", sa.String(64), nullable=True))
    conn = op.get_bind()
    for table in _TABLES:
        _fill(
            conn,
            sa.table(
                table,
                sa.column("id"),
                sa.column("event"),
                sa.column("object_path"),
                sa.column("sequencer"),
            ),
        )
    # after the backfill: built once over the filled rows, not kept up to date row by row
    op.create_index(
        "delivery_retries_key", "delivery_retries", ["destination", "object_path", "sequencer"]
    )
    op.create_index("dead_letters_key", "dead_letters", ["destination", "object_path"])


def _fill(conn: sa.Connection, table: sa.TableClause) -> None:
    """Each row's object path and sequencer, from its event, a page at a time."""
    c = table.c
    after = -1
    while True:
        rows = conn.execute(
            sa.select(c.id, c.event).where(c.id > after).order_by(c.id).limit(_PAGE)
        ).all()
        if not rows:
            return
        filled = [
            {"row_id": row.id, "path": path, "seq": sequencer}
            for row in rows
            for path, sequencer in [_of(row.event)]
            if path is not None
        ]
        if filled:  # one executemany a page
            conn.execute(
                sa.update(table)
                .where(c.id == sa.bindparam("row_id"))
                .values(object_path=sa.bindparam("path"), sequencer=sa.bindparam("seq")),
                filled,
            )
        after = rows[-1].id


def _of(text: str) -> tuple[str | None, str | None]:
    try:
        event: Any = orjson.loads(text)
        obj = event["s3"]["object"]
        return f"{event['s3']['bucket']['name']}/{_decode_key(obj['key'])}", obj["sequencer"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None, None  # not an event of an object


def _decode_key(encoded: str) -> str:
    """The raw key of an event's `s3.object.key` (`ripple.events.keys.decode_key` as of 0017)."""
    return unquote_plus(encoded, encoding="utf-8", errors="strict")


def downgrade() -> None:
    op.drop_index("dead_letters_key", "dead_letters")
    op.drop_index("delivery_retries_key", "delivery_retries")
    for table in _TABLES:
        with op.batch_alter_table(table, recreate="never") as batch:
            batch.drop_column("sequencer")
            batch.drop_column("object_path")
