"""Set a bucket's versioning: enable or suspend. A bucket never returns to unversioned,
and a bucket with object lock cannot be suspended. An unversioned bucket may be suspended
straight away, as in S3: its writes still make `null` versions, and GetBucketVersioning
answers Suspended from then on."""

from __future__ import annotations

import sqlalchemy as sa

from ripple.metabase.db import Metabase
from ripple.metabase.errors import InvalidBucketState
from ripple.metabase.rows import get_bucket
from ripple.metabase.schema import buckets
from ripple.metabase.types import Bucket, BucketLocation, Versioning


def set_bucket_versioning(db: Metabase, loc: BucketLocation, *, enabled: bool) -> Bucket:
    """Enable (True) or suspend (False) versioning; suspending an object-lock bucket is
    `InvalidBucketState`."""
    with db.write() as conn:
        bucket = get_bucket(conn, loc, lock="update")
        if enabled:
            state = Versioning.ENABLED
        elif bucket.object_lock_enabled:
            raise InvalidBucketState(
                f"bucket {loc.bucket_name!r} has object lock; its versioning cannot be suspended"
            )
        else:
            state = Versioning.SUSPENDED
        conn.execute(
            sa.update(buckets)
            .where(buckets.c.project_id == loc.project_id, buckets.c.name == loc.bucket_name)
            .values(versioning=int(state))
        )
        return get_bucket(conn, loc)
