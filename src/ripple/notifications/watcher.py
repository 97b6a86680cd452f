"""Keeping a process's view of the eventing configuration in step with the database.

The topic and notification APIs write the configuration in the metabase database
(`EventingStore`); every change moves its generation. A `ConfigWatcher` polls the
generation (one indexed `max(id)` query) every `interval_s` and, when it moved, loads a
snapshot and hands it to `on_change`. The gateway applies the snapshot to its registry
(which buckets have eventing: their transactions write change records); a process that made
a change itself calls `refresh()` at once. The pipeline does not need the thread: it checks
the generation at the start of every batch (`ripple.pipeline.reconfigure`), so routing and
targets change together, between batches.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace

from ripple.notifications.phase1 import BucketKey
from ripple.notifications.registry import PROJECT_WIDE, Destination, Registry
from ripple.notifications.store import ConfigSnapshot, EventingStore

__all__ = ["ConfigWatcher", "routes_of"]

log = logging.getLogger(__name__)

# the `s3.configurationId` of bucket events sent to a project-wide notification
PROJECT_CONFIGURATION_ID = "ProjectEvents"


def routes_of(snapshot: ConfigSnapshot) -> dict[BucketKey, list[Destination]]:
    """Each bucket's destinations: its notifications whose topic exists, carrying tags and
    metadata in their events and seeing renames as the topic's arguments say
    (`Topic.includes`, `Topic.rename_events`); and under `(project, PROJECT_WIDE)` each
    project's topics with a `project-events` argument (`Topic.project_events`)."""
    routes: dict[BucketKey, list[Destination]] = {}
    for bucket, notifications in snapshot.notifications.items():
        destinations = []
        for n in notifications:
            stored = snapshot.topics.get(n.topic_arn)
            if stored is not None:
                tags, metadata = stored.topic.includes
                destinations.append(
                    replace(
                        n.destination(),
                        include_tags=tags,
                        include_metadata=metadata,
                        rename_events=stored.topic.rename_events,
                    )
                )
        if destinations:
            routes[bucket] = destinations
    for stored in snapshot.topics.values():  # project-wide notifications: bucket events
        events = stored.topic.project_events
        if events:
            routes.setdefault((stored.project_id, PROJECT_WIDE), []).append(
                Destination(stored.arn, PROJECT_CONFIGURATION_ID, events=events)
            )
    return routes


class ConfigWatcher:
    def __init__(
        self,
        store: EventingStore,
        on_change: Callable[[ConfigSnapshot], None],
        *,
        interval_s: float = 1.0,
    ) -> None:
        self.store = store
        self.on_change = on_change
        self.interval_s = interval_s
        self.generation = -1  # none loaded yet
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_registry(
        cls, store: EventingStore, registry: Registry, *, interval_s: float = 1.0
    ) -> ConfigWatcher:
        """A watcher that keeps `registry`'s API configuration current."""
        return cls(store, lambda s: registry.replace_api(routes_of(s)), interval_s=interval_s)

    def refresh(self, *, force: bool = False) -> ConfigSnapshot | None:
        """Load and apply the configuration if its generation moved; the snapshot if so."""
        with self._lock:
            if not force and self.store.generation() == self.generation:
                return None
            snapshot = self.store.snapshot()
            self.on_change(snapshot)
            self.generation = snapshot.generation
            return snapshot

    def start(self) -> None:
        """Load now, then poll in a daemon thread until `stop`."""
        self.refresh(force=True)
        self._thread = threading.Thread(target=self._run, name="eventing-config", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.refresh()
            except Exception as e:  # the database is away: keep the last configuration
                log.warning("cannot reload the eventing configuration: %s", e)
