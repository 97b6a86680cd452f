"""The pull-subscription REST API under `/_ripple/pubsub/`, as the pubsub module of Ceph RGW
defines it (its JSON answers; errors are S3's error XML). Requests are signed with SigV4 for
the service `s3`, with the same keys as the S3 API:

    PUT|GET|DELETE /topics/<topic>[?push-endpoint=…&amqp-exchange=…&…]   GET /topics
    PUT|GET|DELETE /notifications/bucket/<bucket>?topic=<topic>[&events=OBJECT_CREATE,…]
    PUT|GET|DELETE /subscriptions/<sub>?topic=<topic>[&format=compact|s3]
    GET  /subscriptions/<sub>?events[&max-entries=N][&marker=M]
    POST /subscriptions/<sub>?ack&event-id=<id>

Topics are the SNS API's (`gateway.topics`): the same store, ARN, checks and redaction. A
user reaches only their own topics, buckets and subscriptions. The decisions (notification
Ids, `events`, pull-only subscriptions) and errors: docs/notifications.md, "Pull
subscriptions (REST API)".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

import orjson
from starlette.responses import Response

from ripple.gateway import topics
from ripple.gateway.auth import own_bucket
from ripple.gateway.credentials import HIDDEN, is_secret, redacted
from ripple.gateway.errors import S3Error
from ripple.gateway.request import S3Request, principal, query_number
from ripple.notifications.configuration import Notification, check_configuration
from ripple.notifications.store import StoredTopic, topic_arn
from ripple.subscriptions.store import (
    DEFAULT_MAX_ENTRIES,
    DEFAULT_RETENTION_DAYS,
    FORMATS,
    NoSuchSubscription,
    Subscription,
    SubscriptionStore,
    subscription_name_problem,
)

__all__ = ["EVENT_TYPES", "METHODS", "answer"]

# Every method reaches `answer`, which refuses the ones a resource does not take.
METHODS = ["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"]
DEFAULT_FORMAT = "compact"  # as RGW answers subscriptions made through this API
EVENT_TYPES = {
    "OBJECT_CREATE": "s3:ObjectCreated:*",
    "OBJECT_DELETE": "s3:ObjectRemoved:Delete",
    "DELETE_MARKER_CREATE": "s3:ObjectRemoved:DeleteMarkerCreated",
}
_EVENT_NAMES = {s3_name: name for name, s3_name in EVENT_TYPES.items()}
_PUSH_PARAMETERS = ("push-endpoint", "amqp-exchange", "amqp-ack-level", "verify-ssl")
_NO_DEST = {"bucket_name": "", "oid_prefix": "", "push_endpoint": "", "push_endpoint_args": ""}

Handler = Callable[[S3Request, str], Awaitable[Response]]
# (resource, method, selecting query parameter) -> (operation, key action, handler)
ROUTES: dict[tuple[str, str, str], tuple[str, str, Handler]] = {}


def _route(
    resource: str, method: str, selector: str, name: str, action: str
) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        ROUTES[(resource, method, selector)] = (f"PubSub{name}", action, handler)
        return handler

    return register


async def answer(req: S3Request) -> Response:
    """Route one authenticated request; every refusal is an `S3Error`."""
    resource, name = _resource(req)
    selector = next((s for s in ("events", "ack") if s in req.query), "")
    found = ROUTES.get((resource, req.method, selector)) or ROUTES.get((resource, req.method, ""))
    if found is None:
        allowed = sorted({method for r, method, _ in ROUTES if r == resource})
        if req.method in allowed:
            raise S3Error("InvalidRequest", f"{req.method} on a {resource} needs ?ack&event-id=")
        raise S3Error(
            "MethodNotAllowed",
            f"the {resource} resource takes {', '.join(allowed)}, not {req.method}",
            headers={"allow": ", ".join(allowed)},
        )
    operation, action, handler = found
    req.context.operation = operation
    if not req.authenticated_key.permits(action, name if resource == "notifications" else None):
        raise S3Error("AccessDenied", f"this access key may not {action} here")
    try:
        return await handler(req, name)
    except topics.SnsError as e:  # the topic checks shared with the SNS API
        codes = {"InvalidParameter": "InvalidArgument", "AuthorizationError": "AccessDenied"}
        raise S3Error(codes.get(e.code, e.code), e.message, status=e.status) from None


def _resource(req: S3Request) -> tuple[str, str]:
    parts = str(req.http.path_params.get("path", "")).split("/")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()
    match parts:
        case ["topics"]:
            return "topics", ""
        case ["topics", name] if name:
            return "topic", name
        case ["notifications", "bucket", bucket] if bucket:
            return "notifications", bucket
        case ["subscriptions", name] if name:
            return "subscription", name
    raise S3Error(
        "InvalidURI",
        "no such pubsub resource: the API has /_ripple/pubsub/topics[/<name>], "
        "/notifications/bucket/<bucket> and /subscriptions/<name>",
    )


# --- topics ---------------------------------------------------------------------------------


@_route("topic", "PUT", "", "CreateTopic", "write")
async def put_topic(req: S3Request, given: str) -> Response:
    name, arn = _topic_ref(req, given)
    arguments = {k: v for k, v in req.query.items() if not k.lower().startswith("x-amz-")}
    endpoint = topics.endpoint_of(arguments.pop(topics.PUSH_ENDPOINT, ""))
    topics.check_secrets(req, endpoint, arguments)
    stored = await topics.store_topic(req, name, arn, endpoint, arguments)
    return _json({"arn": stored.arn})


@_route("topic", "GET", "", "GetTopic", "read")
async def get_topic(req: S3Request, given: str) -> Response:
    stored = await _own_topic(req, given)
    subs = await req.run(_subscription_names, req)
    return _json({"topic": _topic_json(req, stored), "subs": subs.get(stored.arn, [])})


@_route("topic", "DELETE", "", "DeleteTopic", "delete")
async def delete_topic(req: S3Request, given: str) -> Response:
    """Deleting a topic that is not there is fine, as in the SNS API; its subscriptions stay
    (with their events) and get events again if the topic is made again."""
    name, arn = _topic_ref(req, given)
    services = req.services
    stored = await req.run(services.eventing.get_topic, req.project_id, name)
    if stored is not None and stored.arn == arn:
        await req.run(services.eventing.delete_topic, req.project_id, name, principal(req))
        await req.run(services.config_changed)
    return Response(status_code=200)


@_route("topics", "GET", "", "ListTopics", "read")
async def list_topics(req: S3Request, _: str) -> Response:
    found = await req.run(req.services.eventing.list_topics, req.project_id)
    subs = await req.run(_subscription_names, req)
    listed = [
        {"topic": _topic_json(req, t), "subs": subs.get(t.arn, [])}
        for t in sorted(found, key=lambda t: t.name)
    ]
    return _json({"topics": listed})


# --- notifications --------------------------------------------------------------------------


@_route("notifications", "PUT", "", "CreateNotification", "write")
async def put_notification(req: S3Request, bucket: str) -> Response:
    await req.run(own_bucket, _for_bucket(req, bucket))
    stored = await _own_topic(req, _required(req, "topic"))
    notification = Notification(stored.name, stored.arn, _events(req.query.get("events", "")))
    await req.run(
        req.services.eventing.upsert_notification,
        req.project_id,
        bucket,
        notification,
        principal(req),
        check=check_configuration,
    )
    await req.run(req.services.config_changed)
    return Response(status_code=200)


@_route("notifications", "GET", "", "ListNotifications", "read")
async def get_notifications(req: S3Request, bucket: str) -> Response:
    await req.run(own_bucket, _for_bucket(req, bucket))
    eventing = req.services.eventing
    found = await req.run(eventing.notifications, req.project_id, bucket)
    if "topic" in req.query:
        _, arn = _topic_ref(req, req.query["topic"])
        found = [n for n in found if n.topic_arn == arn]
    listed = []
    for notification in found:
        arn = notification.topic_arn
        stored = await req.run(eventing.topic_by_arn, arn)
        if stored is not None:
            topic = _topic_json(req, stored)
        else:  # deleted meanwhile (deleting a topic deletes its notifications)
            topic = {"user": _user(req), "name": _name_of(arn), "dest": _NO_DEST, "arn": arn}
        events = [_EVENT_NAMES.get(e, e) for e in notification.events]
        listed.append({"topic": topic, "events": events})
    return _json({"topics": listed})


@_route("notifications", "DELETE", "", "DeleteNotification", "write")
async def delete_notification(req: S3Request, bucket: str) -> Response:
    """Removes every notification of the bucket that names the topic (the one PUT made, and
    any made with the S3 API); NoSuchNotification if there is none."""
    await req.run(own_bucket, _for_bucket(req, bucket))
    _, arn = _topic_ref(req, _required(req, "topic"))
    eventing = req.services.eventing
    found = await req.run(eventing.notifications, req.project_id, bucket)
    deleted = 0
    for notification in (n for n in found if n.topic_arn == arn):
        deleted += await req.run(
            eventing.delete_notification,
            req.project_id,
            bucket,
            notification.id,
            principal(req),
        )
    if not deleted:
        raise S3Error(
            "NoSuchNotification", f"bucket {bucket!r} has no notification to {arn}", status=404
        )
    await req.run(req.services.config_changed)
    return Response(status_code=200)


# --- subscriptions --------------------------------------------------------------------------


@_route("subscription", "PUT", "", "CreateSubscription", "write")
async def put_subscription(req: S3Request, name: str) -> Response:
    """Creates the pull subscription (again: changes its format); `format` is ripple's."""
    _check_name(name)
    pushed = [p for p in _PUSH_PARAMETERS if p in req.query]
    if pushed:
        raise S3Error(
            "NotImplemented",
            f"{', '.join(pushed)} on a subscription is not implemented by ripple: its "
            "subscriptions are pull-only; push a topic's events with PUT /topics/<topic>"
            "?push-endpoint=…",
        )
    stored = await _own_topic(req, _required(req, "topic"))
    store = SubscriptionStore(req.db)
    existing = await req.run(_find, store, name)
    if existing is not None and existing.owner != req.project_id:
        raise _not_yours(name)
    event_format = req.query.get("format") or (existing.format if existing else DEFAULT_FORMAT)
    if event_format not in FORMATS:
        raise S3Error(
            "InvalidArgument", f"format {event_format!r} must be one of {', '.join(FORMATS)}"
        )
    retention = existing.events_retention_days if existing else DEFAULT_RETENTION_DAYS
    try:
        await req.run(
            store.create,
            name,
            stored.arn,
            format=event_format,
            events_retention_days=retention,
            owner=req.project_id,
        )
    except ValueError as e:  # made meanwhile by another user, or ours to another topic
        again = await req.run(_find, store, name)
        if again is not None and again.owner != req.project_id:
            raise _not_yours(name) from None
        raise S3Error("InvalidArgument", str(e)) from None
    return Response(status_code=200)


