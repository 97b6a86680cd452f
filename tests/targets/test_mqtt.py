"""MqttTarget against the real Mosquitto on 127.0.0.1:1883, and a private Mosquitto this
module starts for what the shared one cannot show (passwords, TLS, a stalled broker).

What arrived is read by an independent paho client subscribed at QoS 1 and compared byte for
byte with each delivery's body. Two tests stop and restart the shared broker with its own
command (`mosquitto -d -c /etc/mosquitto/mosquitto.conf`), waiting for conditions, never for
fixed times; a fixture starts it again whatever happens. Without Mosquitto the tests skip,
or fail when `CI` is set.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import paho.mqtt.client as paho
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from paho.mqtt.enums import CallbackAPIVersion
from prometheus_client import REGISTRY

from ripple.metabase import Metabase
from ripple.notifications.endpoints import parse_endpoint
from ripple.pipeline import metrics
from ripple.pipeline.deliver import Deliverer
from ripple.pipeline.queue import RetryQueue
from ripple.targets.base import OK, Delivery, Outcome, Result
from ripple.targets.mqtt import MqttTarget, from_arguments
from ripple.targets.retry import RetryPolicy
from tests.conftest import service_missing
from tests.ports import free_port
from tests.targets.conftest import delivery
from tests.waiting import wait_for

HOST, PORT = "127.0.0.1", 1883
CONF = "/etc/mosquitto/mosquitto.conf"
PID_FILE = Path("/run/mosquitto/mosquitto.pid")

MakeTarget = Callable[..., MqttTarget]


def fresh(prefix: str = "ripple-test") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def accepting(port: int = PORT) -> bool:
    try:
        socket.create_connection((HOST, port), timeout=0.5).close()
    except OSError:
        return False
    return True


def batch(n: int, start: int = 0) -> list[Delivery]:
    return [delivery(f"2026/photo-{i}.jpg", n=i) for i in range(start, start + n)]


# the independent subscriber ------------------------------------------------------------


class Subscriber:
    """A paho client subscribed at QoS 1 to `topic`, recording every payload in order.

    `persistent`: a fixed client id and clean_session=False, so the broker keeps the session
    (and queues messages for it) while it is away; `sessions` records, per connection,
    whether the broker still had it."""

    def __init__(
        self,
        topic: str,
        *,
        port: int = PORT,
        persistent: bool = False,
        ca_file: str | None = None,
        username: str | None = None,
        password: str | None = None,
    ) -> None:
        self.topic = topic
        self.client_id = fresh("ripple-test-sub")
        self.persistent = persistent
        self.port = port
        self.messages: list[tuple[str, bytes]] = []
        self.sessions: list[bool] = []
        self._lock = threading.Lock()
        self._subscribed = threading.Event()
        client = paho.Client(
            CallbackAPIVersion.VERSION2, client_id=self.client_id, clean_session=not persistent
        )
        if ca_file:
            client.tls_set(ca_certs=ca_file)
        if username:
            client.username_pw_set(username, password)
        client.reconnect_delay_set(1, 1)
        client.on_connect = self._on_connect
        client.on_subscribe = lambda *_: self._subscribed.set()
        client.on_message = self._on_message
        client.connect(HOST, port)
        client.loop_start()
        self.client = client
        if not self._subscribed.wait(10):
            raise AssertionError(f"no SUBACK for {topic!r}")

    def _on_connect(
        self, client: paho.Client, _u: object, flags: paho.ConnectFlags, *_: object
    ) -> None:
        with self._lock:
            self.sessions.append(flags.session_present)
        if not flags.session_present:
            client.subscribe(self.topic, qos=1)

    def _on_message(self, _c: paho.Client, _u: object, message: paho.MQTTMessage) -> None:
        with self._lock:
            self.messages.append((message.topic, bytes(message.payload)))

    def payloads(self) -> list[bytes]:
        with self._lock:
            return [payload for _, payload in self.messages]

    def wait_count(self, n: int, timeout: float = 20.0) -> list[bytes]:
        wait_for(lambda: len(self.payloads()) >= n, f"{n} messages arrived", timeout)
        return self.payloads()

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()
        if self.persistent:  # connect once with a clean session: the broker forgets this one
            wipe = paho.Client(CallbackAPIVersion.VERSION2, client_id=self.client_id)
            try:
                wipe.connect(HOST, self.port)
                wipe.loop_start()
                wait_for(wipe.is_connected, "the subscriber's session is wiped", 10)
                wipe.disconnect()
                wipe.loop_stop()
            except OSError:
                pass


# the shared broker and its restarts --------------------------------------------------


class Mosquitto:
    """Stops and starts the shared broker with its own command."""

    def stop(self) -> None:
        try:
            pid = int(PID_FILE.read_text().strip())
        except (OSError, ValueError) as e:
            raise AssertionError(f"cannot read Mosquitto's pid from {PID_FILE}: {e}") from None
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not _alive(pid), "Mosquitto has exited (its session store saved)")
        wait_for(lambda: not accepting(), "port 1883 is closed")

    def start(self) -> None:
        subprocess.run(["mosquitto", "-d", "-c", CONF], check=True, timeout=20)
        wait_for(accepting, "Mosquitto accepts connections again")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def broker() -> None:
    if not accepting():
        service_missing("Mosquitto", f"nothing accepts connections on {HOST}:{PORT}")


@pytest.fixture
def mosquitto(broker: None) -> Iterator[Mosquitto]:
    """Control of the shared broker; it is running again when the test ends, whatever
    happened."""
    if shutil.which("mosquitto") is None:
        service_missing("Mosquitto", "the mosquitto command is not on PATH")
    control = Mosquitto()
    try:
        yield control
    finally:
        if not accepting():
            control.start()


@pytest.fixture
def subscribe() -> Iterator[Callable[..., Subscriber]]:
    made: list[Subscriber] = []

    def make(topic: str, **options: object) -> Subscriber:
        subscriber = Subscriber(topic, **options)  # type: ignore[arg-type]
        made.append(subscriber)
        return subscriber

    yield make
    for subscriber in made:
        subscriber.close()


@pytest.fixture
def target_for() -> Iterator[MakeTarget]:
    """Opened targets built by `from_arguments`, closed at the end."""
    opened: list[MqttTarget] = []

    def make(name: str, uri: str = f"mqtt://{HOST}:{PORT}", **arguments: str) -> MqttTarget:
        target = from_arguments(name, parse_endpoint(uri), arguments)
        target.open()
        opened.append(target)
        return target

    yield make
    for target in opened:
        target.close()


# publishing ----------------------------------------------------------------------------


@pytest.mark.parametrize("qos", ["0", "1"])
def test_a_batch_arrives_byte_for_byte_and_in_order(
    broker: None, subscribe: Callable[..., Subscriber], target_for: MakeTarget, qos: str
) -> None:
    topic = f"{fresh()}/s3/events"
    subscriber = subscribe(topic)
    target = target_for(fresh(), **{"mqtt-topic": topic, "mqtt-qos": qos})
    deliveries = batch(500)

    assert target.publish(deliveries) == [OK] * 500

    assert subscriber.wait_count(500) == [d.body for d in deliveries]
    assert {t for t, _ in subscriber.messages} == {topic}
    assert target.publish([]) == []


def test_the_topic_defaults_to_the_topic_name(
    broker: None, subscribe: Callable[..., Subscriber], target_for: MakeTarget
) -> None:
    name = f"projects/p/topics/{fresh()}"  # slashes are fine in MQTT
    subscriber = subscribe(name)
    target = target_for(name)
    d = delivery("a b/ü.txt")

    assert target.name == name
    assert target.publish([d]) == [OK]
    assert subscriber.wait_count(1) == [d.body]


def test_more_deliveries_than_max_in_flight_all_arrive_in_order(
    broker: None, subscribe: Callable[..., Subscriber], target_for: MakeTarget
) -> None:
    topic = fresh()
    subscriber = subscribe(topic)
    target = target_for(topic, **{"max-in-flight": "7"})
    first, second = batch(300), batch(200, start=300)

    assert target.publish(first) == [OK] * 300
    assert target.publish(second) == [OK] * 200  # the same connection, a second batch

    assert subscriber.wait_count(500) == [d.body for d in first + second]


def test_each_target_has_its_own_client_id(broker: None, target_for: MakeTarget) -> None:
    a, b = (
        target_for("orders/in+out", **{"mqtt-topic": "orders"}),
        target_for("orders/in+out", **{"mqtt-topic": "orders"}),
    )

    assert a.client_id != b.client_id
    assert a.client_id.startswith("ripple-orders_in_out-")
    assert len(a.client_id) == len("ripple-orders_in_out-") + 8


def test_a_broker_that_is_not_there_answers_retry_at_once(target_for: MakeTarget) -> None:
    started = time.monotonic()
    target = target_for(fresh(), f"mqtt://{HOST}:{free_port()}", timeout="2")
    opened = time.monotonic()
    results = target.publish(batch(3))

    assert opened - started < 3  # open() gave up waiting, it did not fail
    assert time.monotonic() - opened < 1
    assert [r.outcome for r in results] == [Outcome.RETRY] * 3
    assert results[0].error is not None
    assert results[0].error.startswith(f"not connected to mqtt://{HOST}:")


def test_an_unreadable_ca_file_fails_open() -> None:
    target = from_arguments(
        "t", parse_endpoint("mqtts://127.0.0.1"), {"ca-file": "/nonexistent/ca.pem"}
    )
    with pytest.raises(ValueError, match=r"^MQTT target 't': ca-file '/nonexistent/ca.pem': "):
        target.open()


def test_publish_before_open_is_a_bug_and_close_is_idempotent() -> None:
    target = from_arguments("t", parse_endpoint("mqtt://127.0.0.1"), {})
    with pytest.raises(RuntimeError, match="not open"):
        target.publish([delivery()])
    target.close()
    target.close()


# restarts ------------------------------------------------------------------------------


def test_the_target_reconnects_by_itself_after_mosquitto_restarts(
    mosquitto: Mosquitto, subscribe: Callable[..., Subscriber], target_for: MakeTarget
) -> None:
    topic = fresh()
    target = target_for(topic, timeout="2")
    before = subscribe(topic)
    assert target.publish(batch(5)) == [OK] * 5
    before.wait_count(5)

    mosquitto.stop()
    started = time.monotonic()
    down = target.publish(batch(5, start=5))
    assert time.monotonic() - started < 2 + 1  # never longer than the timeout, and a bit
    assert [r.outcome for r in down] == [Outcome.RETRY] * 5

    mosquitto.start()
    after = subscribe(topic)  # a fresh subscription: only what is published from now on
    last = batch(5, start=10)
    wait_for(lambda: target.publish(last) == [OK] * 5, "a publish succeeds after the restart")
    payloads = after.wait_count(5)
    assert set(payloads) == {d.body for d in last}  # a failed try may have got some through
    assert payloads[-5:] == [d.body for d in last]


def _push_fail(name: str) -> float:
    return REGISTRY.get_sample_value("ripple_push_fail_total", {"destination": name}) or 0.0


def test_delivery_through_a_restart_loses_nothing(
    db: Metabase,
    mosquitto: Mosquitto,
    subscribe: Callable[..., Subscriber],
    target_for: MakeTarget,
) -> None:
    """The subscriber keeps a persistent session (the shared broker persists sessions across
    restarts: `persistence true`; the test checks it did), so everything the broker accepted
    reaches it, even what it accepted while the subscriber was reconnecting: so 'every
    event arrived at least once' is sound."""
    name = fresh()
    subscriber = subscribe(name, persistent=True)
    target = target_for(name, timeout="2")
    queue = RetryQueue(db.writer)
    deliverer = Deliverer(
        {name: [target]}, queue, default_policy=RetryPolicy(base_delay_s=0.01, max_delay_s=0.2)
    )
    events = batch(600)
    batches = [events[i : i + 20] for i in range(0, 600, 20)]
    stopped, restarted = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    fails_before = _push_fail(name)

    def deliver() -> None:
        try:
            for i, b in enumerate(batches):
                if i == 10:
                    stopped.wait(30)  # batches 10-19 while the broker is down
                if i == 20:
                    restarted.wait(30)  # batches 20-29 after it is back
                deliverer.deliver({name: b})
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=deliver, name="deliver")
    thread.start()
    try:
        subscriber.wait_count(100)  # delivery is under way (batches 5-9 may be in flight)
        mosquitto.stop()
        stopped.set()
        wait_for(lambda: _push_fail(name) > fails_before, "a push failed")
        mosquitto.start()
        restarted.set()
    finally:
        stopped.set()
        restarted.set()
        thread.join(60)
    assert not thread.is_alive()
    assert errors == []
    assert queue.length(name) > 0  # what failed was queued, then drained below

    def drained() -> bool:
        deliverer.drain(now_ns=time.time_ns() + 10**10)
        return queue.length(name) == 0

    wait_for(drained, "the retry queue is empty", 60)
    body_of = {d.body: d.event_id for d in events}
    wait_for(
        lambda: {body_of.get(p) for p in subscriber.payloads()} >= set(body_of.values()),
        "every event arrived at least once",
        30,
    )
    payloads = subscriber.payloads()
    assert all(p in body_of for p in payloads)  # nothing but the exact bodies
    assert subscriber.sessions[0] is False
    assert all(subscriber.sessions[1:]), "the broker lost the subscriber's session"
    assert len(subscriber.sessions) >= 2  # it did reconnect
    assert _push_fail(name) > fails_before
    assert queue.length(name) == 0
    assert metrics.RETRY_QUEUE_LENGTH.labels(name)._value.get() == 0
    deliverer.close()


