"""The part sizes of an object completed from a multipart upload, so GetObject and HeadObject
can answer `partNumber=N` (that part's bytes, `x-amz-mp-parts-count`) as S3 does.

    ALTER TABLE objects ADD COLUMN part_sizes JSON

`part_sizes` holds the sizes of the parts in order (`[5242880, 5242880, 1024]`); NULL for an
object written in one piece (PutObject), and for multipart objects completed before this
step, whose parts are no longer known: they answer `partNumber=1` with the whole object.
The change stream does not watch it.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("objects", sa.Column("part_sizes", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("objects", recreate="never") as batch:
        batch.drop_column("part_sizes")
