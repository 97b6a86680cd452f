"""The SNS-compatible topic API on the S3 endpoint: `POST /` with a form body whose `Action`
is CreateTopic, ListTopics, GetTopicAttributes, SetTopicAttributes or DeleteTopic, signed
with SigV4 for the service `sns` (so `boto3.client("sns", endpoint_url=…)` and
`aws sns --endpoint-url …` work). Answers and errors are SNS's XML.

A topic belongs to the project of the key that created it and is named by its ARN,
`arn:aws:sns:<region>:<project public id>:<name>`; a user manages only their own topics
(another project's ARN is `AuthorizationError`). Its attributes are `push-endpoint` (a
destination URI; empty or `none`: pull-only) and the arguments of its target, checked with
`ripple.targets.destinations` before anything is stored. CreateTopic of an existing name
replaces its endpoint and arguments; SetTopicAttributes sets one (an empty value removes it).
Credentials (user info in the push endpoint, `secret`, `bearer-token`, `password`, an
authorization header) are accepted only over HTTPS unless `topics.allow-secrets-in-cleartext`
is set, and GetTopicAttributes never shows them.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import xml.etree.ElementTree as ET
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qsl

from starlette.requests import ClientDisconnect
from starlette.responses import Response

from ripple.gateway.auth import authenticate
from ripple.gateway.credentials import HIDDEN, has_user_info, is_secret, redacted
from ripple.gateway.errors import S3Error
from ripple.gateway.request import S3Request, principal
from ripple.notifications.endpoints import parse_endpoint
from ripple.notifications.store import StoredTopic, topic_arn
from ripple.notifications.topics import PULL_ONLY, Topic
from ripple.numbers import NumberError, whole_number
from ripple.targets.destinations import policy_of, push_target

__all__ = [
    "SNS_NAMESPACE",
    "TOPIC_NAME",
    "SnsError",
    "answer",
    "check_secrets",
    "endpoint_of",
    "owned_name",
    "store_topic",
]

log = logging.getLogger("ripple.gateway.topics")

SNS_NAMESPACE = "http://sns.amazonaws.com/doc/2010-03-31/"
MAX_BODY = 256 * 1024  # a form of topic attributes fits many times over
PAGE = 100  # ListTopics answers at most this many topics at a time
PUSH_ENDPOINT = "push-endpoint"
READ_ONLY = ("TopicArn", "Owner", "Name")

TOPIC_NAME = re.compile(r"[A-Za-z0-9_-]{1,256}")
_ARN = re.compile(r"arn:[a-z0-9-]+:sns:([^:]*):([^:]+):([^:]+)")
_ENTRY = re.compile(r"Attributes\.entry\.([1-9][0-9]{0,3})\.(key|value)")


class SnsError(Exception):
    """An SNS error response: `Sender` errors are the client's, `Receiver` ones ours."""

    def __init__(self, code: str, message: str, status: int = 400, kind: str = "Sender") -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.kind = kind


def invalid(message: str) -> SnsError:
    return SnsError("InvalidParameter", f"Invalid parameter: {message}")


Handler = Callable[[S3Request, dict[str, str]], Awaitable[ET.Element]]
# Action -> (what the access key needs, handler)
ACTIONS: dict[str, tuple[str, Handler]] = {}


def action(name: str, needs: str) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        ACTIONS[name] = (needs, handler)
        return handler

    return register


