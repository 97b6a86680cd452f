"""Pull subscriptions: events stored per subscription, pulled with a marker, acknowledged,
expired after each subscription's retention (the pubsub module's subscriptions).

    store = SubscriptionStore(metabase)
    store.create("audit", "projects/my-team/topics/events", format="compact")
    page = store.pull("audit", marker=None, max_entries=100)
    for event in page.events:
        store.ack("audit", event["id"])

The pipeline stores a topic's events through `ripple.targets.subscription.SubscriptionTarget`.
See docs/subscriptions.md.
"""

from ripple.subscriptions.compact import OBJECT_CREATE, OBJECT_DELETE, compact_event
from ripple.subscriptions.store import (
    DEFAULT_MAX_ENTRIES,
    DEFAULT_RETENTION_DAYS,
    FORMATS,
    MAX_ENTRIES,
    NoSuchSubscription,
    PullResult,
    Subscription,
    SubscriptionStore,
    subscription_name_problem,
)

__all__ = [
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_RETENTION_DAYS",
    "FORMATS",
    "MAX_ENTRIES",
    "OBJECT_CREATE",
    "OBJECT_DELETE",
    "NoSuchSubscription",
    "PullResult",
    "Subscription",
    "SubscriptionStore",
    "compact_event",
    "subscription_name_problem",
]
