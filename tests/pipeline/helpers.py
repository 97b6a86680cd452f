"""What the pipeline's tests share besides the fixtures of conftest.py: events as routing
makes them, the gateway's change records routed without Spark, a notification put through
boto3, and the pipeline following the API's configuration."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ripple.changestream.schema import change_records
from ripple.events import EventSettings
from ripple.metabase import BucketLocation, Metabase, ObjectLocation
from ripple.notifications.registry import Registry
from ripple.notifications.store import EventingStore
from ripple.pipeline.route import route
from ripple.targets.base import Delivery
from ripple.targets.retry import RetryPolicy
from tests.gateway.conftest import Running
from tests.metabase.objects import commit_inline_object
from tests.pipeline.conftest import RunningPipeline, running_pipeline
from tests.pipeline.reference import events_of_rows


def event(key: str, n: int, bucket: str = "photos", width: int = 24) -> Delivery:
    """Event `n` of `key` (its sequencer grows with `n`), as routing makes it; `width` 0:
    a sequencer of no fixed length (0xF, then 0x10: longer is later)."""
    sequencer = f"{n:0{width}X}" if width else f"{n:X}"
    body = {
        "eventVersion": "2.1",
        "eventName": "ObjectCreated:Put",
        "s3": {
            "bucket": {"name": bucket},
            "object": {"key": key, "size": n, "sequencer": sequencer},
        },
    }
    attributes = {"eventName": "ObjectCreated:Put", "bucket": bucket, "key": key}
    return Delivery.of(f"{key}-{n}", body, {**attributes, "sequencer": sequencer}, batch_id=1)


def routed(gateway: Running) -> dict[str, list[Delivery]]:
    """Every change record of the objects' stream so far, through the transform and
    routing (the bucket events' stream is another query's)."""
    db = gateway.services.db
    registry = Registry()
    registry.replace_api(EventingStore(db).snapshot().routes())
    c = change_records.c
    with db.engine.connect() as conn:
        rows = [
            dict(r._mapping)
            for r in conn.execute(
                sa.select(change_records)
                .where(c.stream_name == "bucket_eventing")
                .order_by(c.commit_ns, c.partition, c.position)  # commit order, as a batch
            )
        ]
    events = list(events_of_rows(rows, lambda _: "owner", EventSettings()))
    return route(events, registry, batch_id=1).by_topic


def seen(deliveries: list[Delivery]) -> list[tuple[str, str]]:
    return [(d.attributes["eventName"], d.attributes["key"]) for d in deliveries]


def notify(client: Any, bucket: str, arn: str, notification_id: str, prefix: str = "") -> None:
    config: dict[str, Any] = {
        "Id": notification_id,
        "TopicArn": arn,
        "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"],
    }
    if prefix:
        config["Filter"] = {"Key": {"FilterRules": [{"Name": "prefix", "Value": prefix}]}}
    client.put_bucket_notification_configuration(
        Bucket=bucket, NotificationConfiguration={"TopicConfigurations": [config]}
    )


@contextmanager
def pipeline(
    db: Metabase, checkpoint: Path, journal: Path | None = None
) -> Iterator[RunningPipeline]:
    """The pipeline in a thread, following the API's configuration, until the block ends
    (with `journal`, writing the journal there)."""
    policy = RetryPolicy(base_delay_s=0.01, max_delay_s=0.2)
    url = db.url.render_as_string(hide_password=False)
    with running_pipeline(
        url, checkpoint, Registry(), {}, db.writer, policy=policy, configured={}, journal=journal
    ) as deliverer:
        yield deliverer


class ObjectWriter(threading.Thread):
    """Commits `count` new objects under `prefix` in `bucket`, one transaction each, on a
    thread: `keys` is what was committed so far, `error` what stopped it."""

    def __init__(self, db: Metabase, bucket: BucketLocation, count: int, prefix: str) -> None:
        super().__init__(name="writer")
        self.db, self.bucket, self.count, self.prefix = db, bucket, count, prefix
        self.keys: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for i in range(self.count):
                key = f"{self.prefix}{i:05d}"
                data = key.encode()
                commit_inline_object(
                    self.db,
                    ObjectLocation(self.bucket.project_id, self.bucket.bucket_name, key),
                    data,
                    etag=hashlib.md5(data).hexdigest(),
                )
                self.keys.append(key)
        except BaseException as e:
            self.error = e
