"""The filter rules of a bucket notification: key, metadata and tag rules, checked as S3
checks a TopicConfiguration's `Filter` (the gateway reads and writes its XML,
`ripple.gateway.notification_xml`).

    rules = filter_rules(key, metadata, tags)  # (Name, Value) pairs as sent; NotificationError

- `S3Key/FilterRule`: Name `prefix` or `suffix` (any case), as in S3, plus the extension
  `regex`, a Python regular expression the whole key must match.
- `S3Metadata/FilterRule` (an extension): user metadata Name and Value, names compared
  without case and without `x-amz-meta-`, values exactly.
- `S3Tags/FilterRule` (an extension, as another object store has it): tag key (Name) and
  value, both compared exactly, case-sensitively, as S3 compares tags. An object has at
  most 10 tags of keys of at most 128 characters and values of at most 256, so a rule set
  no object could hold is refused: more than 10 rules, a Name given twice, an empty Name,
  a Name or Value longer than a tag's.

Every error is `InvalidArgument` with ArgumentName `FilterRule` and the rule in question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ripple.metabase.object_tagging import MAX_KEY_LENGTH, MAX_TAGS, MAX_VALUE_LENGTH
from ripple.notifications.errors import invalid
from ripple.notifications.registry import metadata_name

__all__ = ["FilterRules", "filter_rules"]

MAX_FILTER_VALUE_LENGTH: Final = 1024
MAX_TAG_RULES: Final = MAX_TAGS
_KEY_RULE_NAMES: Final = ("Prefix", "Suffix", "Regex")  # as GET writes them

Rules = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class FilterRules:
    """What a Filter element says: key rules, and (name, value) metadata and tag rules."""

    prefix: str = ""
    suffix: str = ""
    regex: str | None = None
    metadata: Rules = ()
    tags: Rules = ()

    def key_rules(self) -> Rules:
        """The key rules as a GET answers them: `Prefix`, `Suffix` and `Regex`, as S3 writes
        them (aws/aws-sdk#389), each only if set."""
        values = (self.prefix, self.suffix, self.regex)
        return tuple((name, v) for name, v in zip(_KEY_RULE_NAMES, values, strict=True) if v)


def filter_rules(
    key: Sequence[tuple[str, str]] = (),
    metadata: Sequence[tuple[str, str]] = (),
    tags: Sequence[tuple[str, str]] = (),
) -> FilterRules:
    """The rules of a `Filter` from its (Name, Value) pairs as sent (not stripped): key rules
    (`S3Key`), metadata rules (`S3Metadata`), tag rules (`S3Tags`); NotificationError
    (InvalidArgument) naming the first rule that is wrong."""
    key_rules: dict[str, str] = {}
    for raw_name, value in _checked_values(key):
        rule_name = raw_name.strip()
        name = rule_name.lower()
        if name not in ("prefix", "suffix", "regex"):
            raise invalid(
                "filter rule name must be either prefix or suffix (or regex, a ripple extension)",
                "FilterRule",
                rule_name,
            )
        if name in key_rules:
            raise invalid(
                f"Cannot specify more than one {name} rule in a filter.", "FilterRule", name
            )
        key_rules[name] = value
    regex = key_rules.get("regex")
    if regex is not None:
        try:
            re.compile(regex)
        except (re.error, OverflowError, RecursionError) as e:
            # OverflowError: a repeat count past the engine's (`a{4294967296}`);
            # RecursionError: groups nested too deeply for the compiler
            raise invalid(
                f"The regex filter rule is not a valid regular expression: {e}", "FilterRule", regex
            ) from None
    return FilterRules(
        prefix=key_rules.get("prefix", ""),
        suffix=key_rules.get("suffix", ""),
        regex=regex,
        metadata=_metadata_rules(metadata),
        tags=_tag_rules(tags),
    )


def _metadata_rules(rules: Sequence[tuple[str, str]]) -> Rules:
    metadata: list[tuple[str, str]] = []
    for raw_name, value in _checked_values(rules):
        name = raw_name.strip()
        if not metadata_name(name):
            raise invalid("A metadata filter rule needs a Name", "FilterRule", name)
        if any(metadata_name(name) == metadata_name(seen) for seen, _ in metadata):
            raise invalid(
                f"Cannot specify more than one metadata rule for {name} in a filter.",
                "FilterRule",
                name,
            )
        metadata.append((name, value))
    return tuple(metadata)


def _tag_rules(rules: Sequence[tuple[str, str]]) -> Rules:
    tags: list[tuple[str, str]] = []
    for name, value in _checked_values(rules):
        if not name.strip():
            raise invalid("A tag filter rule needs a Name: the tag key", "FilterRule", name)
        if len(name) > MAX_KEY_LENGTH:
            raise invalid(
                f"The Name of a tag filter rule is a tag key: at most {MAX_KEY_LENGTH} characters",
                "FilterRule",
                name,
            )
        if len(value) > MAX_VALUE_LENGTH:
            raise invalid(
                f"The Value of a tag filter rule is a tag value: at most {MAX_VALUE_LENGTH} "
                "characters",
                "FilterRule",
                name,
            )
        if any(name == seen for seen, _ in tags):
            raise invalid(
                f"Cannot specify more than one tag rule for {name} in a filter.", "FilterRule", name
            )
        tags.append((name, value))
    if len(tags) > MAX_TAG_RULES:
        raise invalid(
            f"Cannot specify more than {MAX_TAG_RULES} tag rules in a filter (an object has at "
            f"most {MAX_TAGS} tags); got {len(tags)}",
            "FilterRule",
            str(len(tags)),
        )
    return tuple(tags)


def _checked_values(rules: Sequence[tuple[str, str]]) -> Rules:
    """The rules, once no Value is longer than a filter value may be."""
    for name, value in rules:
        if len(value) > MAX_FILTER_VALUE_LENGTH:
            raise invalid(
                f"The value of the {name.strip()} filter rule is longer than "
                f"{MAX_FILTER_VALUE_LENGTH} characters",
                "FilterRule",
                name.strip(),
            )
    return tuple(rules)
