"""The `Filter` element of a TopicConfiguration: key, metadata and tag filter rules.

    rules = parse_filter(element)  # S3Error (InvalidArgument) if a rule is wrong
    add_filter(topic_configuration, rules)  # the GET document's Filter, if any rule

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
import xml.etree.ElementTree as ET
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

from ripple.gateway.errors import S3Error
from ripple.metabase.object_tagging import MAX_KEY_LENGTH, MAX_TAGS, MAX_VALUE_LENGTH
from ripple.notifications.registry import metadata_name

__all__ = ["FilterRules", "add_filter", "children", "invalid", "parse_filter"]

MALFORMED_XML: Final = (
    "The XML you provided was not well-formed or did not validate against our published schema"
)
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


def parse_filter(element: ET.Element | None) -> FilterRules:
    """The rules of a TopicConfiguration's `Filter` (None: no filter, no rules)."""
    if element is None:
        return FilterRules()
    children(element, {"S3Key", "S3Metadata", "S3Tags"})
    key_rules: dict[str, str] = {}
    for raw_name, value in _rules(element.find("S3Key")):
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
        metadata=_metadata_rules(element.find("S3Metadata")),
        tags=_tag_rules(element.find("S3Tags")),
    )


def add_filter(parent: ET.Element, rules: FilterRules) -> None:
    """Add the GET document's `Filter` for these rules to `parent`, unless there are none.
    Key rule names are written `Prefix`, `Suffix` and `Regex`, as S3 answers
    (aws/aws-sdk#389); metadata and tag rules as they were sent."""
    values = (rules.prefix, rules.suffix, rules.regex)
    key_rules = tuple((name, v) for name, v in zip(_KEY_RULE_NAMES, values, strict=True) if v)
    groups = (("S3Key", key_rules), ("S3Metadata", rules.metadata), ("S3Tags", rules.tags))
    if not any(group for _, group in groups):
        return
    filter_ = ET.SubElement(parent, "Filter")
    for tag, group in groups:
        if group:
            group_element = ET.SubElement(filter_, tag)
            for name, value in group:
                rule = ET.SubElement(group_element, "FilterRule")
                ET.SubElement(rule, "Name").text = name
                ET.SubElement(rule, "Value").text = value


def _metadata_rules(element: ET.Element | None) -> Rules:
    metadata: list[tuple[str, str]] = []
    for raw_name, value in _rules(element):
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


def _tag_rules(element: ET.Element | None) -> Rules:
    tags: list[tuple[str, str]] = []
    for name, value in _rules(element):
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


def _rules(element: ET.Element | None) -> list[tuple[str, str]]:
    """The (Name, Value) of each FilterRule in `element`, both as sent (not stripped)."""
    if element is None:
        return []
    rules = []
    for rule in children(element, {"FilterRule"}, repeated={"FilterRule"}):
        children(rule, {"Name", "Value"})
        name = rule.findtext("Name") or ""
        value = rule.findtext("Value") or ""
        if len(value) > MAX_FILTER_VALUE_LENGTH:
            raise invalid(
                f"The value of the {name.strip()} filter rule is longer than "
                f"{MAX_FILTER_VALUE_LENGTH} characters",
                "FilterRule",
                name.strip(),
            )
        rules.append((name, value))
    return rules


def children(
    element: ET.Element, allowed: Collection[str], repeated: Collection[str] = ()
) -> list[ET.Element]:
    """The element's children; MalformedXML if one is unknown, or repeated but not in
    `repeated`, or if there is text besides whitespace between them."""
    found = list(element)
    tags = [child.tag for child in found]
    for tag in tags:
        if tag not in allowed or (tag not in repeated and tags.count(tag) > 1):
            raise S3Error("MalformedXML", MALFORMED_XML)
    texts = [element.text, *(child.tail for child in found)] if found else []
    if any((text or "").strip() for text in texts):
        raise S3Error("MalformedXML", MALFORMED_XML)
    return found


def invalid(message: str, name: str, value: str) -> S3Error:
    """S3's InvalidArgument error naming the argument and its value."""
    return S3Error("InvalidArgument", message, extra={"ArgumentName": name, "ArgumentValue": value})