# a private broker: passwords, TLS, a stall ---------------------------------------------


class PrivateBroker:
    """A Mosquitto of this module's own: `plain` needs alice / wonderland; `tls` is anonymous,
    with a self-signed certificate for 127.0.0.1 (`ca_file`). It can be paused and killed."""

    def __init__(self, conf: Path, plain: int, tls: int, ca_file: str) -> None:
        self.conf, self.plain, self.tls, self.ca_file = conf, plain, tls, ca_file
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(["mosquitto", "-c", str(self.conf)])
        wait_for(
            lambda: accepting(self.plain) and accepting(self.tls), "the private Mosquitto is up"
        )

    def signal(self, number: int) -> None:
        assert self.process is not None
        self.process.send_signal(number)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()  # SIGKILL ends a paused process too, without letting it run first
            process.wait(10)

    def ensure_running(self) -> None:
        if self.process is None:
            self.start()
        else:
            self.process.send_signal(signal.SIGCONT)


@pytest.fixture(scope="module")
def private_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateBroker]:
    if shutil.which("mosquitto") is None or shutil.which("mosquitto_passwd") is None:
        service_missing("Mosquitto", "the mosquitto and mosquitto_passwd commands are needed")
    tmp = tmp_path_factory.mktemp("mosquitto")
    cert, key = _self_signed_certificate(tmp)
    passwords = tmp / "passwords"
    subprocess.run(
        ["mosquitto_passwd", "-b", "-c", str(passwords), "alice", "wonderland"],
        check=True,
        capture_output=True,
        timeout=20,
    )
    plain, tls = free_port(), free_port()
    conf = tmp / "mosquitto.conf"
    conf.write_text(
        "user root\nper_listener_settings true\npersistence false\nlog_dest none\n"
        f"listener {plain} {HOST}\nallow_anonymous false\npassword_file {passwords}\n"
        f"listener {tls} {HOST}\nallow_anonymous true\ncertfile {cert}\nkeyfile {key}\n"
    )
    broker = PrivateBroker(conf, plain, tls, str(cert))
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def private(private_broker: PrivateBroker) -> Iterator[PrivateBroker]:
    """The private broker, running (and not paused) when the test starts and ends."""
    private_broker.ensure_running()
    try:
        yield private_broker
    finally:
        private_broker.ensure_running()


