"""Bucket lifecycle configuration (S3 Put/Get/DeleteBucketLifecycleConfiguration): S3's
rules for a configuration, and its storage in `buckets.lifecycle`.

A configuration arrives as boto3 shapes it (`{"Rules": [{"ID", "Status", "Filter" |
"Prefix", "Expiration", ...}]}`; the gateway turns the XML into the same dict, numbers and
booleans still text) and is checked as S3 checks it: 1 to 1000 rules, unique IDs of at
most 255 characters (a missing ID is generated), Status `Enabled` or `Disabled`, exactly one
of `Filter` (empty, `Prefix`, `Tag`, `ObjectSizeGreaterThan`, `ObjectSizeLessThan` or
`And`) and the legacy rule-level `Prefix`, at least one action, an `Expiration` with exactly
one of `Days` (≥ 1), `Date` (midnight UTC) and `ExpiredObjectDeleteMarker`, no tag filter
with `ExpiredObjectDeleteMarker` or `AbortIncompleteMultipartUpload`. Transitions are
`NotImplemented`: ripple has one storage class. What is stored is the canonical document
(the one GetBucketLifecycleConfiguration answers); `LifecycleRule` is its typed reading,
which `lifecycle_run` applies.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

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
            f"a LifecycleConfiguration holds only <Rule>s, not {_names(extra)}"
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
            f"{_names(transitions)}: ripple has one storage class, so lifecycle transitions "
            "are not implemented; use Expiration actions"
        )
    unknown = set(raw) - _RULE_FIELDS
    if unknown:
        raise MalformedLifecycle(f"unknown lifecycle rule member {_names(unknown)}")
    rule_id = _text(raw.get("ID"), "ID") or _generated_id()
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
        prefix = _text(raw["Prefix"], "Prefix")
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
        abort = _members(raw["AbortIncompleteMultipartUpload"], {"DaysAfterInitiation"}, "Abort")
        days = _positive(
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
        raise MalformedLifecycle(f"rule {rule_id!r}: unknown <Filter> member {_names(unknown)}")
    if len(given) > 1:
        raise MalformedLifecycle(
            f"rule {rule_id!r}: a <Filter> holds one condition; combine {_names(given)} in <And>"
        )
    if not given:
        return RuleFilter(), {}
    (name,) = given
    if name == "And":
        conditions = _members(raw["And"], {"Prefix", "Tags", "Tag", *_SIZES}, "And")
        tags_raw = conditions.get("Tags", conditions.get("Tag", []))
        if isinstance(tags_raw, Mapping):
            tags_raw = [tags_raw]
        tags = _check_filter_tags(tags_raw)
        if not ({"Prefix", *_SIZES} & set(conditions)) and not tags:
            raise MalformedLifecycle(f"rule {rule_id!r}: an <And> needs at least one condition")
        combined = RuleFilter(
            prefix=_text(conditions.get("Prefix"), "Prefix"),
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
        prefix = _text(raw["Prefix"], "Prefix")
        return RuleFilter(prefix=prefix), {"Prefix": prefix}
    if name == "Tag":
        tags = _check_filter_tags([raw["Tag"]])
        return RuleFilter(tags=tags), {"Tag": {"Key": tags[0][0], "Value": tags[0][1]}}
    size = _size(raw, name)
    if name == "ObjectSizeGreaterThan":
        single = RuleFilter(size_greater_than=size)
    else:
        single = RuleFilter(size_less_than=size)
    _check_sizes(single)
    return single, {name: size}


def _check_filter_tags(raw: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise MalformedLifecycle("filter tags must be <Tag> elements")
    tags: list[tuple[str, str]] = []
    for tag in raw:
        members = _members(tag, {"Key", "Value"}, "Tag")
        if "Key" not in members:
            raise MalformedLifecycle("each filter <Tag> needs a <Key>")
        key, value = _text(members["Key"], "Key"), _text(members.get("Value"), "Value")
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
    return _integer(members[name], name)


def _check_sizes(f: RuleFilter) -> None:
    if f.size_greater_than is not None and f.size_greater_than < 0:
        raise InvalidArgument("'ObjectSizeGreaterThan' must be a non-negative integer")
    if f.size_less_than is not None and f.size_less_than <= 0:
        raise InvalidArgument("'ObjectSizeLessThan' must be a positive integer")
    if (
        f.size_greater_than is not None
        and f.size_less_than is not None
        and f.size_greater_than >= f.size_less_than
    ):
        raise InvalidArgument("'ObjectSizeGreaterThan' must be less than 'ObjectSizeLessThan'")


def _check_expiration(raw: Any, rule: LifecycleRule) -> tuple[LifecycleRule, dict[str, Any]]:
    members = _members(raw, {"Days", "Date", "ExpiredObjectDeleteMarker"}, "Expiration")
    given = [m for m in ("Days", "Date", "ExpiredObjectDeleteMarker") if members.get(m) is not None]
    if len(given) != 1:
        raise MalformedLifecycle(
            f"rule {rule.id!r}: an <Expiration> needs exactly one of <Days>, <Date> and "
            f"<ExpiredObjectDeleteMarker>, got {_names(given) or 'none'}"
        )
    if "Days" in given:
        days = _positive(members["Days"], "Days", "Expiration")
        return replace(rule, expiration_days=days), {"Days": days}
    if "Date" in given:
        date = _midnight(members["Date"])
        return replace(rule, expiration_date=date), {"Date": date.strftime("%Y-%m-%dT%H:%M:%SZ")}
    marker = _boolean(members["ExpiredObjectDeleteMarker"], "ExpiredObjectDeleteMarker")
    if marker and rule.filter.tags:
        raise InvalidLifecycleRequest("ExpiredObjectDeleteMarker cannot be specified with tags")
    return replace(rule, expired_object_delete_marker=marker), {"ExpiredObjectDeleteMarker": marker}


def _check_noncurrent(raw: Any, rule: LifecycleRule) -> tuple[LifecycleRule, dict[str, Any]]:
    members = _members(
        raw, {"NoncurrentDays", "NewerNoncurrentVersions"}, "NoncurrentVersionExpiration"
    )
    days = _positive(members.get("NoncurrentDays"), "NoncurrentDays", "NoncurrentVersionExpiration")
    document: dict[str, Any] = {"NoncurrentDays": days}
    newer = None
    if members.get("NewerNoncurrentVersions") is not None:
        newer = _integer(members["NewerNoncurrentVersions"], "NewerNoncurrentVersions")
        if not 1 <= newer <= MAX_NEWER_NONCURRENT:
            raise InvalidArgument(
                "'NewerNoncurrentVersions' for NoncurrentVersionExpiration action must be "
                f"between 1 and {MAX_NEWER_NONCURRENT}"
            )
        document["NewerNoncurrentVersions"] = newer
    return replace(rule, noncurrent_days=days, newer_noncurrent_versions=newer), document


# --- values, given as text (XML) or as Python values (boto3 shapes) ----------------------


def _members(raw: Any, allowed: set[str], what: str) -> Mapping[str, Any]:
    if raw is None or raw == "":
        return {}
    if not isinstance(raw, Mapping):
        raise MalformedLifecycle(f"<{what}> must be an element with children")
    unknown = set(raw) - allowed
    if unknown:
        raise MalformedLifecycle(f"unknown <{what}> member {_names(unknown)}")
    return raw


def _text(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedLifecycle(f"<{what}> must be text")
    return value


def _integer(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise MalformedLifecycle(f"<{what}> must be an integer")
    if isinstance(value, int):
        return value
    text = value.strip() if isinstance(value, str) else ""
    if not text.lstrip("-").isdigit():
        raise MalformedLifecycle(f"<{what}> must be an integer, got {value!r}")
    return int(text)


def _positive(value: Any, what: str, action: str) -> int:
    number = None if value is None else _integer(value, what)
    if number is None or number < 1:
        raise InvalidArgument(f"'{what}' for {action} action must be a positive integer")
    return number


def _boolean(value: Any, what: str) -> bool:
    if isinstance(value, bool):
        return value
    text = value.strip().lower() if isinstance(value, str) else ""
    if text not in ("true", "false"):
        raise MalformedLifecycle(f"<{what}> must be true or false, got {value!r}")
    return text == "true"


def _midnight(value: Any) -> datetime:
    if isinstance(value, datetime):
        when = value
    else:
        text = value.strip() if isinstance(value, str) else ""
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as e:
            raise MalformedLifecycle(f"<Date> must be an ISO 8601 date, got {value!r}") from e
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    if (when.hour, when.minute, when.second, when.microsecond) != (0, 0, 0, 0):
        raise InvalidArgument(f"'Date' must be at midnight GMT, got {value!s}")
    return when


def _names(names: Sequence[str] | set[str]) -> str:
    return ", ".join(f"<{n}>" for n in sorted(names))


def _generated_id() -> str:
    """A rule ID like the ones S3 makes up: base64 of a random UUID's text."""
    return base64.b64encode(str(uuid.uuid4()).encode()).decode().rstrip("=")


# --- storage -----------------------------------------------------------------------------


def rules_of(stored: Sequence[Mapping[str, Any]] | None) -> list[LifecycleRule]:
    """The typed rules of a stored configuration (`Bucket.lifecycle`); none for None."""
    if not stored:
        return []
    return check_lifecycle({"Rules": list(stored)})


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
    """The bucket's lifecycle rules; `LifecycleNotFound` if it has no configuration."""
    with db.read() as conn:
        bucket = get_bucket(conn, loc)
    if not bucket.lifecycle:
        raise LifecycleNotFound(
            f"the lifecycle configuration does not exist for bucket {loc.bucket_name!r}"
        )
    return rules_of(bucket.lifecycle)


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
