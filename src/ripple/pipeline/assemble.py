"""The pipeline's routes and targets, assembled from the eventing configuration.

Routes come from the phase-1 list and a snapshot of the API configuration; targets from the
configuration file's topics, a default one for each the phase-1 list names otherwise, and
the snapshot's topics (`ripple.targets.destinations.build`). `RoutesAndTargets` assembles
them at start and again when the configuration's generation moved (`check`: one indexed
query); a topic whose endpoint and arguments are unchanged keeps its targets. The
`Deliverer`'s targets and the registry's routes are swapped together while no batch is
between routing and delivery (`Deliverer.exclusive`), so no event is routed to a topic
without a target. A user's topic never stops the pipeline: one that cannot be built is kept
pull-only, one that cannot be opened answers `retry` until it opens (`unopened.Unopened`).

When a change takes effect: docs/pipeline.md, "Where the work runs".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ripple.notifications.phase1 import BucketKey
from ripple.notifications.registry import Registry
from ripple.notifications.store import ConfigSnapshot, EventingStore
from ripple.notifications.topics import PULL_ONLY, Topic
from ripple.pipeline.deliver import Deliverer
from ripple.subscriptions.store import SubscriptionStore
from ripple.targets.base import Target
from ripple.targets.destinations import Destinations, build
from ripple.targets.retry import RetryPolicy

__all__ = ["RoutesAndTargets"]

log = logging.getLogger(__name__)


class RoutesAndTargets:
    def __init__(
        self,
        topics: Mapping[str, Topic],  # the configuration file's
        phase1: Mapping[BucketKey, str],  # the phase-1 list: each bucket's Pub/Sub topic
        registry: Registry,  # the routes, set here
        store: EventingStore,  # the API configuration
        subscriptions: SubscriptionStore,
        default: RetryPolicy | None = None,
    ) -> None:
        self.topics = dict(topics)
        self.phase1 = dict(phase1)
        self.registry = registry
        self.store = store
        self.subscriptions = subscriptions
        self.default = default
        self.generation = -1
        self.deliverer: Deliverer | None = None  # set once built; reconfigured from then on
        # the topics of the file and the phase-1 list: built at start, refused if wrong
        self.static = dict(self.topics)
        for _bucket, name in sorted(self.phase1.items()):
            self.static.setdefault(name, Topic(name))
        self._built: dict[str, tuple[Topic, list[Target], dict[str, RetryPolicy]]] = {}

    def assemble(self) -> Destinations:
        """Set the registry's routes and build every topic's targets (`ValueError` for a
        topic of the configuration file that is wrong: that stops the start)."""
        snapshot = self.store.snapshot()
        for name, topic in self.static.items():
            self._build(name, topic, strict=True)
        destinations = self._apply(snapshot)
        self.registry.replace_static(self.phase1)
        self.registry.replace_api(snapshot.routes(), snapshot.journals.keys())
        return destinations

    def check(self) -> bool:
        """Apply the configuration if it changed since it was last loaded; whether it did.

        The two queries' batch threads and the driver's main loop all call it: the
        deliverer's lock (re-entrant, and already held by a batch) makes one check at a
        time, so `_built` is never changed while another walks it."""
        if self.deliverer is None:
            return self._check()
        with self.deliverer.exclusive():
            return self._check()

    def _check(self) -> bool:
        if self.store.generation() == self.generation:
            return False
        snapshot = self.store.snapshot()
        destinations = self._apply(snapshot)
        if self.deliverer is None:
            self.registry.replace_api(snapshot.routes(), snapshot.journals.keys())
        else:
            with self.deliverer.exclusive():  # no batch routes between the two swaps
                self.deliverer.reconfigure(destinations.targets, destinations.policies)
                self.registry.replace_api(snapshot.routes(), snapshot.journals.keys())
        log.info(
            "eventing configuration %d loaded: %d API topics, %d buckets with notifications",
            snapshot.generation,
            len(snapshot.topics),
            len(snapshot.notifications),
        )
        return True

    def _apply(self, snapshot: ConfigSnapshot) -> Destinations:
        """The targets of the static topics and the snapshot's, building those that are new
        or changed and dropping those that are gone."""
        wanted = dict(self.static)
        for arn, stored in snapshot.topics.items():
            wanted[arn] = stored.topic
        for name in list(self._built):
            if name not in wanted:
                del self._built[name]
        for name, topic in wanted.items():
            if name not in self._built or self._built[name][0] != topic:
                self._build(name, topic, strict=False)
        self.generation = snapshot.generation
        built = Destinations()
        for name, (_, targets, policies) in self._built.items():
            built.targets[name] = targets
            built.policies.update(policies)
        return built

    def _build(self, name: str, topic: Topic, *, strict: bool) -> None:
        try:
            made = build({name: topic}, self.subscriptions, self.default)
        except ValueError as e:
            if strict:
                raise
            log.error("topic %s cannot be built, so it is pull-only for now: %s", name, e)
            made = build({name: Topic(name, PULL_ONLY)}, self.subscriptions, self.default)
        self._built[name] = (topic, made.targets[name], made.policies)
