"""The phase-1 eventing list: parsing `project_id:bucket_name:topic_id` tuples, and the one-line
errors that quote the tuple at fault."""

from __future__ import annotations

import uuid

import pytest

from ripple.notifications import EventingConfigError, parse_eventing_buckets, topic_name_problem

PROJECT = "4d0452d9-395d-498d-927f-a54a6544764e"
OTHER_PROJECT = "0b6f2c1e-7d3a-4e59-8f10-2a3b4c5d6e7f"
TOPIC = "projects/my-team/topics/events"
EXAMPLE = f"{PROJECT}:my-bucket:{TOPIC}"


def _error(value: str) -> str:
    with pytest.raises(EventingConfigError) as info:
        parse_eventing_buckets(value)
    message = str(info.value)
    assert "\n" not in message
    return message


# --- valid lists ---------------------------------------------------------------------


def test_design_example() -> None:
    value = (
        "4d0452d9-395d-498d-927f-a54a6544764e:my-bucket:"
        "projects/storj-developer-team/topics/bucket-eventing"
    )
    assert parse_eventing_buckets(value) == {
        (uuid.UUID(PROJECT), "my-bucket"): "projects/storj-developer-team/topics/bucket-eventing"
    }


def test_keys_are_uuids_and_bucket_names() -> None:
    [(project_id, bucket)] = parse_eventing_buckets(EXAMPLE)
    assert isinstance(project_id, uuid.UUID)
    assert project_id == uuid.UUID(PROJECT)
    assert bucket == "my-bucket"


def test_several_buckets_of_one_project_and_another_project() -> None:
    value = (
        f"{PROJECT}:photos:projects/my-team/topics/photos,"
        f"{PROJECT}:logs:projects/my-team/topics/logs,"
        f"{OTHER_PROJECT}:photos:projects/other-team/topics/photos"
    )
    assert parse_eventing_buckets(value) == {
        (uuid.UUID(PROJECT), "photos"): "projects/my-team/topics/photos",
        (uuid.UUID(PROJECT), "logs"): "projects/my-team/topics/logs",
        (uuid.UUID(OTHER_PROJECT), "photos"): "projects/other-team/topics/photos",
    }


def test_buckets_may_share_a_topic() -> None:
    value = f"{PROJECT}:photos:{TOPIC},{PROJECT}:logs:{TOPIC}"
    assert set(parse_eventing_buckets(value).values()) == {TOPIC}
    assert len(parse_eventing_buckets(value)) == 2


def test_whitespace_around_tuples_is_ignored() -> None:
    value = f"  {PROJECT}:photos:{TOPIC} ,\n\t{PROJECT}:logs:{TOPIC}\n"
    assert parse_eventing_buckets(value) == {
        (uuid.UUID(PROJECT), "photos"): TOPIC,
        (uuid.UUID(PROJECT), "logs"): TOPIC,
    }


@pytest.mark.parametrize("value", ["", " ", "\n\t "])
def test_empty_means_no_buckets(value: str) -> None:
    assert parse_eventing_buckets(value) == {}


def test_upper_case_project_id_is_the_same_project() -> None:
    assert parse_eventing_buckets(f"{PROJECT.upper()}:b-1:{TOPIC}") == {
        (uuid.UUID(PROJECT), "b-1"): TOPIC
    }


@pytest.mark.parametrize(
    "topic",
    [
        "projects/abcdef/topics/abc",  # shortest project id and topic id
        "projects/a23456789012345678901234567890/topics/top",  # 30-character project id
        f"projects/my-team/topics/T{'x' * 254}",  # 255-character topic id
        "projects/my-team/topics/Events_v1.0~a+b%20c-d",
        "projects/my-team-2/topics/gooey",  # starts with "goo", not "goog"
    ],
)
def test_valid_topics(topic: str) -> None:
    assert topic_name_problem(topic) is None
    assert parse_eventing_buckets(f"{PROJECT}:my-bucket:{topic}") == {
        (uuid.UUID(PROJECT), "my-bucket"): topic
    }


# --- malformed tuples ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "parts"),
    [
        ("my-bucket", "1 part,"),
        (f"{PROJECT}:my-bucket", "2 parts"),
        (f"{PROJECT}/my-bucket/{TOPIC}", "1 part,"),
    ],
)
def test_too_few_parts(entry: str, parts: str) -> None:
    message = _error(f"{EXAMPLE},{entry}")
    assert repr(entry) in message
    assert parts in message
    assert "project_id:bucket_name:topic_id" in message


def test_split_on_the_first_two_colons_only() -> None:
    # The third part keeps its colon, so the tuple is judged by its topic, not its part count.
    entry = f"{PROJECT}:my-bucket:projects/my-team/topics/a:b"
    message = _error(entry)
    assert repr(entry) in message
    assert "topic id 'a:b'" in message
    assert "parts" not in message


@pytest.mark.parametrize(
    ("entry", "empty"),
    [
        (f":my-bucket:{TOPIC}", "project id"),
        (f"{PROJECT}::{TOPIC}", "bucket name"),
        (f"{PROJECT}:my-bucket:", "topic"),
        ("::", "project id"),
    ],
)
def test_empty_part(entry: str, empty: str) -> None:
    message = _error(entry)
    assert repr(entry) in message
    assert f"has an empty {empty};" in message


@pytest.mark.parametrize(
    ("value", "position"),
    [
        (f"{EXAMPLE},", 2),
        (f",{EXAMPLE}", 1),
        (f"{EXAMPLE},  ,{PROJECT}:b-2:{TOPIC}", 2),
    ],
)
def test_empty_entry(value: str, position: int) -> None:
    message = _error(value)
    assert f"entry {position} is empty" in message
    assert "remove it" in message


