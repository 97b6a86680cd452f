"""What a registered Python data source carries to its planner and tasks pickled (a
pipeline run's worker setup, its event settings), unpickled once per worker process: the
sources `ripple.pipeline.deliveries` and `ripple.pipeline.journal_source` share it."""

from __future__ import annotations

import hashlib
from typing import Any

from pyspark import cloudpickle  # Spark's own copy, as it pickles functions

__all__ = ["pickled", "unpickled"]

_unpickled: dict[bytes, Any] = {}  # digest of the pickled bytes -> what they hold


def pickled(value: object) -> bytes:
    return cloudpickle.dumps(value)  # type: ignore[no-untyped-call,no-any-return]


def unpickled(data: bytes) -> Any:
    """What `data` holds, unpickled at its first use in this process."""
    digest = hashlib.sha256(data).digest()
    if digest not in _unpickled:
        _unpickled[digest] = cloudpickle.loads(data)
    return _unpickled[digest]
