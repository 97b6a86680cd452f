"""The additional checksum (S3's flexible checksums) of each object version, and the
algorithm a multipart upload declared, so HeadObject / GetObject with
`x-amz-checksum-mode: ENABLED`, CompleteMultipartUpload and GetObjectAttributes can answer it.

    ALTER TABLE objects ADD COLUMN checksum JSON

`checksum` is `{"algorithm": "SHA256", "type": "COMPOSITE" | "FULL_OBJECT", "value": base64,
"parts": [base64, ...]}` (`parts` for an object completed from a multipart upload); on a
pending upload's row only `algorithm` and `type`. NULL: the version was written without a
checksum, or before this step. The change stream does not watch it.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("objects", sa.Column("checksum", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("objects", recreate="never") as batch:
        batch.drop_column("checksum")
