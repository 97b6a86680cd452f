"""Bucket notifications on the wire: Put/GetBucketNotificationConfiguration, and ripple's
extensions `GET` / `DELETE /bucket?notification=<id>` for one notification.

A PUT replaces the bucket's whole configuration (an empty one removes it). Every topic it
names must exist and belong to the bucket's owner, else `InvalidArgument` "Unable to
validate the following destination configurations", as S3 answers. Before anything is
stored, each destination that is new to the bucket gets an `s3:TestEvent` message, as S3
sends one; a destination that does not take it fails the PUT the same way, and nothing
changes. `x-amz-skip-destination-validation: true` skips the test messages. A pull-only
topic has no destination to test; a Redis topic in `namespace` format keeps object state,
not messages, so it gets none either; nor does a `snapshot://` topic, an archive whose
snapshotter runs in the pipeline's process (its name is checked). `Filter/S3Metadata`
and `Filter/S3Tags` rules select events by the object's user metadata and tags, which the
change stream records with each change.

The configuration is stored in the metabase database (`EventingStore`) and applied to this
gateway's registry before the answer, so the bucket's next write already records its change;
the pipeline loads it at its next batch.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from urllib.parse import urlsplit

import orjson
from starlette.responses import Response

from ripple.gateway.auth import own_bucket
from ripple.gateway.body import read_document
from ripple.gateway.credentials import is_secret, redacted
from ripple.gateway.errors import S3Error
from ripple.gateway.notification_xml import (
    notification_configuration_xml,
    parse_notification_configuration,
)
from ripple.gateway.request import S3Request, principal
from ripple.gateway.routes import operation
from ripple.notifications.configuration import validate_topics
from ripple.notifications.store import StoredTopic
from ripple.targets.base import Delivery
from ripple.targets.destinations import push_target

log = logging.getLogger(__name__)

SMALL_DOCUMENT = 256 * 1024
UNABLE_TO_VALIDATE = "Unable to validate the following destination configurations"


@operation("PUT", "bucket", "notification", "PutBucketNotificationConfiguration", "write")
async def put_bucket_notification_configuration(req: S3Request) -> Response:
    if req.query.get("notification"):
        raise S3Error("InvalidArgument", "PUT takes the whole configuration: ?notification alone")
    body = await read_document(req, SMALL_DOCUMENT)
    notifications = parse_notification_configuration(body)
    await req.run(own_bucket, req)
    store = req.services.eventing
    topics: dict[str, StoredTopic] = {}
    for arn in {n.topic_arn for n in notifications}:
        topic = await req.run(store.topic_by_arn, arn)
        if topic is not None and topic.project_id == req.project_id:
            topics[arn] = topic
    validate_topics(notifications, lambda arn: arn in topics)
    skip = req.header("x-amz-skip-destination-validation").lower()
    if skip not in ("", "true", "false"):
        raise S3Error("InvalidArgument", "x-amz-skip-destination-validation must be true or false")
    if skip != "true":
        before = await req.run(store.notifications, req.project_id, req.bucket)
        known = {n.topic_arn for n in before}
        new = [topics[arn] for arn in sorted(topics) if arn not in known]
        failures = await req.run_data(_send_test_events, req, new)  # connects to brokers
        if failures:
            extra: dict[str, str] = {}
            for number, (arn, error) in enumerate(failures, start=1):
                extra[f"ArgumentName{number}"] = arn
                extra[f"ArgumentValue{number}"] = error
            raise S3Error("InvalidArgument", UNABLE_TO_VALIDATE, extra=extra)
    await req.run(
        store.put_notifications, req.project_id, req.bucket, notifications, principal(req)
    )
    await req.run(req.services.config_changed)
    return Response(status_code=200)


@operation("GET", "bucket", "notification", "GetBucketNotificationConfiguration", "read")
async def get_bucket_notification_configuration(req: S3Request) -> Response:
    await req.run(own_bucket, req)
    found = await req.run(req.services.eventing.notifications, req.project_id, req.bucket)
    wanted = req.query.get("notification")
    if wanted:
        found = [n for n in found if n.id == wanted]
        if not found:
            raise _no_such_notification(req, wanted)
    return Response(notification_configuration_xml(found), media_type="application/xml")


@operation("DELETE", "bucket", "notification", "DeleteBucketNotification", "write")
async def delete_bucket_notification(req: S3Request) -> Response:
    """ripple's extension: `?notification=<id>` deletes one notification, `?notification`
    alone deletes them all."""
    await req.run(own_bucket, req)
    store, wanted = req.services.eventing, req.query.get("notification")
    if wanted:
        deleted = await req.run(
            store.delete_notification, req.project_id, req.bucket, wanted, principal(req)
        )
        if not deleted:
            raise _no_such_notification(req, wanted)
    else:
        await req.run(store.put_notifications, req.project_id, req.bucket, [], principal(req))
    await req.run(req.services.config_changed)
    return Response(status_code=204)


def _no_such_notification(req: S3Request, notification_id: str) -> S3Error:
    return S3Error(
        "NoSuchNotification",  # ripple's; S3 has no single-notification API
        f"bucket {req.bucket!r} has no notification {notification_id!r}",
        status=404,
    )


def test_message(req: S3Request) -> bytes:
    """S3's test message: `{"Service","Event":"s3:TestEvent","Time","Bucket","RequestId",
    "HostId"}`."""
    now = datetime.now(UTC)
    return orjson.dumps(
        {
            "Service": "ripple:s3",
            "Event": "s3:TestEvent",
            "Time": now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
            "Bucket": req.bucket,
            "RequestId": req.context.request_id,
            "HostId": req.context.host_id,
        }
    )


def _send_test_events(req: S3Request, topics: list[StoredTopic]) -> list[tuple[str, str]]:
    """Send the test message to each topic's push destination; (ARN, error) of each that
    did not take it."""
    body = test_message(req)
    failures: list[tuple[str, str]] = []
    for stored in topics:
        topic = stored.topic
        if topic.arguments.get("redis-format", "stream") == "namespace":
            continue
        try:
            target = push_target(topic)
        except ValueError as e:
            failures.append((stored.arn, _hidden(stored, str(e))))
            continue
        if target is None or topic.kind == "snapshot":  # pull-only, or an archive
            continue
        delivery = Delivery.raw(
            f"{req.context.request_id}-test",
            body,
            {"eventName": "s3:TestEvent", "bucket": req.bucket or "", "key": ""},
        )
        try:
            target.open()
            [result] = target.publish([delivery])
        except Exception as e:  # a target that cannot even start
            failures.append((stored.arn, _hidden(stored, f"{type(e).__name__}: {e}")))
            continue
        finally:
            target.close()
        if not result.ok:
            failures.append((stored.arn, _hidden(stored, result.error or result.outcome.value)))
        else:
            log.info("s3:TestEvent sent to %s for bucket %s", stored.arn, req.bucket)
    return failures


def _hidden(stored: StoredTopic, error: str) -> str:
    """A target's error as the caller may see it: the endpoint's credentials and secret
    arguments replaced, as GetTopicAttributes shows them."""
    endpoint = stored.push_endpoint
    if endpoint and redacted(endpoint) != endpoint:
        error = error.replace(endpoint, redacted(endpoint))
        password = urlsplit(endpoint.strip()).password
        if password:
            error = error.replace(password, "***")
    for argument, value in stored.arguments.items():
        if is_secret(argument) and value:
            error = error.replace(value, "***")
    return error
