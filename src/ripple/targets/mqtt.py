"""The MQTT target: each delivery's event message is published to one MQTT topic.

One paho-mqtt client (MQTT 3.1.1, clean session) is kept from `open()` to `close()` with its
network thread (`loop_start`), and reconnects by itself. A batch is pipelined: messages are
handed to the client as fast as it takes them, at most `max_in_flight` unacknowledged (a
window the target keeps, not paho), and every PUBACK is awaited until one deadline,
`timeout_s` after the batch started. Nothing is handed to a disconnected client. Before each
connection attempt the destination guard (`ripple.targets.guard`) is asked; a refusal, or a
broker refusing the login, makes every delivery `permanent` until a connection succeeds.

QoS, topics, arguments, outcomes and duplicates: docs/targets.md, "MQTT".
"""

from __future__ import annotations

import logging
import re
import secrets
import ssl
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, MQTTProtocolVersion
from paho.mqtt.reasoncodes import ReasonCode

from ripple.notifications.arguments import flag, positive, whole
from ripple.notifications.endpoints import Endpoint
from ripple.targets.base import OK, Delivery, Outcome, Result, one_line
from ripple.targets.guard import DestinationRefused, default_guard

__all__ = ["MqttConfig", "MqttTarget", "client_id", "from_arguments", "topic_problem"]

log = logging.getLogger(__name__)

_RECONNECT_MIN_S = 1  # paho's reconnect backoff: from 1 s, doubling, capped at 10 s
_RECONNECT_MAX_S = 10
_KEEPALIVE_S = 30
_MAX_TOPIC_BYTES = 65535
_MAX_IN_FLIGHT = 65535  # MQTT message ids are 16-bit
_REFUSED = {134, 135}  # CONNACK: bad user name or password, not authorized
_POLL_S = 0.1  # how often a wait for a PUBACK looks at the connection
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class MqttConfig:
    """Where and how to publish; `ValueError` (one line, naming the field) if a value is wrong."""

    host: str
    topic: str
    port: int = 1883
    qos: int = 1
    tls: bool = False
    verify_ssl: bool = True  # with tls: False accepts any certificate (tests only)
    ca_file: str | None = None  # with tls: PEM CA certificates instead of the system's
    username: str | None = None
    password: str | None = None
    timeout_s: float = 5.0  # to connect, and for a batch's acknowledgements
    max_in_flight: int = 1000

    def __post_init__(self) -> None:
        if not self.host:
            raise ValueError("host must not be empty")
        if not 0 < self.port < 65536:
            raise ValueError(f"port must be from 1 to 65535, not {self.port}")
        problem = topic_problem(self.topic)
        if problem:
            raise ValueError(f"topic {self.topic!r} {problem}")
        if self.qos not in (0, 1):
            raise ValueError(f"qos must be 0 or 1 (only QoS 0 and 1 are supported), not {self.qos}")
        if not self.timeout_s > 0:
            raise ValueError(
                f"timeout_s must be a positive number of seconds, not {self.timeout_s}"
            )
        if not 1 <= self.max_in_flight <= _MAX_IN_FLIGHT:
            raise ValueError(
                f"max_in_flight must be from 1 to {_MAX_IN_FLIGHT}, not {self.max_in_flight}"
            )
        if self.password is not None and not self.username:
            raise ValueError("a password needs a username")

    @property
    def address(self) -> str:
        """`mqtt[s]://host:port`, for errors and logs (never a password)."""
        return f"{'mqtts' if self.tls else 'mqtt'}://{self.host}:{self.port}"


def topic_problem(topic: str) -> str | None:
    """Why `topic` cannot be published to, or None."""
    if not topic:
        return "is empty"
    if "+" in topic or "#" in topic:
        return "has the MQTT wildcard + or #, which a publish cannot use"
    if topic.startswith("$"):
        return "starts with $, which is reserved for the broker"
    if "\0" in topic:
        return "has a NUL character"
    try:
        size = len(topic.encode())
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    if size > _MAX_TOPIC_BYTES:
        return f"is longer than {_MAX_TOPIC_BYTES} bytes"
    return None


def client_id(topic: str) -> str:
    """`ripple-<topic>-<8 random hex digits>`: unique per client; the topic shortened to 40
    characters, anything but letters, digits, `_`, `.` and `-` replaced by `_`."""
    return f"ripple-{_ID_UNSAFE.sub('_', topic)[:40]}-{secrets.token_hex(4)}"