def _self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(HOST))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def test_username_and_password_come_from_the_endpoint(
    private: PrivateBroker, subscribe: Callable[..., Subscriber], target_for: MakeTarget
) -> None:
    topic = fresh()
    subscriber = subscribe(topic, port=private.plain, username="alice", password="wonderland")
    target = target_for(topic, f"mqtt://alice:wonderland@{HOST}:{private.plain}")
    deliveries = batch(3)

    assert target.publish(deliveries) == [OK] * 3
    assert subscriber.wait_count(3) == [d.body for d in deliveries]


def test_a_refused_password_is_permanent(private: PrivateBroker, target_for: MakeTarget) -> None:
    target = target_for(fresh(), f"mqtt://alice:wrong@{HOST}:{private.plain}", timeout="2")
    results = target.publish(batch(2))

    assert [r.outcome for r in results] == [Outcome.PERMANENT] * 2
    assert results[0].error == f"mqtt://{HOST}:{private.plain} refused us: Not authorized"


def test_tls_with_the_brokers_certificate(
    private: PrivateBroker, subscribe: Callable[..., Subscriber], target_for: MakeTarget
) -> None:
    topic = fresh()
    subscriber = subscribe(topic, port=private.tls, ca_file=private.ca_file)
    uri = f"mqtts://{HOST}:{private.tls}"
    trusted = target_for(topic, uri, **{"ca-file": private.ca_file})
    unverified = target_for(topic, uri, **{"verify-ssl": "false"})
    verified = target_for(topic, uri, timeout="2")  # the system's CAs do not know it
    first, second = batch(2), batch(2, start=2)

    assert trusted.publish(first) == [OK] * 2
    assert unverified.publish(second) == [OK] * 2
    assert [r.outcome for r in verified.publish(batch(1, start=4))] == [Outcome.RETRY]
    assert subscriber.wait_count(4) == [d.body for d in first + second]


