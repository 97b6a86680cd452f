"""The route table of the S3 API: each operation's handler, registered by its module
(`@operation`) under the method, addressing level (service, bucket or object) and
sub-resource that select it, and `route`, which picks the one a request asks for.

The handler modules import this one, never the app: the app imports them, which registers
their operations.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.responses import Response

from ripple.gateway.errors import S3Error, not_implemented
from ripple.gateway.request import S3Request

Handler = Callable[[S3Request], Awaitable[Response]]


@dataclass(frozen=True)
class Operation:
    name: str  # S3's name for it, e.g. PutObject
    action: str  # what the access key needs: read, write, list or delete
    handler: Handler
    per_key: bool = False  # the handler checks the action for each key it touches


# (method, level, sub-resource) -> operation; level is service, bucket or object, and the
# sub-resource is the query parameter that selects the operation ("" for none).
ROUTES: dict[tuple[str, str, str], Operation] = {}

# Query parameters that select an S3 operation. One not in ROUTES for the request's method
# and level answers 501 NotImplemented rather than being mistaken for a plain GET or PUT.
SUBRESOURCES = frozenset(
    [
        "accelerate",
        "acl",
        "analytics",
        "attributes",
        "cors",
        "delete",
        "encryption",
        "intelligent-tiering",
        "inventory",
        "journal",  # ripple's own: the bucket journal (gateway.journal)
        "legal-hold",
        "lifecycle",
        "list-type",
        "location",
        "logging",
        "metadataConfiguration",
        "metrics",
        "notification",
        "object-lock",
        "ownershipControls",
        "partNumber",
        "policy",
        "policyStatus",
        "publicAccessBlock",
        "renameObject",
        "replication",
        "requestPayment",
        "restore",
        "retention",
        "select",
        "session",
        "tagging",
        "torrent",
        "uploadId",
        "uploads",
        "versioning",
        "versions",
        "website",
    ]
)
_SELECTION_ORDER = (
    "uploadId",
    "uploads",
    "delete",
    "versioning",
    "object-lock",
    "location",
    "versions",
    "list-type",
    "retention",
    "legal-hold",
)


def operation(
    method: str, level: str, subresource: str, name: str, action: str, *, per_key: bool = False
) -> Callable[[Handler], Handler]:
    """Register the decorated handler for one method, level and sub-resource."""

    def register(handler: Handler) -> Handler:
        ROUTES[(method, level, subresource)] = Operation(name, action, handler, per_key)
        return handler

    return register


S3_METHODS = frozenset(["GET", "HEAD", "PUT", "POST", "DELETE"])


def route(req: S3Request) -> Operation:
    """The operation the request's method, level and sub-resource select: `MethodNotAllowed`
    for a method S3 does not have, `NotImplemented` for an operation ripple does not answer."""
    level = "service" if req.bucket is None else "bucket" if req.key is None else "object"
    if req.method not in S3_METHODS:  # OPTIONS (no CORS here), PATCH, TRACE, PROPFIND, …
        raise S3Error(
            "MethodNotAllowed",
            f"the specified method is not allowed against this resource: {req.method[:20]}",
            extra={"Method": req.method[:20], "ResourceType": level.upper()},
        )
    method = "GET" if req.method == "HEAD" and level == "service" else req.method
    present = [p for p in req.query if p in SUBRESOURCES]
    chosen = next((p for p in _SELECTION_ORDER if p in req.query), present[0] if present else "")
    if chosen == "uploadId" and "partNumber" in req.query and method == "PUT":
        chosen = "partNumber"
    if not chosen and method == "PUT" and level == "object" and req.has_copy_source:
        chosen = "copy-source"  # CopyObject: a PUT of an object with a copy source
    found = ROUTES.get((method, level, chosen))
    if found is None:
        what = f"{req.method} on a {level}" + (f" with ?{chosen}" if chosen else "")
        raise not_implemented(what)
    return found
