"""The gateway's ASGI app: every request is authenticated, routed to one S3 operation by
method, addressing level and sub-resource (`gateway.routes`), authorized for its action, and
answered; every refusal is S3's error XML, every response carries the request id.
A `POST /` at service level is the SNS-compatible topic API instead (`gateway.topics`).

`/_ripple/health` and `/_ripple/metrics` (Prometheus) sit outside the S3 namespace: no
bucket name may start with an underscore. So does `/_ripple/pubsub/…`, the pull-subscription
REST API (`gateway.pubsub`), authenticated like S3 and answering S3's error XML.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

# the handler modules register their operations (`routes.operation`) as they are imported
from ripple.gateway import (  # noqa: F401
    absent_configurations,
    acl,
    buckets,
    complete_multipart,
    copy_object,
    delete_objects,
    get_object,
    journal,
    lifecycle,
    listing,
    multipart,
    notifications,
    object_attributes,
    object_lock,
    object_tagging,
    objects,
    pubsub,
    rename_object,
    topics,
    xml,
)
from ripple.gateway.auth import (
    ANONYMOUS_DENIED,
    authenticate_request,
    authorize,
    grant_access,
)
from ripple.gateway.context import RequestContext
from ripple.gateway.errors import S3Error, from_metabase, from_notifications
from ripple.gateway.request import S3Request, Services
from ripple.gateway.routes import Handler, route
from ripple.metabase.errors import MetabaseError
from ripple.notifications.errors import NotificationError

log = logging.getLogger("ripple.gateway")

# the status a request is counted under when its client closed the connection before the
# end of its body (nginx's "client closed request"); it is never sent
CLIENT_CLOSED = 499


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "ripple_s3_requests",
            "S3 requests answered, by operation and HTTP status",
            ["operation", "status"],
            registry=self.registry,
        )
        self.seconds = Histogram(
            "ripple_s3_request_seconds",
            "Time to answer an S3 request (to the start of the response body)",
            ["operation"],
            registry=self.registry,
        )
        self.waiting = Gauge(
            "ripple_s3_metabase_calls_waiting",
            "Object writes and reads waiting for their group to the metabase, or in one on "
            "its way (group commit)",
            ["kind"],
            registry=self.registry,
        )

    def follow(self, services: Services) -> None:
        """Read the groups' queues of `services` at each scrape."""
        self.waiting.labels("writes").set_function(services.commits.unanswered)
        self.waiting.labels("reads").set_function(services.reads.unanswered)


def error_response(
    error: S3Error, context: RequestContext, resource: str, method: str, *, has_body: bool = False
) -> Response:
    root = xml.document("Error", namespace=False)
    xml.add(root, "Code", error.code)
    xml.add(root, "Message", error.message)
    for tag, value in error.extra.items():
        xml.add(root, tag, value)
    xml.add(root, "Resource", error.resource or resource)
    xml.add(root, "RequestId", context.request_id)
    xml.add(root, "HostId", context.host_id)
    headers = {**context.headers, **error.headers}
    if has_body:
        # the body may be unread: the connection cannot carry another request
        headers["connection"] = "close"
    body = b"" if method == "HEAD" else xml.render(root)
    return Response(body, error.status, headers=headers, media_type="application/xml")


OWN_PATHS = "/_ripple/"  # no bucket name starts with an underscore


class GatewayApp(Starlette):
    """Starlette for ripple's own paths; an S3 request goes straight to `s3_app`, past
    Starlette's middleware and router, which would only hand it there (the S3 handler
    answers every error itself) at a cost a small request's CPU shows (BENCHMARKS.md,
    "Issue 26, fifth session")."""

    s3_app: Callable[[Scope, Receive, Send], Awaitable[None]]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope["path"].startswith(OWN_PATHS):
            scope["app"] = self
            await self.s3_app(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)


