"""The HTTP webhook target: each delivery is one POST to a configured URL.

The body is the S3 event message itself (`envelope="s3"`) or that message wrapped in the
envelope a Google Pub/Sub push subscription sends (`envelope="pubsub-push"`), so a receiver
written for a push subscription works unchanged. Every request carries `X-Ripple-Event-Id`
(stable across redeliveries: de-duplicate on it) and, with a secret, `X-Ripple-Signature:
sha256=<hex HMAC-SHA256 of the exact body>`. One `httpx.Client` is kept from `open()` to
`close()`; a batch is sent with at most `max_in_flight` requests in flight and answered in
input order. 2xx is `ok`; 408, 429, 3xx, 5xx, timeouts and connection errors are `retry`;
any other 4xx is `permanent`. Arguments and outcomes are documented in docs/targets.md.

Each new connection asks the destination guard (`ripple.targets.guard`) first and connects
to an address it checked, so a name re-resolved by an attacker's DNS cannot slip past it; a
refused destination is `permanent`. The client connects directly: proxy variables
(`HTTPS_PROXY`, …) are not used, since a proxy would hide the destination from the guard.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, get_args
from urllib.parse import urlsplit

import httpcore
import httpx
import orjson

from ripple.notifications.arguments import flag, positive, whole
from ripple.targets.base import OK, Delivery, Outcome, Result, one_line
from ripple.targets.cloudevents import binary_headers
from ripple.targets.guard import DestinationRefused, default_guard

__all__ = ["Envelope", "WebhookConfig", "WebhookTarget", "from_arguments"]

Envelope = Literal["s3", "pubsub-push"]
_ENVELOPES: tuple[str, ...] = get_args(Envelope)
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # an RFC 9110 token
_BAD_VALUE = re.compile(r"[\r\n\0]")


@dataclass(frozen=True)
class WebhookConfig:
    """Where and how to POST; `ValueError` (one line, naming the field) if a value is wrong."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    bearer_token: str | None = None
    secret: str | None = None  # signs each body: X-Ripple-Signature: sha256=<hex HMAC>
    verify_ssl: bool = True
    timeout_s: float = 5.0  # each of connect, write and read, per request
    max_in_flight: int = 16
    envelope: Envelope = "s3"
    subscription: str = ""  # the push envelope's `subscription` field
    cloudevents: bool = (
        False  # CloudEvents 1.0 binary mode: ce-* headers (ripple.targets.cloudevents)
    )

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url {self.url!r} must be an absolute http:// or https:// URL")
        for name, value in self.headers.items():
            if not _HEADER_NAME.match(name):
                raise ValueError(f"header name {name!r} is not a valid HTTP header name")
            if _BAD_VALUE.search(value):
                raise ValueError(f"header {name!r} has a line break or NUL in its value")
        if self.bearer_token and _BAD_VALUE.search(self.bearer_token):
            raise ValueError("bearer_token has a line break or NUL in it")
        if not self.timeout_s > 0:
            raise ValueError(
                f"timeout_s must be a positive number of seconds, not {self.timeout_s}"
            )
        if self.max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, not {self.max_in_flight}")
        if self.envelope not in _ENVELOPES:
            raise ValueError(
                f"envelope must be one of {', '.join(_ENVELOPES)}, not {self.envelope!r}"
            )
        if self.cloudevents and self.envelope != "s3":
            raise ValueError(
                "cloudevents needs envelope s3: a Pub/Sub push envelope is no CloudEvent"
            )


class WebhookTarget:
    """POSTs each delivery to one URL; see the module docstring for the wire format."""

    def __init__(self, config: WebhookConfig, name: str | None = None) -> None:
        self.config = config
        self.name = name if name is not None else config.url
        headers = httpx.Headers(dict(config.headers))
        if config.bearer_token:
            headers["Authorization"] = f"Bearer {config.bearer_token}"
        headers["Content-Type"] = "application/json"
        self._headers = headers
        self._secret = config.secret.encode() if config.secret else None
        self._client: httpx.Client | None = None
        self._pool: ThreadPoolExecutor | None = None

    def open(self) -> None:
        if self._client is not None:
            return
        n = self.config.max_in_flight
        self._client = httpx.Client(
            transport=_guarded_transport(self.config.verify_ssl, n),
            timeout=httpx.Timeout(self.config.timeout_s),
            follow_redirects=False,
        )
        self._pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix=f"webhook-{self.name}")

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]:
        if self._client is None or self._pool is None:
            raise RuntimeError(f"webhook target {self.name!r} is not open: call open() first")
        client = self._client
        futures = [self._pool.submit(self._send, client, d) for d in deliveries]
        return [f.result() for f in futures]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def body(self, delivery: Delivery, now: datetime | None = None) -> bytes:
        """The exact bytes POSTed for `delivery` (what the signature covers)."""
        if self.config.envelope == "s3":
            return delivery.body
        sent = (now or datetime.now(UTC)).astimezone(UTC)
        publish_time = sent.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        message = {
            "data": base64.b64encode(delivery.body).decode("ascii"),
            "attributes": dict(delivery.attributes),
            "messageId": delivery.event_id,
            "message_id": delivery.event_id,
            "publishTime": publish_time,
            "publish_time": publish_time,
        }
        return orjson.dumps({"message": message, "subscription": self.config.subscription})

    def _send(self, client: httpx.Client, delivery: Delivery) -> Result:
        url = self.config.url
        body = self.body(delivery)
        headers = self._headers.copy()
        headers["X-Ripple-Event-Id"] = delivery.event_id
        if self.config.cloudevents:
            headers.update(binary_headers(delivery.event, delivery.event_id))
        if self._secret is not None:
            digest = hmac.new(self._secret, body, hashlib.sha256).hexdigest()
            headers["X-Ripple-Signature"] = f"sha256={digest}"
        try:
            response = client.post(url, content=body, headers=headers)
        except DestinationRefused as e:
            return Result(Outcome.PERMANENT, one_line(e))
        except httpx.TimeoutException:
            return Result(Outcome.RETRY, f"timed out after {self.config.timeout_s:g}s: {url}")
        except httpx.ConnectError as e:
            if isinstance(e.__cause__, ConnectionRefusedError) or "refused" in str(e).lower():
                return Result(Outcome.RETRY, f"connection refused: {url}")
            return Result(Outcome.RETRY, f"cannot connect to {url}: {one_line(e)}")
        except httpx.RemoteProtocolError as e:
            return Result(Outcome.RETRY, f"connection to {url} broken: {one_line(e)}")
        except httpx.TransportError as e:
            return Result(Outcome.RETRY, f"{type(e).__name__} from {url}: {one_line(e)}")
        return _outcome(response.status_code, url)


