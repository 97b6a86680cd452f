"""The transaction tag: the request context a change record carries for its events.

The metabase tags each write transaction with a JSON object (as a string) whose members are
present only when known: `operation`, `request_id`, `host_id`, `principal`, `source_ip`,
`etag`, `rename_from` / `rename_to` (renames), `copy_source` (copies), `lifecycle_rule`
(lifecycle expirations) and `bucket_versioning` (bucket name → `Enabled` or `Suspended`; a
bucket absent from it has versioning off). An empty tag is a transaction with no context.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

__all__ = ["VERSIONING_STATES", "TransactionTag", "parse_transaction_tag"]

VERSIONING_STATES: Final = frozenset({"Enabled", "Suspended"})

_STRING_MEMBERS: Final = (
    "operation",
    "request_id",
    "host_id",
    "principal",
    "source_ip",
    "etag",
    "rename_from",
    "rename_to",
    "copy_source",
    "lifecycle_rule",
)


@dataclass(frozen=True)
class TransactionTag:
    """The parsed transaction tag; None for a member the tag does not have."""

    operation: str | None = None
    request_id: str | None = None
    host_id: str | None = None
    principal: str | None = None
    source_ip: str | None = None
    etag: str | None = None
    rename_from: str | None = None  # rename: the source key; rename-prefix: its prefix
    rename_to: str | None = None  # rename-prefix: the destination prefix
    copy_source: str | None = None  # copy: `<bucket>/<key>` of the source
    lifecycle_rule: str | None = None  # lifecycle-expiration: the rule's ID
    bucket_versioning: Mapping[str, str] = field(default_factory=dict)

    def is_versioned(self, bucket: str) -> bool:
        """Whether the bucket's versioning is enabled or suspended (not off)."""
        return self.bucket_versioning.get(bucket) in VERSIONING_STATES


def parse_transaction_tag(tag: str | None) -> TransactionTag:
    """Parse a record's `transaction_tag`; "" or None is the empty tag.

    A tag that is not a JSON object, or whose members have the wrong types, is a ValueError:
    the metabase wrote something this module does not understand.
    """
    if not tag:
        return TransactionTag()
    try:
        raw: Any = orjson.loads(tag)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"transaction_tag is not JSON ({e.msg}): {tag!r}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"transaction_tag is not a JSON object: {tag!r}")
    members: dict[str, str | None] = {}
    for name in _STRING_MEMBERS:
        value = raw.get(name)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"transaction_tag member {name!r} is not a string: {tag!r}")
        members[name] = value
    versioning = raw.get("bucket_versioning") or {}
    if not isinstance(versioning, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in versioning.items()
    ):
        raise ValueError(
            f"transaction_tag member 'bucket_versioning' is not an object of strings: {tag!r}"
        )
    return TransactionTag(**members, bucket_versioning=versioning)
