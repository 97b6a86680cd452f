"""The pipeline's tables in the metabase database (created by migration 0005; the object
path and sequencer of each event by 0017).

- `delivery_retries`: each destination's durable retry queue. An event whose delivery
  still failed after the in-batch retries waits here, so its Spark batch can complete; the
  pipeline drains the queue with backoff, per destination.
- `dead_letters`: events a destination refused for good, or that outlived the
  destination's time-to-live or retry limit. `ripple deadletter list | replay | purge`.

Both keep each event's object (`object_path`, `<bucket>/<key>`) and `sequencer`, so a
destination with per-key ordering (`ripple.pipeline.ordering`) knows, also after a restart,
which keys are held and in which order to send a key's queued events. NULL in rows from
before 0017, and for events of no object (an `s3:TestEvent`).
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

RowId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

delivery_retries = sa.Table(
    "delivery_retries",
    metadata,
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    sa.Column("destination", sa.String(255), nullable=False),
    sa.Column("event_id", sa.String(64), nullable=False),
    sa.Column("event", sa.Text, nullable=False),  # the S3 event record, JSON
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("first_failed_ns", sa.BigInteger, nullable=False),
    sa.Column("next_attempt_ns", sa.BigInteger, nullable=False),
    sa.Column("last_error", sa.Text, nullable=False),
    sa.Column("object_path", sa.Text, nullable=True),  # <bucket>/<key>
    sa.Column("sequencer", sa.String(64), nullable=True),
)
sa.Index(
    "delivery_retries_due",
    delivery_retries.c.destination,
    delivery_retries.c.next_attempt_ns,
)
sa.Index(
    "delivery_retries_event",
    delivery_retries.c.destination,
    delivery_retries.c.event_id,
    unique=True,
)
sa.Index(
    "delivery_retries_key",
    delivery_retries.c.destination,
    delivery_retries.c.object_path,
    delivery_retries.c.sequencer,
)

dead_letters = sa.Table(
    "dead_letters",
    metadata,
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    sa.Column("destination", sa.String(255), nullable=False),
    sa.Column("event_id", sa.String(64), nullable=False),
    sa.Column("event", sa.Text, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("first_failed_ns", sa.BigInteger, nullable=False),
    sa.Column("dead_at_ns", sa.BigInteger, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("object_path", sa.Text, nullable=True),
    sa.Column("sequencer", sa.String(64), nullable=True),
)
sa.Index("dead_letters_destination", dead_letters.c.destination, dead_letters.c.id)
sa.Index("dead_letters_key", dead_letters.c.destination, dead_letters.c.object_path)
