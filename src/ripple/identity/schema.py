"""The identity table in the metabase database (created by migration 0007).

- `access_keys`: one row an access key. A key belongs to a project (its user: the project's
  name), holds its secret sealed with the master key (`ripple.identity.sealing`), and may be
  restricted to one bucket, to a key prefix in it, and by actions it is denied. Revoking a
  key sets `revoked_at`; the row stays, so the id is never given out again.
"""

from __future__ import annotations

import sqlalchemy as sa

from ripple.metabase.schema import UTCDateTime, projects

metadata = sa.MetaData()

access_keys = sa.Table(
    "access_keys",
    metadata,
    sa.Column("access_key_id", sa.String(128), primary_key=True),
    sa.Column("project_id", sa.Uuid, nullable=False),
    # version byte, nonce, AES-256-GCM ciphertext and tag; the access key id is the
    # associated data, so a sealed secret does not open under another key id
    sa.Column("sealed_secret", sa.LargeBinary, nullable=False),
    sa.Column("bucket", sa.String(63), nullable=True),  # None: every bucket of the project
    sa.Column("prefix", sa.String(1024), nullable=True),  # None: every key (needs a bucket)
    sa.Column("denied", sa.String(64), nullable=False, server_default=""),  # "delete,write"
    sa.Column("allow_bypass_governance", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("revoked_at", UTCDateTime, nullable=True),
    sa.ForeignKeyConstraint(["project_id"], [projects.c.id], name="access_keys_project_fkey"),
)
sa.Index("access_keys_project", access_keys.c.project_id)
