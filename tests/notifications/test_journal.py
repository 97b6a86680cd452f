"""A bucket's journal configuration on SQLite and PostgreSQL: enabled from a moment that a
later change keeps, record expiration within S3's bounds, every change in the change log,
the snapshot and the registry (a journaled bucket's transactions are recorded), and a
deleted bucket's configuration gone with it."""

from __future__ import annotations

import time
import uuid

import pytest

from ripple.metabase import Metabase, create_project
from ripple.notifications.errors import NotificationError
from ripple.notifications.journal import Journal, JournalStore, journal_periods
from ripple.notifications.registry import Registry
from ripple.notifications.store import EventingStore
from ripple.notifications.watcher import ConfigWatcher


def test_a_journal_is_enabled_changed_and_disabled(db: Metabase) -> None:
    project = create_project(db, "alice")
    journals = JournalStore(db)
    assert journals.get(project.id, "photos") is None
    before = time.time_ns()
    first = journals.put(project.id, "photos", None, "alice")
    assert before <= first.enabled_ns <= time.time_ns()
    assert journals.get(project.id, "photos") == first == Journal(first.enabled_ns, None)
    # a new record expiration keeps the journal's start: no event is journaled twice or lost
    assert journals.put(project.id, "photos", 30, "alice") == Journal(first.enabled_ns, 30)
    assert journals.get(project.id, "photos") == Journal(first.enabled_ns, 30)
    assert journals.delete(project.id, "photos", "alice")
    assert not journals.delete(project.id, "photos", "alice")
    assert journals.get(project.id, "photos") is None
    with db.read() as conn:  # the pipeline still journals what was committed until now
        [(enabled, disabled)] = journal_periods(conn).values()
    assert enabled == first.enabled_ns < disabled <= time.time_ns()
    again = journals.put(project.id, "photos", None, "alice")  # a new period
    assert again.enabled_ns >= disabled
    with db.read() as conn:
        assert journal_periods(conn) == {(project.id, "photos"): (again.enabled_ns, None)}


@pytest.mark.parametrize("days", [0, 6, -1, 2**31])
def test_record_expiration_outside_s3s_bounds_is_refused(db: Metabase, days: int) -> None:
    project = create_project(db, "alice")
    with pytest.raises(NotificationError) as refused:
        JournalStore(db).put(project.id, "photos", days, "alice")
    assert refused.value.code == "InvalidArgument"
    assert refused.value.extra == {"ArgumentName": "Days", "ArgumentValue": str(days)}
    assert JournalStore(db).get(project.id, "photos") is None


def test_every_change_moves_the_generation(db: Metabase) -> None:
    project = create_project(db, "alice")
    store, journals = EventingStore(db), JournalStore(db)
    generations = [store.generation()]
    journals.put(project.id, "photos", None, "alice")
    generations.append(store.generation())
    journals.put(project.id, "photos", 7, "alice")
    generations.append(store.generation())
    journals.delete(project.id, "photos", "alice")
    generations.append(store.generation())
    assert generations == sorted(set(generations))
    assert [c["action"] for c in store.changes(3)] == [
        "delete-journal",
        "put-journal",
        "put-journal",
    ]


def test_a_journaled_bucket_has_eventing_through_the_watcher(db: Metabase) -> None:
    project = create_project(db, "alice")
    registry = Registry()
    watcher = ConfigWatcher.for_registry(EventingStore(db), registry)
    watcher.refresh(force=True)
    assert not registry.is_eventing(project.id, "photos")
    generation = registry.generation
    journal = JournalStore(db).put(project.id, "photos", None, "alice")
    snapshot = watcher.refresh()
    assert snapshot is not None
    assert snapshot.journals == {(project.id, "photos"): journal}
    assert registry.is_eventing(project.id, "photos")
    assert registry.routes() == {}  # no destination: the journal is the pipeline's own
    assert registry.generation > generation
    JournalStore(db).delete(project.id, "photos", "alice")
    watcher.refresh()
    assert not registry.is_eventing(project.id, "photos")


def test_a_deleted_bucket_takes_its_journal_configuration_along(db: Metabase) -> None:
    project = create_project(db, "alice")
    JournalStore(db).put(project.id, "photos", None, "alice")
    JournalStore(db).put(project.id, "videos", None, "alice")
    EventingStore(db).forget_bucket(project.id, "photos", "alice")
    assert JournalStore(db).get(project.id, "photos") is None
    assert set(EventingStore(db).snapshot().journals) == {(project.id, "videos")}
    with db.read() as conn:  # the events of the bucket's emptying are still journaled
        assert journal_periods(conn)[(project.id, "photos")][1] is not None
    assert JournalStore(db).get(uuid.uuid4(), "videos") is None
