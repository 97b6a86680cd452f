"""Bucket lifecycle configuration (S3 Put/Get/DeleteBucketLifecycleConfiguration): S3's
rules for a configuration, and its storage in `buckets.lifecycle`.

A configuration arrives as boto3 shapes it (`{"Rules": [{"ID", "Status", "Filter" |
"Prefix", "Expiration", ...}]}`; the gateway turns the XML into the same dict, numbers and
booleans still text) and is checked as S3 checks it: 1 to 1000 rules, unique IDs of at
most 255 characters (a missing ID is generated), Status `Enabled` or `Disabled`, exactly one
of `Filter` (empty, `Prefix`, `Tag`, `ObjectSizeGreaterThan`, `ObjectSizeLessThan` or
`And`) and the legacy rule-level `Prefix`, at least one action, an `Expiration` with exactly
one of `Days`, `Date` (midnight UTC) and `ExpiredObjectDeleteMarker`, no tag filter
with `ExpiredObjectDeleteMarker` or `AbortIncompleteMultipartUpload`. Transitions are
`NotImplemented`: ripple has one storage class. What is stored is the canonical document
(the one GetBucketLifecycleConfiguration answers); `LifecycleRule` is its typed reading,
which `lifecycle_run` applies.

Values (numbers, dates, booleans) are read by `lifecycle_values`, bounded: a rule whose
dates would overflow (a `Days` past `MAX_DAYS`, a `Date` past 9999) is refused when it is
put. A rule stored before a check was added is read again, one rule at a time, by the run
(`read_rule`), which skips it; GET answers it as stored (`lifecycle_documents`).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from ripple.metabase import lifecycle_values as values
from ripple.metabase.db import Metabase
from ripple.metabase.errors import (
    InvalidArgument,
    InvalidLifecycleRequest,
    LifecycleNotFound,
    LifecycleNotImplemented,
    MalformedLifecycle,
)
from ripple.metabase.rows import get_bucket
from ripple.metabase.schema import buckets
from ripple.metabase.types import BucketLocation, Object

MAX_RULES = 1000
MAX_ID_LENGTH = 255
MAX_NEWER_NONCURRENT = 100
_RULE_FIELDS = {
    "ID",
    "Status",
    "Prefix",
    "Filter",
    "Expiration",
    "NoncurrentVersionExpiration",
    "AbortIncompleteMultipartUpload",
}
_TRANSITIONS = {
    "Transition",
    "Transitions",
    "NoncurrentVersionTransition",
    "NoncurrentVersionTransitions",
}
_SIZES = ("ObjectSizeGreaterThan", "ObjectSizeLessThan")
_FILTER_FIELDS = ("Prefix", "Tag", *_SIZES, "And")


@dataclass(frozen=True)
class RuleFilter:
    """Which versions a rule applies to: every condition given must hold."""

    prefix: str = ""
    tags: tuple[tuple[str, str], ...] = ()
    size_greater_than: int | None = None
    size_less_than: int | None = None

    def matches(self, obj: Object) -> bool:
        """An object version (or upload) the rule applies to. A delete marker has no tags
        and no size: only the prefix applies to it, and a tag filter never matches it."""
        if not obj.object_key.startswith(self.prefix):
            return False
        if obj.is_delete_marker:
            return not self.tags
        if any(obj.tags.get(key) != value for key, value in self.tags):
            return False
        if self.size_greater_than is not None and not obj.total_plain_size > self.size_greater_than:
            return False
        return self.size_less_than is None or obj.total_plain_size < self.size_less_than


@dataclass(frozen=True)
class LifecycleRule:
    id: str
    enabled: bool
    filter: RuleFilter
    expiration_days: int | None = None
    expiration_date: datetime | None = None
    expired_object_delete_marker: bool = False
    noncurrent_days: int | None = None
    newer_noncurrent_versions: int | None = None
    abort_days: int | None = None  # AbortIncompleteMultipartUpload DaysAfterInitiation
    document: Mapping[str, Any] | None = None  # the rule as stored and answered

    @property
    def expires_current(self) -> bool:
        return self.expiration_days is not None or self.expiration_date is not None


def check_lifecycle(configuration: Mapping[str, Any]) -> list[LifecycleRule]:
    """The rules of a configuration as S3 accepts it (see the module docstring), or the
    error S3 answers: `MalformedLifecycle`, `InvalidArgument`, `InvalidLifecycleRequest`,
    `LifecycleNotImplemented`."""
    rules = configuration.get("Rules")
    extra = set(configuration) - {"Rules"}
    if extra:
        raise MalformedLifecycle(
            f"a LifecycleConfiguration holds only <Rule>s, not {values.names(extra)}"
        )
    if not isinstance(rules, Sequence) or isinstance(rules, str) or not rules:
        raise MalformedLifecycle("a LifecycleConfiguration needs at least one <Rule>")
    if len(rules) > MAX_RULES:
        raise MalformedLifecycle(
            f"a lifecycle configuration has at most {MAX_RULES} rules, got {len(rules)}"
        )
    checked: list[LifecycleRule] = []
    ids: set[str] = set()
    for raw in rules:
        rule = _check_rule(raw)
        if rule.id in ids:
            raise InvalidArgument(
                f"Rule ID must be unique. Found same ID for more than one rule: {rule.id!r}"
            )
        ids.add(rule.id)
        checked.append(rule)
    return checked


def _check_rule(raw: Any) -> LifecycleRule:
    if not isinstance(raw, Mapping):
        raise MalformedLifecycle("each <Rule> must be an element with children")
    transitions = _TRANSITIONS & set(raw)
    if transitions:
        raise LifecycleNotImplemented(
            f"{values.names(transitions)}: ripple has one storage class, so lifecycle transitions "
            "are not implemented; use Expiration actions"
        )
    unknown = set(raw) - _RULE_FIELDS
    if unknown:
        raise MalformedLifecycle(f"unknown lifecycle rule member {values.names(unknown)}")
    rule_id = values.text(raw.get("ID"), "ID") or _generated_id()
    if len(rule_id) > MAX_ID_LENGTH:
        raise InvalidArgument(f"ID length should not exceed allowed limit of {MAX_ID_LENGTH}")
    status = raw.get("Status")
    if status not in ("Enabled", "Disabled"):
        raise MalformedLifecycle(f"rule {rule_id!r}: <Status> must be Enabled or Disabled")
    document: dict[str, Any] = {"ID": rule_id, "Status": status}
    if ("Prefix" in raw) == ("Filter" in raw):
        raise MalformedLifecycle(
            f"rule {rule_id!r} needs exactly one of <Filter> and the rule-level <Prefix>"
        )
    if "Prefix" in raw:
        prefix = values.text(raw["Prefix"], "Prefix")
        rule_filter = RuleFilter(prefix=prefix)
        document["Prefix"] = prefix
    else:
        rule_filter, document["Filter"] = _check_filter(raw["Filter"], rule_id)
    rule = LifecycleRule(rule_id, status == "Enabled", rule_filter)
    actions = 0
    if raw.get("Expiration") is not None:
        rule, document["Expiration"] = _check_expiration(raw["Expiration"], rule)
        actions += 1
    if raw.get("NoncurrentVersionExpiration") is not None:
        rule, document["NoncurrentVersionExpiration"] = _check_noncurrent(
            raw["NoncurrentVersionExpiration"], rule
        )
        actions += 1
    if raw.get("AbortIncompleteMultipartUpload") is not None:
        abort = values.members(
            raw["AbortIncompleteMultipartUpload"], {"DaysAfterInitiation"}, "Abort"
        )
        days = values.days(
            abort.get("DaysAfterInitiation"),
            "DaysAfterInitiation",
            "AbortIncompleteMultipartUpload",
        )
        if rule_filter.tags:
            raise InvalidLifecycleRequest(
                "AbortIncompleteMultipartUpload cannot be specified with Tags."
            )
        rule = replace(rule, abort_days=days)
        document["AbortIncompleteMultipartUpload"] = {"DaysAfterInitiation": days}
        actions += 1
    if not actions:
        raise InvalidLifecycleRequest(
            f"At least one action needs to be specified in a rule (rule {rule_id!r})"
        )
    return replace(rule, document=document)


def _check_filter(raw: Any, rule_id: str) -> tuple[RuleFilter, dict[str, Any]]:
    if raw is None or raw == "":
        raw = {}
    if not isinstance(raw, Mapping):
        raise MalformedLifecycle(f"rule {rule_id!r}: <Filter> must be an element with children")
    given = [f for f in _FILTER_FIELDS if f in raw]
    unknown = set(raw) - set(_FILTER_FIELDS)
    if unknown:
        raise MalformedLifecycle(
            f"rule {rule_id!r}: unknown <Filter> member {values.names(unknown)}"
        )
    if len(given) > 1:
        raise MalformedLifecycle(
            f"rule {rule_id!r}: a <Filter> holds one condition; combine "
            f"{values.names(given)} in <And>"
        )
    if not given:
        return RuleFilter(), {}
    (name,) = given
    if name == "And":
        conditions = values.members(raw["And"], {"Prefix", "Tags", "Tag", *_SIZES}, "And")
        tags_raw = conditions.get("Tags", conditions.get("Tag", []))
        if isinstance(tags_raw, Mapping):
            tags_raw = [tags_raw]
        tags = _check_filter_tags(tags_raw)
        if not ({"Prefix", *_SIZES} & set(conditions)) and not tags:
            raise MalformedLifecycle(f"rule {rule_id!r}: an <And> needs at least one condition")
        combined = RuleFilter(
            prefix=values.text(conditions.get("Prefix"), "Prefix"),
            tags=tags,
            size_greater_than=_size(conditions, "ObjectSizeGreaterThan"),
            size_less_than=_size(conditions, "ObjectSizeLessThan"),
        )
        _check_sizes(combined)
        document: dict[str, Any] = {}
        if "Prefix" in conditions:
            document["Prefix"] = combined.prefix
        if tags:
            document["Tags"] = [{"Key": k, "Value": v} for k, v in tags]
        for field, value in (
            ("ObjectSizeGreaterThan", combined.size_greater_than),
            ("ObjectSizeLessThan", combined.size_less_than),
        ):
            if value is not None:
                document[field] = value
        return combined, {"And": document}
    if name == "Prefix":
        prefix = values.text(raw["Prefix"], "Prefix")
        return RuleFilter(prefix=prefix), {"Prefix": prefix}
    if name == "Tag":
        tags = _check_filter_tags([raw["Tag"]])
        return RuleFilter(tags=tags), {"Tag": {"Key": tags[0][0], "Value": tags[0][1]}}
    size = _size(raw, name)
    if name == "ObjectSizeGreaterThan":
        return RuleFilter(size_greater_than=size), {name: size}
    return RuleFilter(size_less_than=size), {name: size}


def _check_filter_tags(raw: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise MalformedLifecycle("filter tags must be <Tag> elements")
    tags: list[tuple[str, str]] = []
    for tag in raw:
        members = values.members(tag, {"Key", "Value"}, "Tag")
        if "Key" not in members:
            raise MalformedLifecycle("each filter <Tag> needs a <Key>")
        key, value = values.text(members["Key"], "Key"), values.text(members.get("Value"), "Value")
        if not key or len(key) > 128 or len(value) > 256:
            raise InvalidArgument(
                f"The TagKey you have provided is invalid: {key!r} (keys are 1 to 128 "
                "characters, values at most 256)"
            )
        if any(key == seen for seen, _ in tags):
            raise InvalidLifecycleRequest(f"Duplicate Tag Keys are not allowed: {key!r}")
        tags.append((key, value))
    return tuple(tags)


def _size(members: Mapping[str, Any], name: str) -> int | None:
    if members.get(name) is None:
        return None
    if name == "ObjectSizeGreaterThan":
        too_small, least = f"'{name}' must be a non-negative integer", 0
    else:
        too_small, least = f"'{name}' must be a positive integer", 1
    too_large = f"'{name}' must be at most {values.MAX_SIZE}"
    return values.integer(members[name], name, least, values.MAX_SIZE, too_small, too_large)


def _check_sizes(f: RuleFilter) -> None:
    if (
        f.size_greater_than is not None
        and f.size_less_than is not None
        and f.size_greater_than >= f.size_less_than
    ):
        raise InvalidArgument("'ObjectSizeGreaterThan' must be less than 'ObjectSizeLessThan'")


def _check_expiration(raw: Any, rule: LifecycleRule) -> tuple[LifecycleRule, dict[str, Any]]:
    members = values.members(raw, {"Days", "Date", "ExpiredObjectDeleteMarker"}, "Expiration")
    given = [m for m in ("Days", "Date", "ExpiredObjectDeleteMarker") if members.get(m) is not None]
    if len(given) != 1:
        raise MalformedLifecycle(
            f"rule {rule.id!r}: an <Expiration> needs exactly one of <Days>, <Date> and "
            f"<ExpiredObjectDeleteMarker>, got {values.names(given) or 'none'}"
        )
    if "Days" in given:
        days = values.days(members["Days"], "Days", "Expiration")
        return replace(rule, expiration_days=days), {"Days": days}
    if "Date" in given:
        date = values.midnight(members["Date"])
        return replace(rule, expiration_date=date), {
            "Date": date.isoformat().replace("+00:00", "Z")
        }
    marker = values.boolean(members["ExpiredObjectDeleteMarker"], "ExpiredObjectDeleteMarker")
    if marker and rule.filter.tags:
        raise InvalidLifecycleRequest("ExpiredObjectDeleteMarker cannot be specified with tags")
    return replace(rule, expired_object_delete_marker=marker), {"ExpiredObjectDeleteMarker": marker}


def _check_noncurrent(raw: Any, rule: LifecycleRule) -> tuple[LifecycleRule, dict[str, Any]]:
    members = values.members(
        raw, {"NoncurrentDays", "NewerNoncurrentVersions"}, "NoncurrentVersionExpiration"
    )
    days = values.days(
        members.get("NoncurrentDays"), "NoncurrentDays", "NoncurrentVersionExpiration"
    )
    document: dict[str, Any] = {"NoncurrentDays": days}
    newer = None
    if members.get("NewerNoncurrentVersions") is not None:
        refusal = (
            "'NewerNoncurrentVersions' for NoncurrentVersionExpiration action must be "
            f"between 1 and {MAX_NEWER_NONCURRENT}"
        )
        newer = values.integer(
            members["NewerNoncurrentVersions"],
            "NewerNoncurrentVersions",
            1,
            MAX_NEWER_NONCURRENT,
            refusal,
            refusal,
        )
        document["NewerNoncurrentVersions"] = newer
    return replace(rule, noncurrent_days=days, newer_noncurrent_versions=newer), document


def _generated_id() -> str:
    """A rule ID like the ones S3 makes up: base64 of a random UUID's text."""
    return base64.b64encode(str(uuid.uuid4()).encode()).decode().rstrip("=")