# --- bad project ids -----------------------------------------------------------------


@pytest.mark.parametrize(
    "project",
    [
        "my-project",
        "4d0452d9-395d-498d-927f-a54a6544764",  # one digit short
        "4d0452d9395d498d927fa54a6544764e",  # no hyphens
        "{4d0452d9-395d-498d-927f-a54a6544764e}",
        "4d0452d9-395d-498d-927f-a54a654_764e",  # int(..., 16) would accept the underscore
        "4d0452d9-395d-498d-927f-a54a6544764g",
    ],
)
def test_bad_project_id(project: str) -> None:
    entry = f"{project}:my-bucket:{TOPIC}"
    message = _error(f"{EXAMPLE.replace('my-bucket', 'other')},{entry}")
    assert repr(entry) in message
    assert f"project id {project!r} is not a UUID" in message
    assert "4d0452d9-395d-498d-927f-a54a6544764e" in message


# --- bad bucket names ----------------------------------------------------------------


@pytest.mark.parametrize(
    "bucket",
    [
        "ab",
        "a" * 64,
        "My-Bucket",
        "my_bucket",
        "-bucket",
        "bucket-",
        "my..bucket",
        "192.168.1.1",
        " my-bucket",
    ],
)
def test_bad_bucket_name(bucket: str) -> None:
    entry = f"{PROJECT}:{bucket}:{TOPIC}"
    message = _error(entry)
    assert repr(entry) in message
    assert f"bucket name {bucket!r} must" in message


def test_longest_and_shortest_bucket_names_are_fine() -> None:
    value = f"{PROJECT}:{'a' * 63}:{TOPIC},{PROJECT}:abc:{TOPIC}"
    assert len(parse_eventing_buckets(value)) == 2


# --- duplicates ----------------------------------------------------------------------


@pytest.mark.parametrize("second_topic", [TOPIC, "projects/my-team/topics/other"])
def test_duplicate_bucket_names_both_tuples(second_topic: str) -> None:
    first = f"{PROJECT}:my-bucket:{TOPIC}"
    second = f"{PROJECT}:my-bucket:{second_topic}"
    message = _error(f"{first},{PROJECT}:logs:{TOPIC},{second}")
    assert f"{first!r} and {second!r}" in message
    assert "'my-bucket'" in message
    assert PROJECT in message
    assert "one topic" in message


def test_duplicate_found_across_spellings_of_the_project_id() -> None:
    first = f"{PROJECT}:my-bucket:{TOPIC}"
    second = f"{PROJECT.upper()}:my-bucket:{TOPIC}"
    message = _error(f"{first},{second}")
    assert f"{first!r} and {second!r}" in message


def test_same_bucket_name_in_two_projects_is_not_a_duplicate() -> None:
    value = f"{PROJECT}:my-bucket:{TOPIC},{OTHER_PROJECT}:my-bucket:{TOPIC}"
    assert len(parse_eventing_buckets(value)) == 2


# --- bad topics ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "says"),
    [
        ("events", "is not of the form projects/GCP_PROJECT/topics/TOPIC_ID"),
        ("projects/my-team/subscriptions/events", "projects/GCP_PROJECT/topics/TOPIC_ID"),
        ("projects/my-team/topics/events/extra", "projects/GCP_PROJECT/topics/TOPIC_ID"),
        ("/projects/my-team/topics/events", "projects/GCP_PROJECT/topics/TOPIC_ID"),
        ("projects/my-team/topics/", "topic id '' in topic 'projects/my-team/topics/' is 0"),
        ("projects/abcde/topics/events", "GCP project id 'abcde'"),  # 5 characters
        (f"projects/a{'b' * 30}/topics/events", "must be 6 to 30"),  # 31 characters
        ("projects/My-Team/topics/events", "GCP project id 'My-Team'"),
        ("projects/1-team/topics/events", "starting with a letter"),
        ("projects/my-team-/topics/events", "not ending with a hyphen"),
        ("projects/my_team/topics/events", "lower-case letters, digits and hyphens"),
        ("projects/my-team/topics/ev", "is 2 characters long; it must be 3 to 255"),
        (f"projects/my-team/topics/e{'x' * 255}", "is 256 characters long"),
        ("projects/my-team/topics/1events", "must start with a letter"),
        ("projects/my-team/topics/_events", "must start with a letter"),
        ("projects/my-team/topics/éevents", "must start with a letter"),
        ("projects/my-team/topics/ev ents", "only letters, digits and the characters"),
        ("projects/my-team/topics/evénts", "only letters, digits and the characters"),
        ("projects/my-team/topics/ev*nts", "only letters, digits and the characters"),
        ("projects/my-team/topics/google-events", "must not start with 'goog'"),
    ],
)
def test_bad_topic(topic: str, says: str) -> None:
    entry = f"{PROJECT}:my-bucket:{topic}"
    message = _error(entry)
    assert repr(entry) in message
    assert says in message
    problem = topic_name_problem(topic)
    assert problem is not None
    assert message == f"{entry!r}: {problem}"


def test_first_error_wins() -> None:
    bad_uuid = f"nope:my-bucket:{TOPIC}"
    bad_topic = f"{PROJECT}:logs:topic"
    message = _error(f"{EXAMPLE},{bad_uuid},{bad_topic}")
    assert repr(bad_uuid) in message
    assert repr(bad_topic) not in message