class _GuardedBackend(httpcore.NetworkBackend):
    """httpcore's sockets, opened only to addresses the destination guard checked (TLS
    still verifies the name of the URL: httpcore takes it from the request, not from here)."""

    def __init__(self) -> None:
        self._sync = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = default_guard().check_address(host, port)
        except OSError as e:  # the name does not resolve
            raise httpcore.ConnectError(f"cannot resolve {host}: {e}") from e
        error: Exception | None = None
        for address in addresses:
            try:
                return self._sync.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as e:
                error = e
        if error is None:
            raise httpcore.ConnectError(f"{host} resolved to no address")
        raise error

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("a webhook does not connect to a unix socket")

    def sleep(self, seconds: float) -> None:
        self._sync.sleep(seconds)


def _guarded_transport(verify_ssl: bool, max_connections: int) -> httpx.HTTPTransport:
    """httpx's transport, its connection pool opening sockets through `_GuardedBackend`."""
    ssl_context = httpx.create_ssl_context(verify=verify_ssl)
    limits = httpx.Limits(
        max_connections=max_connections, max_keepalive_connections=max_connections
    )
    transport = httpx.HTTPTransport(verify=ssl_context, limits=limits)
    # httpx builds its pool without a way to pass a network backend: build it the same way
    transport._pool = httpcore.ConnectionPool(
        ssl_context=ssl_context,
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=_GuardedBackend(),
    )
    return transport


def _outcome(status: int, url: str) -> Result:
    if 200 <= status < 300:
        return OK
    error = f"HTTP {status} from {url}"
    if 400 <= status < 500 and status not in (408, 429):
        return Result(Outcome.PERMANENT, error)
    return Result(Outcome.RETRY, error)


_PLAIN = (
    "verify-ssl",
    "timeout",
    "bearer-token",
    "secret",
    "max-in-flight",
    "envelope",
    "cloudevents",
)
_ARGUMENTS = (*_PLAIN, "subscription", "header.<Name>")


def from_arguments(name: str, url: str, arguments: Mapping[str, str]) -> WebhookTarget:
    """A webhook target from string arguments (a topic's push-endpoint arguments).

    `verify-ssl` (true/false), `timeout` (seconds), `bearer-token`, `secret`,
    `header.<Name>` (one per header), `max-in-flight`, `envelope` (s3 | pubsub-push),
    `subscription`, `cloudevents` (true/false). A wrong or unknown argument raises
    `ValueError` naming it.
    """
    try:
        return WebhookTarget(_config(url, arguments), name=name)
    except ValueError as e:
        raise ValueError(f"webhook {name!r}: {e}") from None


def _config(url: str, arguments: Mapping[str, str]) -> WebhookConfig:
    headers: dict[str, str] = {}
    options: dict[str, str] = {}
    for arg, value in arguments.items():
        if arg.startswith("header."):
            header = arg.removeprefix("header.")
            if not _HEADER_NAME.match(header):
                raise ValueError(f"argument {arg!r}: {header!r} is not a valid HTTP header name")
            headers[header] = value
        elif arg in _PLAIN or arg == "subscription":
            options[arg] = value
        else:
            raise ValueError(f"unknown argument {arg!r}; expected one of {', '.join(_ARGUMENTS)}")
    for arg in ("bearer-token", "secret"):
        if arg in options and not options[arg]:
            raise ValueError(f"argument {arg!r} must not be empty")
    for arg, value in arguments.items():
        if (arg == "bearer-token" or arg.startswith("header.")) and _BAD_VALUE.search(value):
            raise ValueError(f"argument {arg!r} has a line break or NUL in its value")
    verify_ssl = flag("verify-ssl", options["verify-ssl"]) if "verify-ssl" in options else True
    timeout_s = positive("timeout", options["timeout"]) if "timeout" in options else 5.0
    max_in_flight = 16
    if "max-in-flight" in options:
        max_in_flight = whole("max-in-flight", options["max-in-flight"])
    raw_envelope = options.get("envelope", "s3")
    if raw_envelope not in _ENVELOPES:
        raise ValueError(
            f"argument 'envelope' must be one of {', '.join(_ENVELOPES)}, not {raw_envelope!r}"
        )
    envelope: Envelope = "s3" if raw_envelope == "s3" else "pubsub-push"
    return WebhookConfig(
        url=url,
        headers=headers,
        bearer_token=options.get("bearer-token"),
        secret=options.get("secret"),
        verify_ssl=verify_ssl,
        timeout_s=timeout_s,
        max_in_flight=max_in_flight,
        envelope=envelope,
        subscription=options.get("subscription", ""),
        cloudevents=flag("cloudevents", options["cloudevents"])
        if "cloudevents" in options
        else False,
    )