# --- storage -----------------------------------------------------------------------------


def rules_of(stored: Sequence[Mapping[str, Any]] | None) -> list[LifecycleRule]:
    """The typed rules of a stored configuration (`Bucket.lifecycle`); none for None."""
    if not stored:
        return []
    return check_lifecycle({"Rules": list(stored)})


def read_rule(stored: Any) -> LifecycleRule:
    """One rule of a stored configuration as today's checks read it, or their error: a rule
    stored before a check was added (a `Days` too large for a date) is refused here."""
    return _check_rule(stored)


def stored_id(stored: Any) -> str | None:
    """The ID a stored rule gives itself, for a log line (None: it has none)."""
    found = stored.get("ID") if isinstance(stored, Mapping) else None
    return found if isinstance(found, str) and found else None


def put_bucket_lifecycle(
    db: Metabase, loc: BucketLocation, configuration: Mapping[str, Any]
) -> list[LifecycleRule]:
    """Replace the bucket's lifecycle configuration; returns its rules (IDs filled in).
    Nothing is stored if any rule is refused."""
    rules = check_lifecycle(configuration)
    stored = [dict(r.document or {}) for r in rules]
    with db.write() as conn:
        get_bucket(conn, loc, lock="update")
        _store(conn, loc, stored)
    return rules


