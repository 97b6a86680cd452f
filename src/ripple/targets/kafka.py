"""The Kafka target: each delivery is one record produced to one Kafka topic, with
confluent-kafka (librdkafka).

The record's value is the S3 event message, its key `<bucket>/<key>` (so one object's events
share a partition and keep their order there), its headers `eventId` and the delivery's
attributes. One producer (idempotent with `kafka-ack-level=broker`) is kept from `open()` to
`close()` and shared by concurrent batches; a batch is produced, then flushed, and each
record's delivery report settles its delivery. A fatal producer error drops the producer for
the next batch to replace. A record over the broker's size limit is `permanent`, every other
failure `retry`; the destination guard (`ripple.targets.guard`) checks every bootstrap server
and, in production, every advertised broker before each batch. Delivery is at least once.

Record, arguments, outcomes, TLS and SASL, consuming: docs/targets.md, "Kafka".
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from confluent_kafka import KafkaError, KafkaException, Producer

from ripple.notifications.arguments import choice, flag, positive
from ripple.notifications.endpoints import Endpoint
from ripple.targets.base import OK, Delivery, Outcome, Result, one_line
from ripple.targets.guard import DestinationGuard, DestinationRefused, default_guard

__all__ = ["AckLevel", "KafkaConfig", "KafkaTarget", "from_arguments", "record_key"]

log = logging.getLogger(__name__)

AckLevel = Literal["none", "broker"]
ACK_LEVELS: tuple[str, ...] = get_args(AckLevel)
Mechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
MECHANISMS: tuple[str, ...] = get_args(Mechanism)
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")  # Kafka's legal topic names
_TIMER_SLACK_S = 1.5  # librdkafka expires timed-out messages on a 1 s timer
_RECONNECT_MAX_MS = 2000
_FREE_REPORTS = 100_000  # callbacks kept for reuse at most (librdkafka's default queue)
_PERMANENT = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_MSG_SIZE,
        KafkaError.INVALID_MSG,
        KafkaError.INVALID_RECORD,
    }
)


@dataclass(frozen=True)
class KafkaConfig:
    """Where and how to produce; `ValueError` (one line, naming the field) if a value is
    wrong."""

    servers: tuple[tuple[str, int], ...]  # the bootstrap servers
    topic: str
    ack_level: AckLevel = "broker"
    use_ssl: bool = False
    verify_ssl: bool = True
    ca_location: str | None = None  # PEM file of the CA certificates to trust (with TLS)
    sasl_mechanism: Mechanism | None = None  # with a user name
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout_s: float = 10.0  # to deliver a record, and for each request and connection

    def __post_init__(self) -> None:
        if not self.servers:
            raise ValueError("servers must name at least one bootstrap server")
        if not _TOPIC.match(self.topic) or self.topic in (".", ".."):
            raise ValueError(
                f"topic {self.topic!r} is not a Kafka topic name (1 to 249 of A-Z a-z 0-9 . _ -)"
            )
        if self.ack_level not in ACK_LEVELS:
            raise ValueError(
                f"ack level must be one of {', '.join(ACK_LEVELS)}, not {self.ack_level!r}"
            )
        if (self.username is None) != (self.password is None):
            raise ValueError("a user name and a password go together")
        if self.sasl_mechanism is not None and self.sasl_mechanism not in MECHANISMS:
            raise ValueError(f"SASL mechanism must be one of {', '.join(MECHANISMS)}")
        if not self.timeout_s > 0:
            raise ValueError(
                f"timeout_s must be a positive number of seconds, not {self.timeout_s}"
            )

    @property
    def bootstrap(self) -> str:
        """`host:port,…` as librdkafka takes it."""
        return ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.servers)

    @property
    def where(self) -> str:
        """The servers and topic, for errors and logs (never a credential)."""
        return f"kafka://{self.bootstrap} topic {self.topic!r}"

    def producer_config(self, client_id: str = "ripple") -> dict[str, Any]:
        """librdkafka's settings for this target's producer (credentials included)."""
        ms = max(10, round(self.timeout_s * 1000))
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "client.id": client_id,
            "acks": "all" if self.ack_level == "broker" else "0",
            "enable.idempotence": self.ack_level == "broker",
            "message.timeout.ms": ms,
            "request.timeout.ms": ms,
            "socket.timeout.ms": ms,
            "socket.connection.setup.timeout.ms": ms,
            "reconnect.backoff.max.ms": _RECONNECT_MAX_MS,
            "linger.ms": 5,
            # the Java client's placement of keys, so other producers agree on partitions
            "partitioner": "murmur2_random",
        }
        sasl = self.username is not None
        protocol = {(False, False): "PLAINTEXT", (True, False): "SSL"}
        protocol |= {(False, True): "SASL_PLAINTEXT", (True, True): "SASL_SSL"}
        config["security.protocol"] = protocol[self.use_ssl, sasl]
        if self.use_ssl:
            if self.ca_location:
                config["ssl.ca.location"] = self.ca_location
            config["enable.ssl.certificate.verification"] = self.verify_ssl
            config["ssl.endpoint.identification.algorithm"] = "https" if self.verify_ssl else "none"
        if sasl:
            config["sasl.mechanism"] = self.sasl_mechanism or "PLAIN"
            config["sasl.username"] = self.username
            config["sasl.password"] = self.password
        return config


def record_key(delivery: Delivery) -> bytes:
    """`<bucket>/<key>`: every event of one object has the same record key."""
    return delivery.object_path.encode()


def headers(delivery: Delivery) -> list[tuple[str, str | bytes | None]]:
    """The record's headers: `eventId`, then the delivery's attributes."""
    found: list[tuple[str, str | bytes | None]] = [("eventId", delivery.event_id.encode())]
    found += [(name, value.encode()) for name, value in delivery.attributes.items()]
    return found


class _Batch:
    """One `publish` call: its results, set by delivery reports (from any thread's poll)."""

    def __init__(self, size: int, config: KafkaConfig) -> None:
        self.results: list[Result | None] = [None] * size
        self.config = config

    def report(self, index: int, error: KafkaError | None) -> None:
        self.results[index] = OK if error is None else _failure(error, self.config)


class _Report:
    """A record's delivery-report callback: it answers `index` of `batch`, then goes back to
    `free` to serve a later record. Reused rather than made per record: a callback lives
    until its report, so a new one per record (a closure was 4 objects) outlived the garbage
    collector's young generations and set off full collections of the whole heap, which took
    much of the target's CPU (BENCHMARKS.md, "Kafka: the target against confluent-kafka, and
    through the pipeline")."""

    __slots__ = ("batch", "free", "index")

    def __init__(self, free: list[_Report]) -> None:
        self.free = free
        self.batch: _Batch | None = None
        self.index = 0

    def __call__(self, error: KafkaError | None, _message: object) -> None:
        batch, index = self.batch, self.index
        self.release()
        if batch is not None:
            batch.report(index, error)

    def release(self) -> None:
        """Back to the free list (for a record that will have no report, or had it)."""
        self.batch = None
        if len(self.free) < _FREE_REPORTS:
            self.free.append(self)


class KafkaTarget:
    """Produces deliveries to one Kafka topic; see the module docstring."""

    def __init__(self, config: KafkaConfig, name: str | None = None) -> None:
        self.config = config
        self.name = name if name is not None else config.topic
        self._lock = threading.Lock()
        self._open = False
        self._producer: Producer | None = None
        self._fatal: str | None = None  # the producer's fatal error: it must be replaced
        self._free: list[_Report] = []  # delivery-report callbacks not in use

    def __repr__(self) -> str:
        return f"KafkaTarget({self.config!r}, name={self.name!r})"

    def open(self) -> None:
        with self._lock:
            self._open = True
        failure = self._ready()[1]
        if failure is not None:
            log.warning("Kafka %s: %s", self.name, failure.error)

    def publish(self, deliveries: Sequence[Delivery]) -> list[Result]:
        if not self._open:
            raise RuntimeError(f"Kafka target {self.name!r} is not open: call open() first")
        if not deliveries:
            return []
        producer, failure = self._ready()
        if failure is None and producer is not None:
            failure = self._check_brokers(producer)
        if failure is not None or producer is None:
            return [failure or Result(Outcome.RETRY, "no producer")] * len(deliveries)
        c = self.config
        deadline = time.monotonic() + c.timeout_s + _TIMER_SLACK_S
        batch = _Batch(len(deliveries), c)
        error: str | None = None
        try:
            for index, delivery in enumerate(deliveries):
                if not self._produce(producer, batch, index, delivery, deadline):
                    error = f"not sent: the producer's queue stayed full for {c.timeout_s:g}s"
                    break
            producer.flush(max(0.0, deadline - time.monotonic()))
        except (KafkaException, SystemError) as e:
            # A fatal error raises from flush; confluent-kafka may then serve more callbacks
            # with the exception set, which ends in SystemError. Either way the producer is
            # done (a new one takes the next batch), and what it did not report is `retry`.
            error = self._broken(producer, self._fatal or e)
        if error is None:
            error = f"not acknowledged within {c.timeout_s:g}s by {c.where}"
        failed = Result(Outcome.RETRY, error)
        return [r if r is not None else failed for r in batch.results]

    def close(self) -> None:
        with self._lock:
            producer, self._producer, self._open = self._producer, None, False
        if producer is not None:
            left = producer.flush(self.config.timeout_s)
            if left:
                log.warning("Kafka %s: %d records not delivered at close", self.name, left)

    # the producer ---------------------------------------------------------------------------

    def _ready(self) -> tuple[Producer | None, Result | None]:
        """The producer, made (after the guard checked the bootstrap servers) or replaced
        after a fatal error; or why there is none."""
        with self._lock:
            if self._producer is not None and self._fatal is None:
                return self._producer, None
            if self._producer is not None:
                log.warning("Kafka %s: a new producer after: %s", self.name, self._fatal)
                _discard(self._producer)
                self._producer, self._fatal = None, None
            guard = default_guard()
            try:
                for host, port in self.config.servers:
                    guard.check_address(host, port)
            except DestinationRefused as e:
                return None, Result(Outcome.PERMANENT, one_line(e))
            except OSError as e:
                return None, Result(Outcome.RETRY, f"cannot resolve a bootstrap server: {e}")
            config = self.config.producer_config(f"ripple-{self.name}")
            config["error_cb"] = self._on_error
            config["logger"] = logging.getLogger(f"{__name__}.librdkafka")
            self._producer = Producer(config)
            return self._producer, None

    def _check_brokers(self, producer: Producer) -> Result | None:
        """In production: every broker the cluster advertises must be one the guard allows."""
        guard = default_guard()
        if not guard.enforcing:
            return None
        c = self.config
        try:
            metadata = producer.list_topics(c.topic, timeout=c.timeout_s)
        except KafkaException as e:
            return Result(Outcome.RETRY, f"no metadata from {c.where}: {_text(e)}")
        for broker in metadata.brokers.values():
            try:
                guard.check_address(str(broker.host), int(broker.port))
            except DestinationRefused as e:
                error = f"broker {broker.id} that {c.where} advertises: {one_line(e)}"
                return Result(Outcome.PERMANENT, error)
            except OSError as e:
                error = f"cannot resolve broker {broker.host!r} that {c.where} advertises: {e}"
                return Result(Outcome.RETRY, error)
        return None

    def _produce(
        self, producer: Producer, batch: _Batch, index: int, delivery: Delivery, deadline: float
    ) -> bool:
        """Hand one record to the producer (waiting while its queue is full, until
        `deadline`); False if it could not be."""
        try:
            report = self._free.pop()
        except IndexError:
            report = _Report(self._free)
        report.batch, report.index = batch, index
        while True:
            try:
                producer.produce(
                    self.config.topic,
                    value=delivery.body,
                    key=record_key(delivery),
                    headers=headers(delivery),
                    on_delivery=report,
                )
            except BufferError:
                if time.monotonic() >= deadline:
                    report.release()
                    return False
                producer.poll(0.05)  # serves delivery reports, which frees the queue
                continue
            except KafkaException as e:
                report.release()  # not produced: no report will come
                error = e.args[0] if e.args else None
                if isinstance(error, KafkaError) and not error.fatal():
                    batch.report(index, error)  # this record only (e.g. too large)
                    return True
                raise
            return True

    def _broken(self, producer: Producer, error: object) -> str:
        """A fatal error: the producer is replaced at the next batch."""
        text = _text(error)
        with self._lock:
            if self._producer is producer:
                self._fatal = text
        return f"the producer failed ({text}); a new one takes the next batch: {self.config.where}"

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self._fatal = _text(error)
            log.warning("Kafka %s: fatal producer error: %s", self.name, self._fatal)
        else:
            log.debug("Kafka %s: %s", self.name, _text(error))


def _discard(producer: Producer) -> None:
    """Drop a producer after a fatal error: what it still holds is failed, not sent."""
    try:
        producer.purge()
        producer.poll(0)
    except KafkaException as e:
        log.debug("discarding a Kafka producer: %s", _text(e))


def _text(error: object) -> str:
    if isinstance(error, KafkaException) and error.args:
        error = error.args[0]
    if isinstance(error, KafkaError):
        return f"{error.name()}: {one_line(error.str())}"
    return one_line(error)


def _failure(error: KafkaError, config: KafkaConfig) -> Result:
    if error.code() == KafkaError._MSG_TIMED_OUT:
        text = f"not acknowledged within {config.timeout_s:g}s by {config.where}"
        return Result(Outcome.RETRY, f"{text} ({_text(error)})")
    outcome = Outcome.PERMANENT if error.code() in _PERMANENT else Outcome.RETRY
    return Result(outcome, f"{_text(error)} ({config.where})")


_ARGUMENTS = (
    "kafka-topic",
    "kafka-ack-level",
    "use-ssl",
    "verify-ssl",
    "ca-location",
    "sasl-mechanism",
    "mechanism",
    "user-name",
    "password",
    "timeout",
)


def from_arguments(name: str, endpoint: Endpoint, arguments: Mapping[str, str]) -> KafkaTarget:
    """A Kafka target named `name` (the topic, and the default Kafka topic) producing through
    `endpoint` (kafka://host[:port][,host[:port]…]), from string arguments: `kafka-topic`,
    `kafka-ack-level` (none | broker), `use-ssl`, `verify-ssl`, `ca-location`,
    `sasl-mechanism` (or Ceph's `mechanism`: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512),
    `user-name`, `password`, `timeout` (seconds). A wrong, missing or unknown argument, or
    credentials without TLS that the guard does not allow, raises `ValueError` naming it."""
    try:
        return KafkaTarget(_config(name, endpoint, arguments, default_guard()), name=name)
    except ValueError as e:
        raise ValueError(f"Kafka topic {name!r}: {e}") from None


def _config(
    name: str, endpoint: Endpoint, arguments: Mapping[str, str], guard: DestinationGuard
) -> KafkaConfig:
    if endpoint.scheme != "kafka" or not endpoint.servers:
        raise ValueError(f"endpoint {endpoint.redacted!r} is not kafka://host[:port][,…]")
    for arg in arguments:
        if arg not in _ARGUMENTS:
            raise ValueError(f"unknown argument {arg!r}; expected one of {', '.join(_ARGUMENTS)}")
    if "mechanism" in arguments and "sasl-mechanism" in arguments:
        raise ValueError("give 'sasl-mechanism' or 'mechanism', not both")
    topic = arguments.get("kafka-topic", name)
    if not _TOPIC.match(topic) or topic in (".", ".."):
        what = f"argument 'kafka-topic' {topic!r}" if "kafka-topic" in arguments else repr(topic)
        raise ValueError(
            f"{what} is not a Kafka topic name (1 to 249 of A-Z a-z 0-9 . _ -); "
            "set the argument 'kafka-topic'"
        )
    level = choice("kafka-ack-level", arguments.get("kafka-ack-level", "broker"), ACK_LEVELS)
    use_ssl = flag("use-ssl", arguments["use-ssl"]) if "use-ssl" in arguments else False
    tls_only = [a for a in ("verify-ssl", "ca-location") if a in arguments]
    if tls_only and not use_ssl:
        raise ValueError(f"argument {tls_only[0]!r} needs use-ssl=true")
    user, password = arguments.get("user-name"), arguments.get("password")
    if (user is None) != (password is None) or user == "":
        raise ValueError("arguments 'user-name' and 'password' go together (SASL)")
    mechanism_arg = "mechanism" if "mechanism" in arguments else "sasl-mechanism"
    mechanism = arguments.get(mechanism_arg)
    if mechanism is not None and user is None:
        raise ValueError(f"argument {mechanism_arg!r} needs 'user-name' and 'password'")
    if mechanism is not None:
        mechanism = choice(mechanism_arg, mechanism, MECHANISMS, fold=str.upper)
    if password is not None and not use_ssl and not guard.secrets_in_cleartext:
        raise ValueError(
            "argument 'password' without use-ssl=true would travel in cleartext; use TLS "
            "(or set topics.allow-secrets-in-cleartext to allow)"
        )
    return KafkaConfig(
        servers=endpoint.servers,
        topic=topic,
        ack_level="none" if level == "none" else "broker",
        use_ssl=use_ssl,
        verify_ssl=flag("verify-ssl", arguments["verify-ssl"])
        if "verify-ssl" in arguments
        else True,
        ca_location=arguments.get("ca-location") or None,
        sasl_mechanism=cast(Mechanism, mechanism) if mechanism else None,
        username=user,
        password=password,
        timeout_s=positive("timeout", arguments["timeout"]) if "timeout" in arguments else 10.0,
    )
