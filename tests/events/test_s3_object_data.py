"""`EventRecord.tags` and `EventRecord.metadata`: the object's tags and user metadata as the
change record carries them (for S3Tags / S3Metadata rules and for topics that add them to
events), never part of the event message itself."""

from __future__ import annotations

from typing import Any

from ripple.events import s3_events
from tests.events.records import OWNERS, commit, record, row, update


def with_values(records: list[dict[str, Any]], **values: Any) -> list[dict[str, Any]]:
    for r in records:
        for mod in r["mods"]:
            side = "old_values" if r["mod_type"] == "DELETE" else "new_values"
            mod[side].update(values)
    return records


def test_an_insert_carries_the_new_objects_tags_and_metadata() -> None:
    records = with_values(
        commit([], [row("a.jpg", 1, 3, size=3)]),
        tags={"env": "prod"},
        user_metadata={"camera": "x100v"},
    )
    [event] = s3_events(records, owners=OWNERS)
    assert event.tags == {"env": "prod"}
    assert event.metadata == {"camera": "x100v"}
    assert "tags" not in event.message["s3"]["object"]
    assert "metadata" not in event.message["s3"]["object"]


def test_a_delete_carries_the_removed_objects_tags() -> None:
    records = with_values(commit([row("a.jpg", 1, 3)], []), tags={"env": "old"})
    [event] = s3_events(records, owners=OWNERS)
    assert event.event_name == "ObjectRemoved:Delete"
    assert event.tags == {"env": "old"}


def test_no_tags_is_an_empty_mapping_and_an_unwatched_column_is_none() -> None:
    watched = with_values(commit([], [row("a", 1, 3)]), tags=None, user_metadata=None)
    [event] = s3_events(watched, owners=OWNERS)
    assert event.tags == {}  # the stream watches tags: the object has none
    assert event.metadata == {}
    [unwatched] = s3_events(commit([], [row("a", 1, 3)]), owners=OWNERS)
    assert unwatched.tags is None  # a record from before the stream watched tags
    assert unwatched.metadata is None


def test_a_tag_change_carries_the_tags_after_it() -> None:
    [put] = s3_events(
        [update("a", 1, 3, old_tags={"k": "old"}, new_tags={"k": "new", "x": "y"})],
        owners=OWNERS,
    )
    assert (put.event_name, put.tags) == ("ObjectTagging:Put", {"k": "new", "x": "y"})
    [removed] = s3_events([update("a", 1, 3, old_tags={"k": "v"}, new_tags=None)], owners=OWNERS)
    assert (removed.event_name, removed.tags) == ("ObjectTagging:Delete", {})


def test_a_tag_change_recorded_with_new_values_only_carries_its_tags() -> None:
    """Under NEW_VALUES an UPDATE carries only the changed columns: tags, not metadata."""
    r = row("a", 1, 3)
    mod = {"keys": r["keys"], "new_values": {"tags": {"k": "v"}}, "old_values": {}}
    [event] = s3_events([record("UPDATE", [mod], capture="NEW_VALUES")], owners=OWNERS)
    assert event.tags == {"k": "v"}
    assert event.metadata is None