async def answer(req: S3Request) -> Response:
    """Authenticate, dispatch and answer one topic API request; every refusal is SNS XML."""
    context = req.context
    context.operation = "SNS"
    body: bytes | None = None
    try:
        body = await _read_body(req)
        digest = hashlib.sha256(body).hexdigest()
        await req.run(authenticate, req, service="sns", payload_sha256=digest)
        if req.signed is None:
            raise RuntimeError("a topic API request passed authentication unsigned")
        if not hmac.compare_digest(req.signed.payload_hash, digest):
            raise SnsError(
                "InvalidParameter",
                "the payload hash signed is not the SHA-256 of the body: the topic API needs "
                "a signed body (not UNSIGNED-PAYLOAD or aws-chunked)",
            )
        params = _params(req, body)
        name = params.get("Action", "")
        if name not in ACTIONS:
            shown = f"{name!r} is not valid" if name else "is missing"
            raise SnsError(
                "InvalidAction",
                f"the Action {shown}; this endpoint answers {', '.join(ACTIONS)}",
            )
        context.operation = name
        needs, handler = ACTIONS[name]
        if not req.authenticated_key.permits(needs):
            raise SnsError(
                "AuthorizationError",
                f"this access key may not {needs} topics (it is restricted to a bucket or "
                f"denied {needs!r})",
                403,
            )
        return _xml(await handler(req, params), 200, context.request_id)
    except SnsError as e:
        error = e
    except S3Error as e:  # authentication
        code = "InvalidClientTokenId" if e.code == "InvalidAccessKeyId" else e.code
        error = SnsError(code, e.message, e.status, "Receiver" if e.status >= 500 else "Sender")
    except ClientDisconnect:
        raise  # the app answers nobody and counts it (499), quietly
    except Exception:
        log.exception("topic request %s failed", context.request_id)
        error = SnsError("InternalFailure", "internal error; please try again", 500, "Receiver")
    response = _error(req, error)
    if body is None:  # the body may be unread: the connection cannot carry another request
        response.headers["connection"] = "close"
    return response


# --- the actions ----------------------------------------------------------------------------


@action("CreateTopic", "write")
async def create_topic(req: S3Request, params: dict[str, str]) -> ET.Element:
    key = req.authenticated_key
    name = params.get("Name", "")
    if not TOPIC_NAME.fullmatch(name):
        raise invalid(
            f"Name {name[:300]!r}: a topic name is 1 to 256 letters, digits, hyphens and "
            "underscores"
        )
    for param in params:
        if param.startswith("Tags.") or param == "DataProtectionPolicy":
            raise invalid(f"{param.split('.')[0]}: not supported by ripple")
    arguments = _attributes(params)
    for attribute in READ_ONLY:
        if attribute in arguments:
            raise invalid(f"Attributes: {attribute} is read-only")
    endpoint = endpoint_of(arguments.pop(PUSH_ENDPOINT, ""))
    check_secrets(req, endpoint, arguments)
    arn = topic_arn(req.services.region, str(key.project_public_id), name)
    stored = await store_topic(req, name, arn, endpoint, arguments)
    root = _document("CreateTopic")
    ET.SubElement(_result(root, "CreateTopic"), "TopicArn").text = stored.arn
    return _metadata(req, root)


@action("ListTopics", "read")
async def list_topics(req: S3Request, params: dict[str, str]) -> ET.Element:
    token = params.get("NextToken", "")
    if token and not TOPIC_NAME.fullmatch(token):
        raise invalid("NextToken: it is not one this endpoint gave")
    found = await req.run(req.services.eventing.list_topics, req.project_id)
    found.sort(key=lambda t: t.name)  # as Python compares them, whatever the collation
    after = [t for t in found if t.name > token] if token else found
    root = _document("ListTopics")
    result = _result(root, "ListTopics")
    listed = ET.SubElement(result, "Topics")
    for topic in after[:PAGE]:
        ET.SubElement(ET.SubElement(listed, "member"), "TopicArn").text = topic.arn
    if len(after) > PAGE:
        ET.SubElement(result, "NextToken").text = after[PAGE - 1].name
    return _metadata(req, root)


@action("GetTopicAttributes", "read")
async def get_topic_attributes(req: S3Request, params: dict[str, str]) -> ET.Element:
    stored = await _own_topic(req, params.get("TopicArn", ""))
    shown = {
        PUSH_ENDPOINT: redacted(stored.push_endpoint),
        **{k: HIDDEN if is_secret(k) else v for k, v in stored.arguments.items()},
        "TopicArn": stored.arn,
        "Owner": str(req.authenticated_key.project_public_id),
        "Name": stored.name,
    }
    root = _document("GetTopicAttributes")
    attributes = ET.SubElement(_result(root, "GetTopicAttributes"), "Attributes")
    for name, value in shown.items():
        entry = ET.SubElement(attributes, "entry")
        ET.SubElement(entry, "key").text = name
        ET.SubElement(entry, "value").text = value
    return _metadata(req, root)


