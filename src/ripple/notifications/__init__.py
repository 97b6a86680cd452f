"""Eventing configuration: which buckets have eventing and where their events go.

Today that is the static phase-1 list, `bucket-eventing.buckets` (`RIPPLE_BUCKET_EVENTING_BUCKETS`):
`project_id:bucket_name:topic_id` tuples parsed and validated by `parse_eventing_buckets`.
The `Registry` holds it, and later the bucket notification configurations of the S3 API, in
memory: the metabase asks it `is_eventing` to keep other buckets' transactions out of the
change stream, and the pipeline asks it for each bucket's `destinations`.
"""

from __future__ import annotations

from ripple.notifications.phase1 import (
    BucketKey,
    EventingConfigError,
    parse_eventing_buckets,
    topic_name_problem,
)
from ripple.notifications.registry import PHASE1_CONFIGURATION_ID, Destination, Registry

__all__ = [
    "PHASE1_CONFIGURATION_ID",
    "BucketKey",
    "Destination",
    "EventingConfigError",
    "Registry",
    "parse_eventing_buckets",
    "topic_name_problem",
]