@_route("subscription", "GET", "", "GetSubscription", "read")
async def get_subscription(req: S3Request, name: str) -> Response:
    sub = await req.run(_own_subscription, req, name)
    topic = _name_of(sub.topic)
    return _json(
        {"user": _user(req), "name": sub.name, "topic": topic, "dest": _NO_DEST, "s3_id": ""}
    )


@_route("subscription", "DELETE", "", "DeleteSubscription", "delete")
async def delete_subscription(req: S3Request, name: str) -> Response:
    await req.run(_own_subscription, req, name)
    await req.run(_store_call, SubscriptionStore(req.db).delete, name)
    return Response(status_code=200)


@_route("subscription", "GET", "events", "PullEvents", "read")
async def pull_events(req: S3Request, name: str) -> Response:
    await req.run(_own_subscription, req, name)
    max_entries = DEFAULT_MAX_ENTRIES
    if req.query.get("max-entries"):  # empty: the default
        max_entries = query_number(req, "max-entries", most=999_999_999)
    marker = req.query.get("marker") or None
    store = SubscriptionStore(req.db)
    page = await req.run(_store_call, store.pull, name, marker, max_entries)
    return _json(page.to_dict())


@_route("subscription", "POST", "ack", "AckEvent", "write")
async def ack_event(req: S3Request, name: str) -> Response:
    await req.run(_own_subscription, req, name)
    event_id = _required(req, "event-id")
    if not await req.run(_store_call, SubscriptionStore(req.db).ack, name, event_id):
        raise S3Error(
            "NoSuchKey",
            f"subscription {name!r} has no unacknowledged event {event_id!r}",
            status=404,
        )
    return Response(status_code=200)