def test_a_stalled_broker_answers_retry_within_the_timeout(
    private: PrivateBroker, subscribe: Callable[..., Subscriber], target_for: MakeTarget
) -> None:
    topic = fresh()
    uri = f"mqtt://alice:wonderland@{HOST}:{private.plain}"
    subscriber = subscribe(topic, port=private.plain, username="alice", password="wonderland")
    target = target_for(topic, uri, timeout="1")
    private.signal(signal.SIGSTOP)  # connected, but nobody answers
    try:
        started = time.monotonic()
        results = target.publish(batch(10))
        elapsed = time.monotonic() - started
    finally:
        private.signal(signal.SIGCONT)

    assert [r.outcome for r in results] == [Outcome.RETRY] * 10
    assert results[0].error == f"not acknowledged within 1s by mqtt://{HOST}:{private.plain}"
    assert 1 <= elapsed < 1 + 1
    last = batch(3, start=10)
    assert target.publish(last) == [OK] * 3  # the same connection, once the broker answers
    assert subscriber.wait_count(13)[-3:] == [d.body for d in last]


def unread_by_broker(port: int) -> int:
    """Bytes that arrived on the broker's established connections on `port`, unread."""
    unread = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port, state = int(fields[1].split(":")[1], 16), fields[3]
        if local_port == port and state == "01":  # ESTABLISHED
            unread += int(fields[4].split(":")[1], 16)
    return unread


