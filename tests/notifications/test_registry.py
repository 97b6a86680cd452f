"""The registry: eventing lookups, static list vs S3-API configurations, removal, generation."""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ripple.config import ConfigError, Settings, load_settings
from ripple.notifications import Destination, Registry

P1 = uuid.UUID("4d0452d9-395d-498d-927f-a54a6544764e")
P2 = uuid.UUID("0b6f2c1e-7d3a-4e59-8f10-2a3b4c5d6e7f")
T1 = "projects/my-team/topics/photos"
T2 = "projects/my-team/topics/logs"
WEBHOOK = Destination("projects/my-team/topics/api", "from-the-api")


def test_empty_registry() -> None:
    registry = Registry()
    assert not registry.is_eventing(P1, "photos")
    assert registry.destinations(P1, "photos") == []
    assert registry.buckets() == []
    assert registry.generation == 0


def test_static_entries() -> None:
    registry = Registry({(P1, "photos"): T1, (P1, "logs"): T2})
    assert registry.is_eventing(P1, "photos")
    assert registry.is_eventing(P1, "logs")
    assert registry.destinations(P1, "photos") == [Destination(T1, "ObjectEvents")]
    assert registry.destinations(P1, "logs") == [Destination(T2)]
    assert registry.buckets() == [(P1, "logs"), (P1, "photos")]


def test_lookup_needs_project_and_bucket_to_match() -> None:
    registry = Registry({(P1, "photos"): T1})
    assert not registry.is_eventing(P2, "photos")
    assert not registry.is_eventing(P1, "photos2")
    assert not registry.is_eventing(P1, "Photos")
    assert registry.destinations(P2, "photos") == []


def test_static_configuration_id_is_object_events() -> None:
    registry = Registry({(P1, "photos"): T1})
    [destination] = registry.destinations(P1, "photos")
    assert destination.configuration_id == "ObjectEvents"
    assert destination.topic == T1


def test_destinations_returns_a_copy() -> None:
    registry = Registry({(P1, "photos"): T1})
    registry.destinations(P1, "photos").append(WEBHOOK)
    assert registry.destinations(P1, "photos") == [Destination(T1)]


def test_api_entry_for_a_new_bucket() -> None:
    registry = Registry({(P1, "photos"): T1})
    registry.set_bucket(P2, "videos", [WEBHOOK, Destination(T2, "second")])
    assert registry.is_eventing(P2, "videos")
    assert registry.destinations(P2, "videos") == [WEBHOOK, Destination(T2, "second")]
    assert registry.buckets() == [(P2, "videos"), (P1, "photos")]


def test_api_entry_takes_precedence_and_removal_falls_back_to_static() -> None:
    registry = Registry({(P1, "photos"): T1})
    registry.set_bucket(P1, "photos", [WEBHOOK])
    assert registry.destinations(P1, "photos") == [WEBHOOK]
    registry.set_bucket(P1, "photos", [])
    assert registry.is_eventing(P1, "photos")
    assert registry.destinations(P1, "photos") == [Destination(T1)]


def test_removing_an_api_only_bucket_turns_eventing_off() -> None:
    registry = Registry()
    registry.set_bucket(P1, "photos", [WEBHOOK])
    registry.set_bucket(P1, "photos", ())
    assert not registry.is_eventing(P1, "photos")
    assert registry.destinations(P1, "photos") == []
    assert registry.buckets() == []


def test_api_entry_survives_replacing_the_static_list() -> None:
    registry = Registry({(P1, "photos"): T1, (P1, "logs"): T2})
    registry.set_bucket(P1, "photos", [WEBHOOK])
    registry.replace_static({(P2, "videos"): T2})
    assert registry.destinations(P1, "photos") == [WEBHOOK]
    assert not registry.is_eventing(P1, "logs")
    assert registry.destinations(P2, "videos") == [Destination(T2)]
    registry.set_bucket(P1, "photos", [])
    assert not registry.is_eventing(P1, "photos")


