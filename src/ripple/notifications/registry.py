"""The registry: which buckets have eventing, and where their events go.

Two sources feed it: the static phase-1 list (`bucket-eventing.buckets`, one Pub/Sub topic a
bucket, configuration id `ObjectEvents`) and, later, bucket notification configurations set
through the S3 API. They are kept apart: a bucket's API configuration takes precedence over
its static entry, and removing the API configuration falls back to the static one.

The metabase asks `is_eventing` for every row a write transaction changes (transaction
exclusion), so reads take no lock and do no I/O: every change rebuilds one merged dict under
a lock and then swaps the reference, and readers only ever look at the current reference.

    registry = Registry(settings.eventing_buckets)
    metabase = Metabase(settings.effective_database_url, eventing=registry.is_eventing)
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ripple.events.names import matches
from ripple.notifications.phase1 import BucketKey

__all__ = [
    "ALL_EVENTS",
    "PHASE1_CONFIGURATION_ID",
    "PROJECT_CONFIGURATION_ID",
    "PROJECT_WIDE",
    "Destination",
    "Registry",
]

# `s3.configurationId` of the events of a bucket on the phase-1 list.
PHASE1_CONFIGURATION_ID = "ObjectEvents"


# The event types a phase-1 bucket sends: every created and removed event.
ALL_EVENTS = ("s3:ObjectCreated:*", "s3:ObjectRemoved:*")


@dataclass(frozen=True)
class Destination:
    """Where a bucket's events go, and the notification configuration that sends them there:
    its event types (`s3:ObjectCreated:*` wildcards), key, metadata and tag filters, and
    whether its events carry the object's tags and metadata (its topic's `include-tags` and
    `include-metadata` arguments: `ripple.notifications.store.ConfigSnapshot.routes`)."""

    topic: str  # phase 1: a Pub/Sub topic name, `projects/P/topics/T`
    configuration_id: str = PHASE1_CONFIGURATION_ID
    events: tuple[str, ...] = ALL_EVENTS
    prefix: str = ""
    suffix: str = ""
    regex: str | None = None  # the whole key must match (an extension filter rule)
    # S3Metadata rules: (name, value) the object's user metadata must hold, names compared
    # without case and without an x-amz-meta- prefix
    metadata: tuple[tuple[str, str], ...] = ()
    # S3Tags rules: (key, value) the object's tags must hold, compared exactly
    tags: tuple[tuple[str, str], ...] = ()
    include_tags: bool = False  # add s3.object.tags to the event
    include_metadata: bool = False  # add s3.object.metadata to the event
    # which of a rename's events it gets: "s3" (removed + created) or "single" (renamed)
    rename_events: str = "s3"

    def __post_init__(self) -> None:
        if self.regex is not None:
            re.compile(self.regex)  # a bad one fails here, not per event

    def wants(
        self,
        event_name: str,
        key: str,
        metadata: Mapping[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> bool:
        """Does this notification send an event of this name about this key (of an object
        with this user metadata and these tags; None: not known, so no rule on it holds)?"""
        return (
            key.startswith(self.prefix)
            and key.endswith(self.suffix)
            and any(matches(pattern, event_name) for pattern in self.events)
            and (self.regex is None or _compiled(self.regex).fullmatch(key) is not None)
            and (not self.metadata or _holds(self.metadata, metadata))
            and (not self.tags or _tagged(self.tags, tags))
        )


def _holds(rules: tuple[tuple[str, str], ...], metadata: Mapping[str, str] | None) -> bool:
    if metadata is None:
        return False
    have = {metadata_name(name): value for name, value in metadata.items()}
    return all(have.get(metadata_name(name)) == value for name, value in rules)


def _tagged(rules: tuple[tuple[str, str], ...], tags: Mapping[str, str] | None) -> bool:
    return tags is not None and all(tags.get(key) == value for key, value in rules)


def metadata_name(name: str) -> str:
    """A user metadata name as rules compare it: trimmed, lower case, without x-amz-meta-."""
    return name.strip().lower().removeprefix("x-amz-meta-")


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _compiled(regex: str) -> re.Pattern[str]:
    pattern = _PATTERNS.get(regex)
    if pattern is None:
        pattern = _PATTERNS[regex] = re.compile(regex)
    return pattern


# The bucket name under which a project's project-wide destinations are kept (bucket events:
# `BucketCreated:*`, `BucketRemoved:*`); no bucket has an empty name.
PROJECT_WIDE = ""
# The `s3.configurationId` of bucket events sent to a project-wide destination.
PROJECT_CONFIGURATION_ID = "ProjectEvents"


class Registry:
    """Eventing buckets and their destinations, from the static list and the S3 API."""

    def __init__(self, static: Mapping[BucketKey, str] | None = None) -> None:
        self._lock = threading.Lock()
        self._static: dict[BucketKey, tuple[Destination, ...]] = {}
        self._api: dict[BucketKey, tuple[Destination, ...]] = {}
        # The merged view readers see. Never mutated once published: changes build a new
        # dict and swap the reference.
        self._routes: dict[BucketKey, tuple[Destination, ...]] = {}
        # buckets whose events the journal takes (their transactions are recorded too)
        self._journaled: frozenset[BucketKey] = frozenset()
        self._generation = 0
        if static:
            self.replace_static(static)

    @property
    def generation(self) -> int:
        """A number that increases whenever a change alters what the registry answers."""
        return self._generation

    def is_eventing(self, project_id: uuid.UUID, bucket_name: str) -> bool:
        """Does this bucket have eventing (destinations, or a journal)? Lookups: no lock, no
        I/O."""
        key = (project_id, bucket_name)
        return key in self._routes or key in self._journaled

    def is_journaled(self, project_id: uuid.UUID, bucket_name: str) -> bool:
        """Does the journal take this bucket's events?"""
        return (project_id, bucket_name) in self._journaled

    def destinations(self, project_id: uuid.UUID, bucket_name: str) -> list[Destination]:
        """The bucket's destinations; empty when it has no eventing."""
        return list(self._routes.get((project_id, bucket_name), ()))

    def routes(self) -> dict[BucketKey, tuple[Destination, ...]]:
        """Every bucket's destinations (and the project-wide ones), as they are now."""
        return dict(self._routes)

    def buckets(self) -> list[BucketKey]:
        """Every bucket with destinations, sorted by project id and bucket name (the entries
        of project-wide destinations, `PROJECT_WIDE`, are no bucket; a bucket only
        journaled has none)."""
        return sorted(key for key in self._routes if key[1] != PROJECT_WIDE)

    def set_bucket(
        self, project_id: uuid.UUID, bucket_name: str, destinations: Sequence[Destination]
    ) -> None:
        """Set a bucket's destinations from its S3 notification configuration.

        It takes precedence over the bucket's static entry; an empty sequence removes the
        configuration, so the static entry, if any, applies again.
        """
        key = (project_id, bucket_name)
        with self._lock:
            if destinations:
                self._api[key] = tuple(destinations)
            else:
                self._api.pop(key, None)
            self._publish()

    def replace_api(
        self,
        routes: Mapping[BucketKey, Sequence[Destination]],
        journaled: Iterable[BucketKey] = (),
    ) -> None:
        """Replace every bucket's API configuration at once (a reload from the database):
        their destinations, and the buckets with a journal."""
        api = {key: tuple(ds) for key, ds in routes.items() if ds}
        with self._lock:
            self._api = api
            self._publish(frozenset(journaled))

    def replace_static(self, static: Mapping[BucketKey, str]) -> None:
        """Replace the whole phase-1 list: `{(project id, bucket name): topic}`."""
        entries: dict[BucketKey, tuple[Destination, ...]] = {
            key: (Destination(topic),) for key, topic in static.items()
        }
        with self._lock:
            self._static = entries
            self._publish()

    def _publish(self, journaled: frozenset[BucketKey] | None = None) -> None:
        """Rebuild the merged view (and the journaled buckets, if given); the caller holds
        the lock."""
        routes = {**self._static, **self._api}
        if journaled is not None and journaled != self._journaled:
            self._journaled = journaled
            self._generation += 1
        if routes == self._routes:
            return
        # Routes first, then the generation: a reader that sees the new generation also
        # sees the new routes, so a cache keyed by generation is never stale.
        self._routes = routes
        self._generation += 1