# --- helpers --------------------------------------------------------------------------------


def _json(body: dict[str, Any]) -> Response:
    return Response(orjson.dumps(body), 200, media_type="application/json")


def _name_of(arn: str) -> str:
    return arn.rsplit(":", 1)[-1]


def _user(req: S3Request) -> str:
    return str(req.authenticated_key.project_public_id)


def _required(req: S3Request, parameter: str) -> str:
    value = req.query.get(parameter, "")
    if not value:
        raise S3Error("InvalidArgument", f"the query parameter {parameter!r} is missing or empty")
    return value


def _for_bucket(req: S3Request, bucket: str) -> S3Request:
    """The request as one addressing `bucket` (for the bucket ownership check)."""
    return dataclasses.replace(req, bucket=bucket, key=None)


def _topic_ref(req: S3Request, given: str) -> tuple[str, str]:
    """(name, ARN) of the caller's topic named by a name or an ARN (another project's:
    AccessDenied)."""
    if given.startswith("arn:"):
        name = topics.owned_name(req, given)
        # the ARN a topic of that name has here: another region or partition names nothing
        return name, topic_arn(req.services.region, _user(req), name)
    if not topics.TOPIC_NAME.fullmatch(given):
        raise S3Error(
            "InvalidArgument",
            f"topic {given[:300]!r}: a topic is a name of 1 to 256 letters, digits, hyphens "
            "and underscores, or a topic ARN",
        )
    return given, topic_arn(req.services.region, _user(req), given)