def get_bucket_lifecycle(db: Metabase, loc: BucketLocation) -> list[LifecycleRule]:
    """The bucket's lifecycle rules; `LifecycleNotFound` if it has no configuration (and
    `check_lifecycle`'s error if a stored rule no longer reads: see `lifecycle_documents`)."""
    return rules_of(_stored(db, loc))


def lifecycle_documents(db: Metabase, loc: BucketLocation) -> list[Mapping[str, Any]]:
    """The bucket's rules as GetBucketLifecycleConfiguration answers them: as stored, which
    is as checked when they were put. A rule stored before a later check (which the run now
    skips) is answered too, so its owner sees it and can replace it; `LifecycleNotFound` if
    the bucket has no configuration."""
    return [rule for rule in _stored(db, loc) if isinstance(rule, Mapping)]


def _stored(db: Metabase, loc: BucketLocation) -> list[Any]:
    """The stored configuration's rules (JSON: whatever was written)."""
    with db.read() as conn:
        stored: Any = get_bucket(conn, loc).lifecycle
    if not stored or not isinstance(stored, list):
        raise LifecycleNotFound(
            f"the lifecycle configuration does not exist for bucket {loc.bucket_name!r}"
        )
    rules: list[Any] = stored
    return rules


def delete_bucket_lifecycle(db: Metabase, loc: BucketLocation) -> None:
    """Remove the bucket's lifecycle configuration (none there is not an error, as in S3)."""
    with db.write() as conn:
        get_bucket(conn, loc, lock="update")
        _store(conn, loc, None)


def _store(conn: sa.Connection, loc: BucketLocation, stored: list[dict[str, Any]] | None) -> None:
    conn.execute(
        sa.update(buckets)
        .where(buckets.c.project_id == loc.project_id, buckets.c.name == loc.bucket_name)
        .values(lifecycle=sa.null() if stored is None else stored)
    )
