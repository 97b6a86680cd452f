"""The Google Pub/Sub target: each delivery is one message published to one topic.

The data is the S3 event message; the attributes are the delivery's and `eventId`, stable
across redeliveries (Pub/Sub's own `messageId` is not). With `ordering=True` each message
gets the ordering key `bucket/key`, and a failure pauses its key in the client, which the
target resumes at once. Retries are the pipeline's, so every publish is made with
`retry=None` and a `timeout` of `timeout_s`: one failed RPC answers `retry` or `permanent`
at once. An explicit `endpoint` (a gRPC target, for an emulator or a test server) is spoken
to without credentials, and the destination guard (`ripple.targets.guard`) checks it when the
topic is configured and before each batch; Google's endpoint is not checked.

Attributes, ordering, outcomes, batching, credentials and the emulator: docs/targets.md,
"Google Pub/Sub".
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any

import grpc  # type: ignore[import-untyped]
from google.api_core import exceptions as api_exceptions
from google.cloud import pubsub_v1  # type: ignore[import-untyped]
from google.pubsub_v1.services.publisher.transports.grpc import PublisherGrpcTransport

from ripple.notifications.arguments import flag, positive
from ripple.targets.base import OK, Delivery, Outcome, Result, one_line
from ripple.targets.guard import DestinationGuard, DestinationRefused, default_guard

__all__ = ["PubSubTarget", "from_arguments", "ordering_key"]

_publisher_exceptions = pubsub_v1.publisher.exceptions  # the library has no type hints

_TOPIC = re.compile(r"^projects/[^/]+/topics/[^/]+$")
_PERMANENT = (
    api_exceptions.InvalidArgument,
    api_exceptions.NotFound,
    api_exceptions.PermissionDenied,
    api_exceptions.Unauthenticated,
)
_MAX_ORDERING_KEY_BYTES = 1024  # Pub/Sub refuses longer ordering keys
_BATCH = {"max_latency": 0.01, "max_messages": 1000}


class PubSubTarget:
    """Publishes deliveries to one Pub/Sub topic; see the module docstring."""

    def __init__(
        self,
        topic: str,
        *,
        ordering: bool = False,
        endpoint: str | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        if not _TOPIC.match(topic):
            raise ValueError(f"topic {topic!r} is not of the form projects/PROJECT/topics/TOPIC")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be a positive number of seconds, not {timeout_s}")
        if endpoint is not None and not endpoint.strip():
            raise ValueError("endpoint must be a gRPC target (e.g. 127.0.0.1:8085) or None")
        self.name = topic
        self.topic = topic
        self.ordering = ordering
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self._client: Any = None  # pubsub_v1.PublisherClient: the library is not typed

    def check(self, guard: DestinationGuard, *, api_topic: bool = False) -> None:
        """Configuration time: `DestinationRefused` if `guard` refuses the explicit endpoint,
        or, for a topic made through the API (`api_topic`), its Pub/Sub project (whether or
        not an endpoint is given: the allow list names the projects API topics may use)."""
        if api_topic:
            guard.check_pubsub_topic(self.topic)
        if self.endpoint is not None:
            guard.check_grpc_target(self.endpoint)

    def open(self) -> None:
        if self._client is not None:
            return
        options: dict[str, Any] = {
            "batch_settings": pubsub_v1.types.BatchSettings(**_BATCH),
            "publisher_options": pubsub_v1.types.PublisherOptions(
                enable_message_ordering=self.ordering, retry=None, timeout=self.timeout_s
            ),
        }
        if self.endpoint is not None:
            # A transport instance wins over PUBSUB_EMULATOR_HOST and needs no credentials.
            channel = grpc.insecure_channel(self.endpoint)
            options["transport"] = PublisherGrpcTransport(host=self.endpoint, channel=channel)
            options["client_options"] = {"api_endpoint": self.endpoint}
        self._client = pubsub_v1.PublisherClient(**options)

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]:
        client = self._client
        if client is None:
            raise RuntimeError(f"Pub/Sub target {self.topic!r} is not open: call open() first")
        refused = self._guard()
        if refused is not None:
            return [refused] * len(deliveries)
        keys = [ordering_key(d) if self.ordering else "" for d in deliveries]
        pending: list[Future[str] | Result] = []
        for delivery, key in zip(deliveries, keys, strict=True):
            try:
                future = client.publish(
                    self.topic,
                    delivery.body,
                    ordering_key=key,
                    retry=None,
                    timeout=self.timeout_s,
                    eventId=delivery.event_id,  # stable across redeliveries: de-duplicate on it
                    **dict(delivery.attributes),
                )
            except _publisher_exceptions.MessageTooLargeError as e:
                pending.append(Result(Outcome.PERMANENT, one_line(e)))
            else:
                pending.append(future)
        deadline = time.monotonic() + self.timeout_s
        results = [_wait(p, deadline, self.timeout_s) for p in pending]
        if self.ordering:
            for key in {k for k, r in zip(keys, results, strict=True) if not r.ok}:
                self._resume(key)
        return results

    def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        try:
            client.stop()  # sends what is still batched
        finally:
            client.transport.close()

    def _guard(self) -> Result | None:
        """The destination guard's answer for the explicit endpoint, or None to go on."""
        if self.endpoint is None:
            return None
        try:
            default_guard().check_grpc_target(self.endpoint, connecting=True)
        except DestinationRefused as e:
            return Result(Outcome.PERMANENT, one_line(e))
        except OSError as e:
            return Result(Outcome.RETRY, f"cannot resolve {self.endpoint!r}: {one_line(e)}")
        return None

    def _resume(self, key: str) -> None:
        """Unpause an ordering key after a failed publish (a no-op if it is not paused)."""
        # RuntimeError: not paused (yet), e.g. the publish timed out here and is still in flight
        with contextlib.suppress(RuntimeError):
            self._client.resume_publish(self.topic, key)


