"""Keeping a process's view of the eventing configuration in step with the database.

The topic and notification APIs write the configuration in the metabase database
(`EventingStore`); every change moves its generation. A `ConfigWatcher` polls the
generation (one indexed `max(id)` query) every `interval_s` and, when it moved, loads a
snapshot and hands it to `on_change`. The gateway applies the snapshot's routes
(`ConfigSnapshot.routes`) to its registry (which buckets have eventing: their transactions
write change records); a process that made a change itself calls `refresh()` at once. The
pipeline does not need the thread: it checks the generation at the start of every batch
(`ripple.pipeline.assemble`), so routing and targets change together, between batches.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ripple.notifications.registry import Registry
from ripple.notifications.store import ConfigSnapshot, EventingStore

__all__ = ["ConfigWatcher"]

log = logging.getLogger(__name__)


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
        return cls(
            store,
            lambda s: registry.replace_api(s.routes(), s.journals.keys()),
            interval_s=interval_s,
        )

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