def test_a_connection_lost_mid_batch_answers_retry_at_once_and_comes_back(
    private: PrivateBroker, target_for: MakeTarget
) -> None:
    topic = fresh()
    target = target_for(
        topic,
        f"mqtt://alice:wonderland@{HOST}:{private.plain}",
        timeout="10",
        **{"max-in-flight": "5"},
    )
    results: list[list[Result]] = []
    private.signal(signal.SIGSTOP)  # what is sent now waits for its PUBACK
    thread = threading.Thread(target=lambda: results.append(target.publish(batch(50))))
    thread.start()
    try:
        wait_for(lambda: unread_by_broker(private.plain) > 0, "messages are in flight")
    finally:
        private.stop()  # the connection drops with 5 messages in flight
        killed = time.monotonic()
        thread.join(15)
    answered = time.monotonic() - killed

    assert answered < 2  # not the 10 s timeout
    (answers,) = results
    assert [r.outcome for r in answers] == [Outcome.RETRY] * 50
    assert (
        answers[0].error
        == f"connection to mqtt://{HOST}:{private.plain} lost before the acknowledgement"
    )
    assert answers[-1].error is not None
    assert answers[-1].error.startswith(f"not connected to mqtt://{HOST}:{private.plain}: ")

    private.start()
    wait_for(lambda: target.publish(batch(1)) == [OK], "the target is connected again")


# arguments -----------------------------------------------------------------------------