def test_set_bucket_keeps_its_own_copy_of_the_destinations() -> None:
    registry = Registry()
    destinations = [WEBHOOK]
    registry.set_bucket(P1, "photos", destinations)
    destinations.append(Destination(T1))
    assert registry.destinations(P1, "photos") == [WEBHOOK]


def test_generation_increases_on_every_change() -> None:
    registry = Registry()
    seen = [registry.generation]
    registry.replace_static({(P1, "photos"): T1})
    seen.append(registry.generation)
    registry.set_bucket(P1, "photos", [WEBHOOK])
    seen.append(registry.generation)
    registry.set_bucket(P1, "logs", [WEBHOOK])
    seen.append(registry.generation)
    registry.set_bucket(P1, "photos", [])
    seen.append(registry.generation)
    registry.replace_static({})
    seen.append(registry.generation)
    assert seen == sorted(set(seen))  # strictly increasing


def test_constructing_with_static_entries_is_a_change() -> None:
    assert Registry({(P1, "photos"): T1}).generation > Registry().generation


def test_generation_stays_when_nothing_changes() -> None:
    registry = Registry({(P1, "photos"): T1})
    before = registry.generation
    registry.replace_static({(P1, "photos"): T1})
    registry.set_bucket(P2, "never-set", [])
    assert registry.generation == before


def test_is_eventing_fits_the_metabase_eventing_callable() -> None:
    from ripple.metabase.db import Eventing

    registry = Registry({(P1, "photos"): T1})
    eventing: Eventing = registry.is_eventing
    assert eventing(P1, "photos")
    assert not eventing(P1, "logs")


def test_from_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no ripple.toml
    settings = load_settings(
        environ={"RIPPLE_BUCKET_EVENTING_BUCKETS": f"{P1}:photos:{T1},{P2}:logs:{T2}"}
    )
    registry = Registry(settings.eventing_buckets)
    assert registry.buckets() == [(P2, "logs"), (P1, "photos")]
    assert registry.destinations(P1, "photos") == [Destination(T1)]


def test_from_default_settings_is_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert Registry(load_settings(environ={}).eventing_buckets).buckets() == []


def test_from_settings_built_by_hand_with_a_bad_list() -> None:
    with pytest.raises(ConfigError, match=r"^bucket-eventing\.buckets \(RIPPLE_BUCKET_EVENTING"):
        Registry(Settings(bucket_eventing_buckets="photos").eventing_buckets)


@pytest.fixture
def _switch_often() -> Iterator[None]:
    """Make CPython switch threads far more often than usual, so races show up."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


@pytest.mark.usefixtures("_switch_often")
def test_readers_see_a_whole_state_while_writers_change_it() -> None:
    registry = Registry({(P1, "static"): T1})
    stop = threading.Event()
    problems: list[str] = []

    def read() -> None:
        while not stop.is_set():
            try:
                if not registry.is_eventing(P1, "static"):
                    problems.append("static bucket missing")
                destinations = registry.destinations(P1, "flapping")
                if destinations not in ([], [WEBHOOK]):
                    problems.append(f"unexpected destinations {destinations}")
                if (P1, "static") not in registry.buckets():
                    problems.append("static bucket not listed")
            except Exception as e:  # e.g. a dict changing size while it is iterated
                problems.append(repr(e))

    def write(name: str) -> None:
        for _ in range(1000):
            registry.set_bucket(P1, "flapping", [WEBHOOK])
            registry.set_bucket(P1, name, [WEBHOOK])
            registry.set_bucket(P1, "flapping", [])
            registry.set_bucket(P1, name, [])

    readers = [threading.Thread(target=read) for _ in range(2)]
    writers = [threading.Thread(target=write, args=(f"w{i}",)) for i in range(4)]
    for thread in readers + writers:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    for thread in readers:
        thread.join()
    assert problems == []
    # No change was lost: only the static bucket is left.
    assert registry.buckets() == [(P1, "static")]
    # Each writer's own bucket changed the routes 2000 times; none of them may be lost.
    assert registry.generation >= 1 + 4 * 2000