def create_app(services: Services) -> GatewayApp:
    metrics = Metrics()
    metrics.follow(services)

    async def s3(http: Request, answer: Handler | None = None) -> Response:
        started = time.perf_counter()
        client = http.client.host if http.client else ""
        context = RequestContext.new(client)
        req: S3Request | None = None
        name = "Unknown"
        sent_body = http.headers.get("content-length", "0") not in ("", "0") or (
            "transfer-encoding" in http.headers
        )
        try:
            req = S3Request.of(http, services, context)
            if answer is not None:  # ripple's own API under /_ripple/: it routes itself
                await authenticate_request(req)
                response = await answer(req)
                name = context.operation
            elif req.method == "POST" and req.bucket is None:
                # S3 has no POST at service level: it is the SNS-compatible topic API, which
                # authenticates (for `sns`) and answers its errors itself
                response = await topics.answer(req)
                name = context.operation
            else:
                # a key look-up may query the metabase; unsigned requests go on anonymous
                await authenticate_request(req, anonymous=True)
                try:
                    op = route(req)
                except S3Error as e:
                    if req.access_key is None and e.code != "MethodNotAllowed":
                        raise S3Error("AccessDenied", ANONYMOUS_DENIED) from None
                    raise
                name = context.operation = op.name
                # the bucket's owner, or what its ACLs let another project or anyone do
                await grant_access(req, op.name)
                # a listing of a bucket is checked against the prefix it asks for
                listing = op.action == "list" and req.bucket is not None and req.key is None
                if not op.per_key:
                    prefix = req.query.get("prefix", "") if listing else None
                    authorize(req, op.action, key=prefix)
                response = await op.handler(req)
        except S3Error as e:
            response = error_response(e, context, _resource(req), http.method, has_body=sent_body)
        except MetabaseError as e:
            response = error_response(
                from_metabase(e), context, _resource(req), http.method, has_body=sent_body
            )
        except NotificationError as e:
            response = error_response(
                from_notifications(e), context, _resource(req), http.method, has_body=sent_body
            )
        except ClientDisconnect:
            # the client closed the connection before sending the whole body: nobody to
            # answer, nothing to log but a line; counted as nginx's 499 (client closed)
            log.info(
                "request %s (%s %s): the client closed the connection before the end of its body",
                context.request_id,
                http.method,
                http.url.path,
            )
            response = Response(status_code=CLIENT_CLOSED)
        except Exception:
            log.exception(
                "request %s (%s %s) failed", context.request_id, http.method, http.url.path
            )
            error = S3Error("InternalError", "we encountered an internal error; please try again")
            response = error_response(
                error, context, _resource(req), http.method, has_body=sent_body
            )
        for header, value in context.headers.items():
            response.headers.setdefault(header, value)
        metrics.requests.labels(name, str(response.status_code)).inc()
        metrics.seconds.labels(name).observe(time.perf_counter() - started)
        return response

    async def health(_: Request) -> Response:
        return Response(b"ok\n", media_type="text/plain")

    async def prometheus(_: Request) -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def pubsub_api(http: Request) -> Response:
        return await s3(http, pubsub.answer)

    async def s3_app(scope: Scope, receive: Receive, send: Send) -> None:
        # every path that is not ripple's own is S3's, whatever bytes it holds (a route
        # pattern would stop at a newline in a key)
        if scope["type"] == "http":
            response = await s3(Request(scope, receive))
            await response(scope, receive, send)

    app = GatewayApp(
        routes=[
            Route("/_ripple/health", health, methods=["GET"]),
            Route("/_ripple/metrics", prometheus, methods=["GET"]),
            Route("/_ripple/pubsub/{path:path}", pubsub_api, methods=pubsub.METHODS),
        ]
    )
    app.router.default = s3_app  # /_ripple/… paths of none of the routes
    app.s3_app = s3_app
    app.state.services = services
    app.state.metrics = metrics
    return app


def _resource(req: S3Request | None) -> str:
    return req.resource if req is not None else "/"