class MqttTarget:
    """Publishes each delivery to one MQTT topic; see the module docstring."""

    def __init__(self, config: MqttConfig, name: str | None = None) -> None:
        self.config = config
        self.name = name if name is not None else config.topic
        self.client_id = client_id(self.name)
        self._client: paho.Client | None = None
        self._state = threading.Condition()  # guards the three fields below; notified on change
        self._down = "not connected yet"  # why we are not connected ("" when connected)
        self._refused: str | None = None  # the broker refused our credentials
        self._guarded: str | None = None  # the destination guard refused the broker
        self._attempts = 0  # connection attempts that ended (either way)

    # the connection ------------------------------------------------------------------

    def open(self) -> None:
        """Start the client and wait (at most `timeout_s`) for the first connection attempt;
        a broker that is down does not fail `open`: publishes answer `retry` until it is up."""
        if self._client is not None:
            return
        config = self.config
        client = paho.Client(
            CallbackAPIVersion.VERSION2,
            client_id=self.client_id,
            clean_session=True,
            protocol=MQTTProtocolVersion.MQTTv311,
        )
        if config.username:
            client.username_pw_set(config.username, config.password)
        if config.tls:
            client.tls_set_context(self._tls_context())
        # The window is ours: paho's own in-flight bookkeeping scans every unacknowledged
        # message on each PUBACK, which makes a wide window much slower. Its queue is capped
        # at the window too, so what a failed batch left holds back the next one (`retry`)
        # instead of piling up.
        client.max_inflight_messages_set(0)
        client.max_queued_messages_set(config.max_in_flight)
        client.reconnect_delay_set(_RECONNECT_MIN_S, _RECONNECT_MAX_S)
        client.connect_timeout = config.timeout_s
        client.on_pre_connect = self._on_pre_connect
        client.on_connect = self._on_connect
        client.on_connect_fail = self._on_connect_fail
        client.on_disconnect = self._on_disconnect
        with self._state:
            self._down, self._refused, self._attempts = "not connected yet", None, 0
            self._guarded = None
        client.connect_async(config.host, config.port, keepalive=_KEEPALIVE_S)
        client.loop_start()
        self._client = client
        with self._state:
            self._state.wait_for(lambda: self._attempts > 0, config.timeout_s)
            down = self._guarded or self._down
        if down:
            log.warning("MQTT target %s: %s: %s", self.name, config.address, down)

    def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        with self._state:
            self._down = "closed"
        client.disconnect()
        client.loop_stop()

    def _tls_context(self) -> ssl.SSLContext:
        try:
            context = ssl.create_default_context(cafile=self.config.ca_file)
        except (OSError, ssl.SSLError) as e:  # a missing or unreadable ca-file
            raise ValueError(
                f"MQTT target {self.name!r}: ca-file {self.config.ca_file!r}: {one_line(e)}"
            ) from None
        if not self.config.verify_ssl:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def _on_pre_connect(self, client: paho.Client, userdata: Any) -> None:
        """Before each connection attempt: an OSError makes paho count it as failed."""
        try:
            default_guard().check_address(self.config.host, self.config.port)
        except DestinationRefused as e:
            with self._state:
                self._guarded = one_line(e)
            raise ConnectionRefusedError(one_line(e)) from e
        with self._state:
            self._guarded = None

    def _on_connect(
        self, client: paho.Client, userdata: Any, flags: Any, reason: ReasonCode, props: Any
    ) -> None:
        with self._state:
            self._attempts += 1
            if reason.is_failure:
                self._down = f"the broker refused the connection: {reason}"
                self._refused = str(reason) if reason.value in _REFUSED else None
            else:
                if self._attempts > 1:
                    log.info("MQTT target %s: connected to %s", self.name, self.config.address)
                self._down, self._refused = "", None
            self._state.notify_all()

    def _on_connect_fail(self, client: paho.Client, userdata: Any) -> None:
        with self._state:
            self._attempts += 1
            if self._down != "closed":
                self._down = "cannot connect (refused, unreachable or a TLS failure)"
                self._refused = None
            self._state.notify_all()

    def _on_disconnect(
        self, client: paho.Client, userdata: Any, flags: Any, reason: ReasonCode, props: Any
    ) -> None:
        with self._state:
            if not self._down:
                log.warning(
                    "MQTT target %s: connection to %s lost: %s",
                    self.name,
                    self.config.address,
                    reason,
                )
                self._down = f"connection lost ({reason})"
            self._state.notify_all()

    def _unavailable(self) -> Result | None:
        """The answer for a message whose turn comes while not connected, or None."""
        with self._state:
            down, refused, guarded = self._down, self._refused, self._guarded
        if not down:
            return None
        if guarded is not None:
            return Result(Outcome.PERMANENT, guarded)
        if refused is not None:
            return Result(Outcome.PERMANENT, f"{self.config.address} refused us: {refused}")
        return Result(Outcome.RETRY, f"not connected to {self.config.address}: {down}")

    # publishing ------------------------------------------------------------------------

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]:
        client = self._client
        if client is None:
            raise RuntimeError(f"MQTT target {self.name!r} is not open: call open() first")
        deadline = time.monotonic() + self.config.timeout_s
        sent: list[paho.MQTTMessageInfo | Result] = []
        oldest = 0  # sent[oldest:] may still be waiting for an acknowledgement
        window = self.config.max_in_flight
        for delivery in deliveries:
            while len(sent) - oldest >= window:  # the window is full: wait for the oldest
                sent[oldest] = self._settle(sent[oldest], deadline)
                oldest += 1
            sent.append(self._send(client, delivery, deadline))
        return [self._settle(item, deadline) for item in sent]

    def _send(
        self, client: paho.Client, delivery: Delivery, deadline: float
    ) -> paho.MQTTMessageInfo | Result:
        unavailable = self._unavailable()
        if unavailable is not None:
            return unavailable
        if time.monotonic() >= deadline:
            return self._late()
        try:
            info = client.publish(self.config.topic, delivery.body, qos=self.config.qos)
        except ValueError as e:  # a payload over MQTT's 256 MB
            return Result(Outcome.PERMANENT, one_line(e))
        return info

    def _settle(self, item: paho.MQTTMessageInfo | Result, deadline: float) -> Result:
        """Wait (until `deadline`) for the acknowledgement of one message."""
        if isinstance(item, Result):
            return item
        while True:
            if item.rc == MQTTErrorCode.MQTT_ERR_QUEUE_SIZE:
                return Result(
                    Outcome.RETRY,
                    f"too many unacknowledged messages for {self.config.address} "
                    f"(more than {self.config.max_in_flight})",
                )
            if item.rc not in (MQTTErrorCode.MQTT_ERR_SUCCESS, MQTTErrorCode.MQTT_ERR_AGAIN):
                return Result(
                    Outcome.RETRY,
                    f"connection to {self.config.address} lost: {paho.error_string(item.rc)}",
                )
            try:
                if item.is_published():
                    return OK
            except (RuntimeError, ValueError):  # rc changed meanwhile: answered above
                continue
            unavailable = self._unavailable()
            if unavailable is not None:
                return Result(
                    unavailable.outcome,
                    f"connection to {self.config.address} lost before the acknowledgement",
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return self._late()
            try:
                item.wait_for_publish(min(remaining, _POLL_S))
            except (RuntimeError, ValueError):
                continue

    def _late(self) -> Result:
        return Result(
            Outcome.RETRY,
            f"not acknowledged within {self.config.timeout_s:g}s by {self.config.address}",
        )


_ARGUMENTS = ("mqtt-topic", "mqtt-qos", "max-in-flight", "timeout", "verify-ssl", "ca-file")


def from_arguments(name: str, endpoint: Endpoint, arguments: Mapping[str, str]) -> MqttTarget:
    """An MQTT target named `name` publishing to the broker at `endpoint` (mqtt[s]://), from
    string arguments: `mqtt-topic`, `mqtt-qos` (0 or 1), `max-in-flight`, `timeout`
    (seconds), `verify-ssl` (true/false) and `ca-file` (mqtts only). A wrong or unknown
    argument raises `ValueError` naming it."""
    try:
        return MqttTarget(_config(name, endpoint, arguments), name=name)
    except ValueError as e:
        raise ValueError(f"MQTT target {name!r}: {e}") from None


def _config(name: str, endpoint: Endpoint, arguments: Mapping[str, str]) -> MqttConfig:
    for arg in arguments:
        if arg not in _ARGUMENTS:
            raise ValueError(f"unknown argument {arg!r}; expected one of {', '.join(_ARGUMENTS)}")
    if endpoint.scheme not in ("mqtt", "mqtts"):
        raise ValueError(f"endpoint {endpoint.redacted!r} is not mqtt:// or mqtts://")
    topic = arguments.get("mqtt-topic", name)
    problem = topic_problem(topic)
    if problem and "mqtt-topic" in arguments:
        raise ValueError(f"argument 'mqtt-topic': MQTT topic {topic!r} {problem}")
    if problem:
        raise ValueError(
            f"the name cannot be the MQTT topic: it {problem}; "
            "give one with the mqtt-topic argument"
        )
    qos = 1
    if "mqtt-qos" in arguments:
        raw = arguments["mqtt-qos"].strip()
        if raw not in ("0", "1"):
            raise ValueError(
                f"argument 'mqtt-qos' must be 0 or 1 (only QoS 0 and 1 are supported), not {raw!r}"
            )
        qos = int(raw)
    max_in_flight = 1000
    if "max-in-flight" in arguments:
        max_in_flight = whole("max-in-flight", arguments["max-in-flight"])
        if max_in_flight > _MAX_IN_FLIGHT:
            raise ValueError(
                f"argument 'max-in-flight' must be at most {_MAX_IN_FLIGHT}, not {max_in_flight}"
            )
    tls_only = [a for a in ("verify-ssl", "ca-file") if a in arguments]
    if tls_only and not endpoint.tls:
        raise ValueError(
            f"argument {tls_only[0]!r} needs an mqtts:// endpoint; {endpoint.redacted!r} is plain"
        )
    ca_file = arguments.get("ca-file")
    if ca_file is not None and not ca_file:
        raise ValueError("argument 'ca-file' must not be empty")
    return MqttConfig(
        host=endpoint.host,
        port=endpoint.port,
        topic=topic,
        qos=qos,
        tls=endpoint.tls,
        verify_ssl=flag("verify-ssl", arguments["verify-ssl"])
        if "verify-ssl" in arguments
        else True,
        ca_file=ca_file,
        username=endpoint.username,
        password=endpoint.password,
        timeout_s=positive("timeout", arguments["timeout"]) if "timeout" in arguments else 5.0,
        max_in_flight=max_in_flight,
    )