@action("SetTopicAttributes", "write")
async def set_topic_attributes(req: S3Request, params: dict[str, str]) -> ET.Element:
    stored = await _own_topic(req, params.get("TopicArn", ""))
    name = params.get("AttributeName", "")
    value = params.get("AttributeValue", "")
    if not name:
        raise invalid("AttributeName is missing")
    if name in READ_ONLY:
        raise invalid(f"AttributeName: {name} is read-only")
    endpoint = stored.push_endpoint
    arguments = dict(stored.arguments)
    if name == PUSH_ENDPOINT:
        endpoint = endpoint_of(value)
        check_secrets(req, endpoint, {})
    elif value:
        arguments[name] = value
        check_secrets(req, "", {name: value})
    else:
        arguments.pop(name, None)
    await store_topic(req, stored.name, stored.arn, endpoint, arguments)
    return _metadata(req, _document("SetTopicAttributes"))


@action("DeleteTopic", "delete")
async def delete_topic(req: S3Request, params: dict[str, str]) -> ET.Element:
    arn = params.get("TopicArn", "")
    name = owned_name(req, arn)
    services = req.services
    stored = await req.run(services.eventing.get_topic, req.project_id, name)
    if stored is not None and stored.arn == arn:  # deleting a topic that is not there is fine
        await req.run(services.eventing.delete_topic, req.project_id, name, principal(req))
        await req.run(services.config_changed)
    return _metadata(req, _document("DeleteTopic"))


# --- checks -----------------------------------------------------------------------------


def owned_name(req: S3Request, arn: str) -> str:
    """The topic name in an ARN of the caller's project; `AuthorizationError` for another's."""
    match = _ARN.fullmatch(arn)
    if match is None or not TOPIC_NAME.fullmatch(match[3]):
        raise invalid(f"TopicArn {arn[:300]!r}: expected arn:aws:sns:REGION:ACCOUNT:NAME")
    if match[2] != str(req.authenticated_key.project_public_id):
        raise SnsError(
            "AuthorizationError",
            f"topic {arn!r} belongs to another project: a user manages only their own topics",
            403,
        )
    return match[3]


async def _own_topic(req: S3Request, arn: str) -> StoredTopic:
    name = owned_name(req, arn)
    stored = await req.run(req.services.eventing.get_topic, req.project_id, name)
    if stored is None or stored.arn != arn:
        raise SnsError("NotFound", f"Topic does not exist: {arn}", 404)
    return stored


def endpoint_of(value: str) -> str:
    """The push endpoint to store: "" for pull-only (empty or `none`)."""
    value = value.strip()
    return "" if value in ("", PULL_ONLY) else value


def _attributes(params: dict[str, str]) -> dict[str, str]:
    """`Attributes.entry.N.key` / `.value` pairs, as a dict (a key set twice is refused)."""
    entries: dict[int, dict[str, str]] = {}
    for param, value in params.items():
        match = _ENTRY.fullmatch(param)
        if match is not None:
            entries.setdefault(int(match[1]), {})[match[2]] = value
        elif param.startswith("Attributes."):
            raise invalid(f"{param}: expected Attributes.entry.N.key and Attributes.entry.N.value")
    attributes: dict[str, str] = {}
    for n, entry in sorted(entries.items()):
        name = entry.get("key", "")
        if not name:
            raise invalid(f"Attributes.entry.{n}.key is missing or empty")
        if name in attributes:
            raise invalid(f"Attributes: {name!r} is given twice")
        attributes[name] = entry.get("value", "")
    return attributes


