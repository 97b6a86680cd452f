"""The phase-1 eventing list: `bucket-eventing.buckets` (`RIPPLE_BUCKET_EVENTING_BUCKETS`).

A comma-separated list of `project_id:bucket_name:topic_id` tuples, one per bucket with
eventing, each naming the Google Pub/Sub topic its events go to:

    4d0452d9-395d-498d-927f-a54a6544764e:my-bucket:projects/my-team/topics/events

`parse_eventing_buckets` turns it into `{(project id, bucket name): topic}`. A project may
list many buckets; a bucket has one topic. Whitespace around a tuple is ignored and an empty
value means no bucket has eventing. Anything else wrong raises `EventingConfigError` with
one line that quotes the tuple at fault, says what is wrong and what to write instead.
"""

from __future__ import annotations

import re
import uuid
from typing import TypeAlias

from ripple.metabase.buckets import InvalidBucketName, validate_bucket_name

__all__ = [
    "BucketKey",
    "EventingConfigError",
    "parse_eventing_buckets",
    "topic_name_problem",
]

# (project id, bucket name): where a bucket lives, the key of every eventing lookup.
BucketKey: TypeAlias = tuple[uuid.UUID, str]

_FORMAT = "project_id:bucket_name:topic_id"
_EXAMPLE = "4d0452d9-395d-498d-927f-a54a6544764e:my-bucket:projects/my-gcp-project/topics/events"
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_TOPIC = re.compile(r"^projects/(?P<project>[^/]*)/topics/(?P<topic>[^/]*)$")
_GCP_PROJECT = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
_TOPIC_ID_CHARS = re.compile(r"^[A-Za-z0-9\-_.~+%]*$")


class EventingConfigError(ValueError):
    """The phase-1 eventing list is malformed; the message is one line saying how to fix it."""


def topic_name_problem(topic: str) -> str | None:
    """What is wrong with a Google Pub/Sub topic name, or None if it is a valid one.

    A topic name is `projects/{project}/topics/{topic}`: the project is a GCP project id
    (6 to 30 lower-case letters, digits and hyphens, starting with a letter and not ending
    with a hyphen); the topic id is 3 to 255 letters, digits and `-_.~+%`, starting with a
    letter and not with `goog`.
    """
    match = _TOPIC.match(topic)
    if match is None:
        return f"topic {topic!r} is not of the form projects/GCP_PROJECT/topics/TOPIC_ID"
    project, topic_id = match["project"], match["topic"]
    if not _GCP_PROJECT.match(project):
        return (
            f"GCP project id {project!r} in topic {topic!r} must be 6 to 30 lower-case letters, "
            "digits and hyphens, starting with a letter and not ending with a hyphen"
        )
    if not 3 <= len(topic_id) <= 255:
        return (
            f"topic id {topic_id!r} in topic {topic!r} is {len(topic_id)} characters long; "
            "it must be 3 to 255"
        )
    if not topic_id[0].isascii() or not topic_id[0].isalpha():
        return f"topic id {topic_id!r} in topic {topic!r} must start with a letter"
    if not _TOPIC_ID_CHARS.match(topic_id):
        return (
            f"topic id {topic_id!r} in topic {topic!r} must have only letters, digits "
            "and the characters - _ . ~ + %"
        )
    if topic_id.startswith("goog"):
        return f"topic id {topic_id!r} in topic {topic!r} must not start with 'goog'"
    return None


def parse_eventing_buckets(value: str) -> dict[BucketKey, str]:
    """Parse the phase-1 list into `{(project id, bucket name): Pub/Sub topic name}`.

    Raises `EventingConfigError` for a tuple without three non-empty parts, a project id
    that is not a UUID, a bucket name S3 would refuse, a topic that is not a Pub/Sub topic
    name, or a bucket listed twice (even with the same topic).
    """
    buckets: dict[BucketKey, str] = {}
    first_entry: dict[BucketKey, str] = {}
    if not value.strip():
        return buckets
    for position, raw in enumerate(value.split(","), start=1):
        entry = raw.strip()
        if not entry:
            raise EventingConfigError(
                f"entry {position} is empty (two commas in a row, a leading or trailing comma, "
                f"or an empty string in the TOML list); remove it and write {_FORMAT} tuples "
                "separated by single commas"
            )
        key, topic = _parse_entry(entry)
        if key in first_entry:
            raise EventingConfigError(
                f"{first_entry[key]!r} and {entry!r} both name bucket {key[1]!r} of project "
                f"{key[0]}; a bucket has one topic, so keep only one of them"
            )
        first_entry[key] = entry
        buckets[key] = topic
    return buckets


def _parse_entry(entry: str) -> tuple[BucketKey, str]:
    parts = entry.split(":", 2)
    if len(parts) != 3:
        raise EventingConfigError(
            f"{entry!r} has {len(parts)} part{'s' if len(parts) > 1 else ''}, not 3; "
            f"write {_FORMAT}, e.g. {_EXAMPLE!r}"
        )
    project, bucket, topic = parts
    for name, part in (("project id", project), ("bucket name", bucket), ("topic", topic)):
        if not part:
            raise EventingConfigError(
                f"{entry!r} has an empty {name}; write {_FORMAT} with none of them empty, "
                f"e.g. {_EXAMPLE!r}"
            )
    if not _UUID.match(project):
        raise EventingConfigError(
            f"{entry!r}: project id {project!r} is not a UUID; write the project's id as "
            "8-4-4-4-12 hexadecimal digits, e.g. 4d0452d9-395d-498d-927f-a54a6544764e"
        )
    try:
        validate_bucket_name(bucket)
    except InvalidBucketName as e:
        raise EventingConfigError(f"{entry!r}: {e.message}") from e
    problem = topic_name_problem(topic)
    if problem is not None:
        raise EventingConfigError(f"{entry!r}: {problem}")
    return (uuid.UUID(project), bucket), topic
