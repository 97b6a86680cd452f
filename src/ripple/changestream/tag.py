"""The transaction tag, the request a write transaction serves: its members, its operations,
and its text in a change record's `transaction_tag`, for the writer and every reader.

The tag is stored as a JSON object (as a string) whose members are present only when known:
the fields of `TransactionTag`, each a string but `bucket_versioning` (bucket name →
`Enabled` or `Suspended`; a bucket absent from it has versioning off). An empty tag ("") is
a transaction with no context. `Operation` names what the transaction did; its values are
the strings stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any, Final

import orjson

__all__ = ["STRING_MEMBERS", "VERSIONING_STATES", "Operation", "TransactionTag"]

VERSIONING_STATES: Final = frozenset({"Enabled", "Suspended"})


class Operation(StrEnum):
    """What a write transaction did, as its tag's `operation` names it."""

    PUT = "put"
    POST = "post"
    COPY = "copy"
    COMPLETE_MULTIPART_UPLOAD = "complete-multipart-upload"
    DELETE = "delete"
    DELETE_OBJECTS = "delete-objects"
    TTL_DELETE = "ttl-delete"  # `ripple metabase expire`
    PUT_OBJECT_TAGGING = "put-object-tagging"
    DELETE_OBJECT_TAGGING = "delete-object-tagging"
    PUT_OBJECT_ACL = "put-object-acl"
    PUT_OBJECT_RETENTION = "put-object-retention"
    PUT_OBJECT_LEGAL_HOLD = "put-object-legal-hold"
    RENAME = "rename"
    RENAME_PREFIX = "rename-prefix"
    LIFECYCLE_EXPIRATION = "lifecycle-expiration"
    CREATE_BUCKET = "create-bucket"
    DELETE_BUCKET = "delete-bucket"


@dataclass(frozen=True)
class TransactionTag:
    """The request a transaction serves: what events need and a bare row change lacks.
    "" (or an empty mapping) for a member the transaction does not know."""

    operation: Operation | None = None
    request_id: str = ""
    host_id: str = ""
    principal: str = ""
    source_ip: str = ""
    etag: str = ""
    # rename: the source key; rename-prefix: the source prefix
    rename_from: str = ""
    # rename-prefix: the destination prefix
    rename_to: str = ""
    # copy: the source as `<bucket>/<key>` (a copy onto itself is a metadata change)
    copy_source: str = ""
    # lifecycle-expiration: the ID of the lifecycle rule that expired the rows
    lifecycle_rule: str = ""
    # the versioning state of each bucket the transaction changes whose versioning is not off
    bucket_versioning: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.operation is not None:  # an operation's name is taken for the operation
            try:
                object.__setattr__(self, "operation", Operation(self.operation))
            except ValueError:
                raise ValueError(
                    f"unknown operation {self.operation!r} in transaction tag "
                    f"(one of {', '.join(Operation)})"
                ) from None

    def defaults(self, **values: Any) -> TransactionTag:
        """This tag, with `values` filling the members it leaves empty."""
        return replace(self, **{k: v for k, v in values.items() if not getattr(self, k)})

    def is_versioned(self, bucket: str) -> bool:
        """Whether the bucket's versioning is enabled or suspended (not off)."""
        return self.bucket_versioning.get(bucket) in VERSIONING_STATES

    def encode(self) -> str:
        """The tag as a change record's `transaction_tag`: "" for an empty one."""
        # getattr over the field names, not asdict: this runs in every eventing commit
        members: dict[str, Any] = {
            name: value for name in STRING_MEMBERS if (value := getattr(self, name))
        }
        if self.bucket_versioning:
            members[_VERSIONING] = dict(sorted(self.bucket_versioning.items()))
        return orjson.dumps(members).decode() if members else ""

    @staticmethod
    def decode(text: str | None) -> TransactionTag:
        """A record's `transaction_tag`; "" or None is the empty tag.

        A tag that is not a JSON object, or whose members have the wrong types, is a
        ValueError: the metabase wrote something this module does not understand. Members it
        does not know are left out, and an operation it does not know (a newer writer's)
        reads as none, so its changes make the events of a plain write.
        """
        if not text:
            return _EMPTY
        try:
            raw: Any = orjson.loads(text)
        except orjson.JSONDecodeError as e:
            raise ValueError(f"transaction_tag is not JSON ({e.msg}): {text!r}") from None
        if not isinstance(raw, dict):
            raise ValueError(f"transaction_tag is not a JSON object: {text!r}")
        members: dict[str, Any] = {}
        for name in STRING_MEMBERS:
            value = raw.get(name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"transaction_tag member {name!r} is not a string: {text!r}")
            if value:
                members[name] = value
        if "operation" in members:
            members["operation"] = _OPERATIONS.get(members["operation"])
        versioning = raw.get(_VERSIONING) or {}
        if not isinstance(versioning, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in versioning.items()
        ):
            raise ValueError(
                f"transaction_tag member {_VERSIONING!r} is not an object of strings: {text!r}"
            )
        return TransactionTag(**members, bucket_versioning=versioning)

    @staticmethod
    def member_text(name: str, value: str) -> str:
        """How an encoded tag spells one string member, e.g. `"operation":"rename"`: to find
        the tags that have it in their stored text."""
        return orjson.dumps({name: value}).decode()[1:-1]


_VERSIONING: Final = "bucket_versioning"
# the members stored as JSON strings: every field but the versioning states
STRING_MEMBERS: Final = tuple(f.name for f in fields(TransactionTag) if f.name != _VERSIONING)
_OPERATIONS: Final = {op.value: op for op in Operation}
_EMPTY: Final = TransactionTag()