def test_from_arguments() -> None:
    target = from_arguments(
        "photos",
        parse_endpoint("mqtts://bob:pw@broker.example:8884"),
        {
            "mqtt-topic": "s3/photos",
            "mqtt-qos": "0",
            "max-in-flight": "50",
            "timeout": "2.5",
            "verify-ssl": "false",
            "ca-file": "/etc/ssl/broker.pem",
        },
    )
    c = target.config
    assert target.name == "photos"
    assert (c.host, c.port, c.tls, c.username, c.password) == (
        "broker.example",
        8884,
        True,
        "bob",
        "pw",
    )
    assert (c.topic, c.qos, c.max_in_flight, c.timeout_s) == ("s3/photos", 0, 50, 2.5)
    assert (c.verify_ssl, c.ca_file) == (False, "/etc/ssl/broker.pem")


def test_from_arguments_defaults() -> None:
    target = from_arguments("photos/new", parse_endpoint("mqtt://127.0.0.1"), {})
    c = target.config
    assert (c.host, c.port, c.tls, c.username, c.password) == ("127.0.0.1", 1883, False, None, None)
    assert (c.topic, c.qos, c.max_in_flight, c.timeout_s) == ("photos/new", 1, 1000, 5.0)
    assert (c.verify_ssl, c.ca_file) == (True, None)


@pytest.mark.parametrize(
    ("name", "uri", "arguments", "message"),
    [
        (
            "t",
            "mqtt://h",
            {"mqtt-qos": "2"},
            "'mqtt-qos' must be 0 or 1 (only QoS 0 and 1 are supported)",
        ),
        ("t", "mqtt://h", {"mqtt-qos": "one"}, "'mqtt-qos' must be 0 or 1"),
        (
            "t",
            "mqtt://h",
            {"mqtt-topic": "s3/+/events"},
            "argument 'mqtt-topic': MQTT topic 's3/+/events' has the MQTT wildcard",
        ),
        ("t", "mqtt://h", {"mqtt-topic": "s3/#"}, "has the MQTT wildcard + or #"),
        ("t", "mqtt://h", {"mqtt-topic": ""}, "MQTT topic '' is empty"),
        ("t", "mqtt://h", {"mqtt-topic": "$SYS/x"}, "reserved for the broker"),
        ("t", "mqtt://h", {"mqtt-topic": "a\0b"}, "has a NUL character"),
        (
            "photos#1",
            "mqtt://h",
            {},
            "the name cannot be the MQTT topic: it has the MQTT wildcard + or #, which a publish "
            "cannot use; give one with the mqtt-topic argument",
        ),
        (
            "t",
            "mqtt://h",
            {"qos": "1"},
            "unknown argument 'qos'; expected one of mqtt-topic, mqtt-qos",
        ),
        (
            "t",
            "mqtt://h",
            {"max-in-flight": "0"},
            "'max-in-flight' must be a whole number above zero",
        ),
        ("t", "mqtt://h", {"max-in-flight": "1.5"}, "'max-in-flight' must be a whole number"),
        ("t", "mqtt://h", {"max-in-flight": "70000"}, "'max-in-flight' must be at most 65535"),
        ("t", "mqtt://h", {"timeout": "-1"}, "'timeout' must be a number of seconds above zero"),
        ("t", "mqtts://h", {"verify-ssl": "maybe"}, "'verify-ssl' must be true or false"),
        ("t", "mqtt://h", {"verify-ssl": "false"}, "'verify-ssl' needs an mqtts:// endpoint"),
        ("t", "mqtt://h", {"ca-file": "/ca.pem"}, "'ca-file' needs an mqtts:// endpoint"),
        ("t", "mqtts://h", {"ca-file": ""}, "'ca-file' must not be empty"),
        ("t", "mqtt://:pw@h", {}, "a password needs a username"),
        ("t", "nats://h", {}, "is not mqtt:// or mqtts://"),
    ],
)
def test_from_arguments_errors_name_the_topic_and_the_argument(
    name: str, uri: str, arguments: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=r"^MQTT target ") as caught:
        from_arguments(name, parse_endpoint(uri), arguments)
    text = str(caught.value)
    assert "\n" not in text
    assert text.startswith(f"MQTT target {name!r}: ")
    assert message in text