async def _own_topic(req: S3Request, given: str) -> StoredTopic:
    name, arn = _topic_ref(req, given)
    stored = await req.run(req.services.eventing.get_topic, req.project_id, name)
    if stored is None or stored.arn != arn:
        raise S3Error("NoSuchTopic", f"topic {given!r} does not exist", status=404)
    return stored


def _topic_json(req: S3Request, stored: StoredTopic) -> dict[str, Any]:
    arguments = [(k, HIDDEN if is_secret(k) else v) for k, v in stored.arguments.items()]
    dest = {
        **_NO_DEST,
        "push_endpoint": redacted(stored.push_endpoint),
        "push_endpoint_args": urlencode(arguments, safe="*"),
    }
    return {"user": _user(req), "name": stored.name, "dest": dest, "arn": stored.arn}


def _subscription_names(req: S3Request) -> dict[str, list[str]]:
    """The caller's subscriptions' names by topic ARN."""
    names: dict[str, list[str]] = {}
    for sub in SubscriptionStore(req.db).list():
        if sub.owner == req.project_id:
            names.setdefault(sub.topic, []).append(sub.name)
    return names


def _events(value: str) -> tuple[str, ...]:
    if not value:
        return tuple(EVENT_TYPES.values())
    events: list[str] = []
    for item in (i.strip() for i in value.split(",")):
        event = EVENT_TYPES.get(item, item)
        if not event.startswith("s3:"):
            raise S3Error(
                "InvalidArgument",
                f"event {item!r}: expected {', '.join(EVENT_TYPES)} or an s3: event type",
            )
        if event not in events:
            events.append(event)
    return tuple(events)


def _check_name(name: str) -> None:
    problem = subscription_name_problem(name)
    if problem:
        raise S3Error("InvalidArgument", problem)


def _find(store: SubscriptionStore, name: str) -> Subscription | None:
    try:
        return store.get(name)
    except NoSuchSubscription:
        return None


def _own_subscription(req: S3Request, name: str) -> Subscription:
    _check_name(name)
    sub = _find(SubscriptionStore(req.db), name)
    if sub is None:
        raise S3Error("NoSuchSubscription", f"no subscription {name!r}", status=404)
    if sub.owner != req.project_id:
        raise _not_yours(name)
    return sub


def _not_yours(name: str) -> S3Error:
    return S3Error(
        "AccessDenied",
        f"subscription {name!r} is not yours: a user subscribes only to their own topics",
    )


def _store_call(call: Callable[..., Any], *args: Any) -> Any:
    """A subscription store call; its refusals as S3 errors."""
    try:
        return call(*args)
    except NoSuchSubscription as e:  # deleted meanwhile
        raise S3Error("NoSuchSubscription", f"no subscription {e.name!r}", status=404) from None
    except ValueError as e:  # a bad marker or max-entries
        raise S3Error("InvalidArgument", str(e)) from None