_ARGUMENTS = ("ordering", "endpoint", "timeout")


def from_arguments(name: str, topic: str, arguments: Mapping[str, str]) -> PubSubTarget:
    """A Pub/Sub target named `name` publishing to `topic`, from string arguments:
    `ordering` (true/false), `endpoint` (the gRPC target of an emulator: host:port…),
    `timeout` (seconds).
    A wrong or unknown argument raises `ValueError` naming it."""
    try:
        for arg in arguments:
            if arg not in _ARGUMENTS:
                raise ValueError(
                    f"unknown argument {arg!r}; expected one of {', '.join(_ARGUMENTS)}"
                )
        target = PubSubTarget(
            topic,
            ordering=flag("ordering", arguments["ordering"]) if "ordering" in arguments else False,
            endpoint=arguments.get("endpoint"),
            timeout_s=positive("timeout", arguments["timeout"]) if "timeout" in arguments else 10.0,
        )
    except ValueError as e:
        raise ValueError(f"Pub/Sub topic {name!r}: {e}") from None
    target.name = name
    return target


def ordering_key(delivery: Delivery) -> str:
    """`bucket/key`; a key too long for Pub/Sub is replaced by its SHA-256 (still per object)."""
    a = delivery.attributes  # what routing knew: a reformatted message need not be a record
    bucket, object_key = a.get("bucket"), a.get("key")
    if bucket is None or object_key is None:
        bucket, object_key = delivery.bucket, delivery.key
    key = f"{bucket}/{object_key}"
    if len(key.encode()) <= _MAX_ORDERING_KEY_BYTES:
        return key
    return f"{bucket}/sha256:{hashlib.sha256(object_key.encode()).hexdigest()}"


def _wait(pending: Future[str] | Result, deadline: float, timeout_s: float) -> Result:
    if isinstance(pending, Result):
        return pending
    try:
        pending.result(timeout=max(0.0, deadline - time.monotonic()))
    except TimeoutError:
        return Result(Outcome.RETRY, f"publish not acknowledged within {timeout_s:g}s")
    except _PERMANENT as e:
        return Result(Outcome.PERMANENT, _error(e))
    except _publisher_exceptions.PublishToPausedOrderingKeyException:
        return Result(Outcome.RETRY, "an earlier message with the same ordering key failed")
    except Exception as e:  # any other failure of the RPC is worth trying again
        return Result(Outcome.RETRY, _error(e))
    return OK


def _error(e: BaseException) -> str:
    if isinstance(e, api_exceptions.GoogleAPICallError) and e.grpc_status_code is not None:
        return f"{e.grpc_status_code.name}: {one_line(e.message or e)}"
    return f"{type(e).__name__}: {one_line(e)}"
