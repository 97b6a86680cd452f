"""The eventing configuration made through the APIs, kept in the metabase database.

Topics belong to a project and are named by their ARN everywhere past the API; bucket
notifications name a topic by its ARN. Every change is one transaction that also appends a
row to `eventing_changes` (who, what, when) and logs it: that row's id is the
configuration's generation, so a process knows it must reload when the newest id moves
(`ConfigWatcher`), and the table is the audit trail. A loaded `ConfigSnapshot` says where
each bucket's events go (`ConfigSnapshot.routes`), a function of the snapshot alone.

Deleting a topic deletes the bucket notifications that name it (in the same transaction),
so no bucket is left sending events to a topic that is gone. On PostgreSQL, change ids are
drawn under an advisory lock held to the commit, so they follow commit order: a process that
loaded generation N has every change up to N.
"""

from __future__ import annotations

import builtins
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ripple.metabase import Metabase
from ripple.notifications.changes import audit, record_change
from ripple.notifications.configuration import (
    Notification,
    notification_from_json,
    notification_to_json,
)
from ripple.notifications.journal import Journal, disable_journal, journals
from ripple.notifications.phase1 import BucketKey
from ripple.notifications.registry import PROJECT_CONFIGURATION_ID, PROJECT_WIDE, Destination
from ripple.notifications.schema import bucket_notifications, eventing_changes, topics
from ripple.notifications.topics import Topic

__all__ = ["ConfigSnapshot", "EventingStore", "StoredTopic", "topic_arn"]

log = logging.getLogger(__name__)


def topic_arn(region: str, owner_public_id: str, name: str) -> str:
    """`arn:aws:sns:<region>:<project public id>:<name>`."""
    return f"arn:aws:sns:{region}:{owner_public_id}:{name}"


@dataclass(frozen=True)
class StoredTopic:
    project_id: uuid.UUID
    name: str
    arn: str
    push_endpoint: str
    arguments: Mapping[str, str] = field(default_factory=dict)
    created_at_ns: int = 0
    updated_at_ns: int = 0

    @property
    def topic(self) -> Topic:
        """The pipeline's topic: named by the ARN, pushed where the endpoint says."""
        return Topic(self.arn, self.push_endpoint or "none", dict(self.arguments), self.name)


@dataclass(frozen=True)
class ConfigSnapshot:
    """Everything the APIs configured, as of one generation."""

    generation: int
    topics: dict[str, StoredTopic]  # by ARN
    notifications: dict[BucketKey, list[Notification]]
    journals: dict[BucketKey, Journal] = field(default_factory=dict)  # the journaled buckets

    def routes(self) -> dict[BucketKey, list[Destination]]:
        """Each bucket's destinations: its notifications whose topic exists, carrying tags
        and metadata in their events and seeing renames as the topic's arguments say
        (`Topic.includes`, `Topic.rename_events`); and under `(project, PROJECT_WIDE)` each
        project's topics with a `project-events` argument (`Topic.project_events`)."""
        routes: dict[BucketKey, list[Destination]] = {}
        for bucket, notifications in self.notifications.items():
            destinations = []
            for n in notifications:
                stored = self.topics.get(n.topic_arn)
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
        for stored in self.topics.values():  # project-wide notifications: bucket events
            events = stored.topic.project_events
            if events:
                routes.setdefault((stored.project_id, PROJECT_WIDE), []).append(
                    Destination(stored.arn, PROJECT_CONFIGURATION_ID, events=events)
                )
        return routes