def check_secrets(req: S3Request, endpoint: str, arguments: dict[str, str]) -> None:
    """Credentials travel only over HTTPS, unless the server allows them in cleartext."""
    if req.http.url.scheme == "https" or req.services.allow_secrets_in_cleartext:
        return
    what = [PUSH_ENDPOINT] if endpoint and has_user_info(endpoint) else []
    what += [a for a in arguments if is_secret(a)]
    if what:
        raise invalid(
            f"{', '.join(what)}: credentials in push-endpoint are accepted only over TLS (set "
            "topics.allow-secrets-in-cleartext to allow)"
        )


def _validate(arn: str, name: str, endpoint: str, arguments: dict[str, str]) -> None:
    """The target and retry policy the attributes describe, built but never opened."""
    if endpoint:
        try:
            parse_endpoint(endpoint)
        except ValueError as e:
            message = str(e).replace(endpoint, redacted(endpoint))
            raise invalid(f"{PUSH_ENDPOINT}: {message}, or {PULL_ONLY!r} (pull-only)") from None
    topic = Topic(arn, endpoint or PULL_ONLY, arguments, name)
    try:
        push_target(topic)
        policy_of(topic)
    except ValueError as e:
        message = str(e).replace(arn, name)
        if endpoint:
            message = message.replace(endpoint, redacted(endpoint))
        raise invalid(message) from None


async def store_topic(
    req: S3Request, name: str, arn: str, endpoint: str, arguments: dict[str, str]
) -> StoredTopic:
    await req.run_data(_validate, arn, name, endpoint, arguments)  # resolves the host
    services = req.services
    stored = await req.run(
        services.eventing.put_topic,
        req.project_id,
        name,
        arn,
        endpoint,
        arguments,
        principal(req),
    )
    await req.run(services.config_changed)
    return stored


# --- the wire -------------------------------------------------------------------------------


async def _read_body(req: S3Request) -> bytes:
    declared = req.header("content-length")
    try:
        if declared:
            whole_number(declared, "Content-Length", most=MAX_BODY)
    except NumberError as e:
        if e.out_of_range:
            raise invalid(f"the request body is over the limit of {MAX_BODY} bytes") from None
        raise invalid(str(e)) from None
    parts: list[bytes] = []
    size = 0
    async for chunk in req.http.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise invalid(f"the request body is over the limit of {MAX_BODY} bytes")
        parts.append(chunk)
    return b"".join(parts)


def _params(req: S3Request, body: bytes) -> dict[str, str]:
    """The query's parameters, then the form body's (which win)."""
    try:
        form = body.decode("utf-8")
    except UnicodeDecodeError:
        raise invalid("the form body is not UTF-8") from None
    params = dict(req.query)
    params.update(parse_qsl(form, keep_blank_values=True))
    return params


def _document(action_name: str) -> ET.Element:
    return ET.Element(f"{action_name}Response", xmlns=SNS_NAMESPACE)


def _result(root: ET.Element, action_name: str) -> ET.Element:
    return ET.SubElement(root, f"{action_name}Result")


def _metadata(req: S3Request, root: ET.Element) -> ET.Element:
    metadata = ET.SubElement(root, "ResponseMetadata")
    ET.SubElement(metadata, "RequestId").text = req.context.request_id
    return root


def _xml(root: ET.Element, status: int = 200, request_id: str = "") -> Response:
    body = b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="utf-8")
    headers = {"x-amzn-requestid": request_id} if request_id else None
    return Response(body, status, headers=headers, media_type="text/xml")


def _error(req: S3Request, error: SnsError) -> Response:
    root = ET.Element("ErrorResponse", xmlns=SNS_NAMESPACE)
    detail = ET.SubElement(root, "Error")
    ET.SubElement(detail, "Type").text = error.kind
    ET.SubElement(detail, "Code").text = error.code
    ET.SubElement(detail, "Message").text = error.message
    ET.SubElement(root, "RequestId").text = req.context.request_id
    return _xml(root, error.status, req.context.request_id)
