"""The running pipeline follows the eventing configuration made through the APIs.

At the start of every batch, and between batches every drain interval, the pipeline asks
the database for the configuration's generation (one indexed query). When it moved, it
loads the topics and bucket notifications, builds targets for the topics that are new or
changed (a topic whose endpoint and arguments are unchanged keeps its target and
connections), and swaps the `Deliverer`'s targets and the registry's routes together while
no batch is between routing and delivery (`Deliverer.exclusive`), so no event is routed to
a topic without a target. A configuration change thus reaches the pipeline within a drain
interval; the change records of a bucket's first events come after its configuration, so
the batch that holds them sees it.

A topic that cannot be built (its destination refused, say) is logged and kept pull-only:
its subscriptions still get its events. One that is built but cannot be opened (a broker
away) answers `retry` until it opens (`ripple.pipeline.unopened.Unopened`): a user's topic
never stops the pipeline.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ripple.notifications.registry import Registry
from ripple.notifications.store import ConfigSnapshot, EventingStore
from ripple.notifications.topics import PULL_ONLY, Topic
from ripple.pipeline.deliver import Deliverer
from ripple.subscriptions.store import SubscriptionStore
from ripple.targets.base import Target
from ripple.targets.destinations import Destinations, build, topics_in_use
from ripple.targets.retry import RetryPolicy

__all__ = ["Reconfigurer"]

log = logging.getLogger(__name__)


class Reconfigurer:
    def __init__(
        self,
        configured: Mapping[str, Topic],  # the topics of the configuration file
        registry: Registry,
        store: EventingStore,
        subscriptions: SubscriptionStore,
        default: RetryPolicy | None = None,
    ) -> None:
        self.configured = dict(configured)
        self.registry = registry
        self.store = store
        self.subscriptions = subscriptions
        self.default = default
        self.generation = -1
        self.deliverer: Deliverer | None = None  # set once built; reconfigured from then on
        self.static: dict[str, Topic] = {}  # the file's topics and the phase-1 list's
        self._built: dict[str, tuple[Topic, list[Target], dict[str, RetryPolicy]]] = {}

    def initial(self) -> Destinations:
        """Load the configuration and build every topic's targets (`ValueError` for a topic
        of the configuration file that is wrong: that stops the start)."""
        snapshot = self.store.snapshot()
        self.static = topics_in_use(self.configured, self.registry)  # before API routes
        for name, topic in self.static.items():
            self._build(name, topic, strict=True)
        destinations = self._apply(snapshot)
        self.registry.replace_api(snapshot.routes())
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
            self.registry.replace_api(snapshot.routes())
        else:
            with self.deliverer.exclusive():  # no batch routes between the two swaps
                self.deliverer.reconfigure(destinations.targets, destinations.policies)
                self.registry.replace_api(snapshot.routes())
        log.info(
            "eventing configuration %d loaded: %d API topics, %d buckets with notifications",
            snapshot.generation,
            len(snapshot.topics),
            len(snapshot.notifications),
        )
        return True

    def _apply(self, snapshot: ConfigSnapshot) -> Destinations:
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
