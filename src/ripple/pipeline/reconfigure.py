"""The running pipeline follows the eventing configuration made through the APIs.

At the start of every batch the pipeline asks the database for the configuration's
generation (one indexed query). When it moved, it loads the topics and bucket notifications,
builds targets for the topics that are new or changed (a topic whose endpoint and arguments
are unchanged keeps its target and connections), hands them to the `Deliverer`, and only
then points the registry at the new routes: routes and targets change together, between
batches, so no event is routed to a topic without a target. A configuration change thus
reaches the pipeline with the next batch; the change records of a bucket's first events
come after its configuration, so the batch that holds them sees it.

A topic that cannot be built (its destination refused, say) is logged and kept pull-only:
its subscriptions still get its events.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ripple.notifications.registry import Registry
from ripple.notifications.store import ConfigSnapshot, EventingStore
from ripple.notifications.topics import PULL_ONLY, Topic
from ripple.notifications.watcher import routes_of
from ripple.pipeline.deliver import Deliverer, RetryPolicy
from ripple.pipeline.destinations import Destinations, build, topics_in_use
from ripple.subscriptions.store import SubscriptionStore
from ripple.targets.base import Target

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
        self._built: dict[str, tuple[Topic, list[Target], dict[str, RetryPolicy]]] = {}

    def initial(self) -> Destinations:
        """Load the configuration and build every topic's targets (`ValueError` for a topic
        of the configuration file that is wrong: that stops the start)."""
        snapshot = self.store.snapshot()
        for name, topic in topics_in_use(self.configured, self.registry).items():
            self._build(name, topic, strict=True)
        destinations = self._apply(snapshot)
        self.registry.replace_api(routes_of(snapshot))
        return destinations

    def check(self) -> bool:
        """Apply the configuration if it changed since it was last loaded; whether it did."""
        if self.store.generation() == self.generation:
            return False
        snapshot = self.store.snapshot()
        destinations = self._apply(snapshot)
        if self.deliverer is not None:
            self.deliverer.reconfigure(destinations.targets, destinations.policies)
        self.registry.replace_api(routes_of(snapshot))
        log.info(
            "eventing configuration %d loaded: %d API topics, %d buckets with notifications",
            snapshot.generation,
            len(snapshot.topics),
            len(snapshot.notifications),
        )
        return True

    def _apply(self, snapshot: ConfigSnapshot) -> Destinations:
        wanted = dict(topics_in_use(self.configured, self.registry))
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