class EventingStore:
    def __init__(self, db: Metabase) -> None:
        self.db = db

    # topics ----------------------------------------------------------------------------------

    def put_topic(
        self,
        project_id: uuid.UUID,
        name: str,
        arn: str,
        push_endpoint: str,
        arguments: Mapping[str, str],
        principal: str,
    ) -> StoredTopic:
        """Create the topic, or replace its endpoint and arguments if it exists."""
        now = time.time_ns()
        args = orjson.dumps(dict(arguments)).decode()

        def run(conn: Connection) -> tuple[StoredTopic, str]:
            where = (topics.c.project_id == project_id) & (topics.c.name == name)
            old = conn.execute(sa.select(topics.c.created_at_ns).where(where)).first()
            if old is None:
                conn.execute(
                    sa.insert(topics).values(
                        project_id=project_id,
                        name=name,
                        arn=arn,
                        push_endpoint=push_endpoint,
                        arguments=args,
                        created_at_ns=now,
                        updated_at_ns=now,
                    )
                )
                created = now
            else:
                conn.execute(
                    sa.update(topics)
                    .where(where)
                    .values(arn=arn, push_endpoint=push_endpoint, arguments=args, updated_at_ns=now)
                )
                created = old.created_at_ns
            line = record_change(conn, principal, "update-topic" if old else "create-topic", arn)
            topic = StoredTopic(project_id, name, arn, push_endpoint, dict(arguments), created, now)
            return topic, line

        topic, line = self.db.run_write(run)
        audit(line)
        return topic

    def get_topic(self, project_id: uuid.UUID, name: str) -> StoredTopic | None:
        with self.db.read() as conn:
            row = conn.execute(
                sa.select(topics).where(
                    (topics.c.project_id == project_id) & (topics.c.name == name)
                )
            ).first()
        return None if row is None else _topic(row._mapping)

    def topic_by_arn(self, arn: str) -> StoredTopic | None:
        with self.db.read() as conn:
            row = conn.execute(sa.select(topics).where(topics.c.arn == arn)).first()
        return None if row is None else _topic(row._mapping)

    def list_topics(self, project_id: uuid.UUID | None = None) -> builtins.list[StoredTopic]:
        query = sa.select(topics).order_by(topics.c.project_id, topics.c.name)
        if project_id is not None:
            query = query.where(topics.c.project_id == project_id)
        with self.db.read() as conn:
            return [_topic(r._mapping) for r in conn.execute(query)]

    def delete_topic(self, project_id: uuid.UUID, name: str, principal: str) -> bool:
        """Delete the topic and the bucket notifications that name it; False if none."""

        def run(conn: Connection) -> str | None:
            where = (topics.c.project_id == project_id) & (topics.c.name == name)
            row = conn.execute(sa.select(topics.c.arn).where(where)).first()
            if row is None:
                return None
            conn.execute(sa.delete(topics).where(where))
            dropped = conn.execute(
                sa.delete(bucket_notifications).where(bucket_notifications.c.topic_arn == row.arn)
            ).rowcount
            subject = row.arn + (f" and {dropped} notification(s) naming it" if dropped else "")
            return record_change(conn, principal, "delete-topic", subject)

        line = self.db.run_write(run)
        audit(line)
        return line is not None

    # bucket notifications ----------------------------------------------------------------------

    def put_notifications(
        self,
        project_id: uuid.UUID,
        bucket: str,
        notifications: Sequence[Notification],
        principal: str,
    ) -> None:
        """Replace the bucket's whole configuration (an empty one removes it)."""
        now = time.time_ns()

        def run(conn: Connection) -> str:
            conn.execute(sa.delete(bucket_notifications).where(_of(project_id, bucket)))
            if notifications:
                conn.execute(
                    sa.insert(bucket_notifications),
                    [
                        {
                            "project_id": project_id,
                            "bucket_name": bucket,
                            "id": n.id,
                            "topic_arn": n.topic_arn,
                            "notification": orjson.dumps(notification_to_json(n)).decode(),
                            "created_at_ns": now,
                        }
                        for n in notifications
                    ],
                )
            ids = ", ".join(n.id for n in notifications) or "none"
            return record_change(conn, principal, "put-notifications", f"{bucket}: {ids}")

        audit(self.db.run_write(run))

    def notifications(self, project_id: uuid.UUID, bucket: str) -> builtins.list[Notification]:
        with self.db.read() as conn:
            rows = conn.execute(
                sa.select(bucket_notifications.c.notification)
                .where(_of(project_id, bucket))
                .order_by(bucket_notifications.c.created_at_ns, bucket_notifications.c.id)
            ).all()
        return [notification_from_json(orjson.loads(r.notification)) for r in rows]

    def upsert_notification(
        self,
        project_id: uuid.UUID,
        bucket: str,
        notification: Notification,
        principal: str,
        *,
        check: Callable[[builtins.list[Notification]], None] | None = None,
    ) -> bool:
        """Add one notification to the bucket's, or replace the one of the same Id (in its
        place), keeping the others; True if it replaced one. `check` is given the bucket's
        notifications as they would be, in the transaction, and may raise to refuse."""
        now = time.time_ns()

        def run(conn: Connection) -> tuple[bool, str]:
            rows = conn.execute(
                sa.select(bucket_notifications.c.notification, bucket_notifications.c.created_at_ns)
                .where(_of(project_id, bucket))
                .order_by(bucket_notifications.c.created_at_ns, bucket_notifications.c.id)
            ).all()
            current = [(notification_from_json(orjson.loads(r[0])), r[1]) for r in rows]
            old = next((at for n, at in current if n.id == notification.id), None)
            wanted = [notification if n.id == notification.id else n for n, _ in current]
            if old is None:
                wanted.append(notification)
            if check is not None:
                check(wanted)
            where = _of(project_id, bucket) & (bucket_notifications.c.id == notification.id)
            conn.execute(sa.delete(bucket_notifications).where(where))
            conn.execute(
                sa.insert(bucket_notifications).values(
                    project_id=project_id,
                    bucket_name=bucket,
                    id=notification.id,
                    topic_arn=notification.topic_arn,
                    notification=orjson.dumps(notification_to_json(notification)).decode(),
                    created_at_ns=now if old is None else old,
                )
            )
            subject = f"{bucket}: {notification.id}"
            return old is not None, record_change(conn, principal, "put-notification", subject)

        replaced, line = self.db.run_write(run)
        audit(line)
        return replaced

    def delete_notification(
        self, project_id: uuid.UUID, bucket: str, notification_id: str, principal: str
    ) -> bool:
        def run(conn: Connection) -> str | None:
            deleted = conn.execute(
                sa.delete(bucket_notifications).where(
                    _of(project_id, bucket) & (bucket_notifications.c.id == notification_id)
                )
            ).rowcount
            if not deleted:
                return None
            return record_change(
                conn, principal, "delete-notification", f"{bucket}: {notification_id}"
            )

        line = self.db.run_write(run)
        audit(line)
        return line is not None

    def forget_bucket(self, project_id: uuid.UUID, bucket: str, principal: str) -> None:
        """The bucket was deleted: so are its notifications and its journal configuration
        (the journal's rows stay)."""

        def run(conn: Connection) -> str | None:
            # the journal ends now: the events the bucket's emptying committed are still its
            journal_ended = disable_journal(conn, project_id, bucket)
            notifications = conn.execute(
                sa.delete(bucket_notifications).where(_of(project_id, bucket))
            ).rowcount
            if notifications:
                return record_change(conn, principal, "delete-bucket-notifications", bucket)
            if journal_ended:
                return record_change(conn, principal, "delete-journal", bucket)
            return None

        audit(self.db.run_write(run))

    # what the processes load -----------------------------------------------------------------

    def generation(self) -> int:
        with self.db.read() as conn:
            return int(conn.execute(sa.select(sa.func.max(eventing_changes.c.id))).scalar() or 0)

    def snapshot(self) -> ConfigSnapshot:
        """Topics, notifications and journals, read in one transaction with their
        generation."""
        with self.db.read() as conn:
            generation = conn.execute(sa.select(sa.func.max(eventing_changes.c.id))).scalar()
            stored = [_topic(r._mapping) for r in conn.execute(sa.select(topics))]
            rows = conn.execute(
                sa.select(
                    bucket_notifications.c.project_id,
                    bucket_notifications.c.bucket_name,
                    bucket_notifications.c.notification,
                ).order_by(bucket_notifications.c.created_at_ns, bucket_notifications.c.id)
            ).all()
            journaled = journals(conn)
        notifications: dict[BucketKey, list[Notification]] = {}
        for row in rows:
            notification = notification_from_json(orjson.loads(row.notification))
            notifications.setdefault((row.project_id, row.bucket_name), []).append(notification)
        return ConfigSnapshot(
            int(generation or 0), {t.arn: t for t in stored}, notifications, journaled
        )

    def changes(self, limit: int = 100) -> builtins.list[dict[str, object]]:
        """The newest changes first: the audit trail."""
        with self.db.read() as conn:
            rows = conn.execute(
                sa.select(eventing_changes).order_by(eventing_changes.c.id.desc()).limit(limit)
            ).all()
        return [dict(r._mapping) for r in rows]


def _of(project_id: uuid.UUID, bucket: str) -> sa.ColumnElement[bool]:
    return (bucket_notifications.c.project_id == project_id) & (
        bucket_notifications.c.bucket_name == bucket
    )


def _topic(row: sa.RowMapping) -> StoredTopic:
    arguments = orjson.loads(row["arguments"])
    return StoredTopic(
        project_id=row["project_id"],
        name=row["name"],
        arn=row["arn"],
        push_endpoint=row["push_endpoint"],
        arguments={str(k): str(v) for k, v in arguments.items()},
        created_at_ns=row["created_at_ns"],
        updated_at_ns=row["updated_at_ns"],
    )
