"""WebhookTarget against a real HTTP server on 127.0.0.1: wire format, outcomes, ordering,
bounded in-flight requests, and `from_arguments`.

The server records every request and answers what the test's `respond` function says: a
status code, "close" (drop the connection without answering) or "hold" (wait until the test
releases it). Tests wait for conditions with deadlines, never for fixed times.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import socket
import threading
from collections.abc import Callable, Iterator

import orjson
import pytest

from ripple.targets.base import OK, Outcome, Result
from ripple.targets.webhook import WebhookConfig, WebhookTarget, from_arguments
from tests.targets.conftest import delivery
from tests.targets.webhook_server import Action, HookServer, Request
from tests.waiting import wait_for

MakeTarget = Callable[..., WebhookTarget]


@pytest.fixture
def target_for(server: HookServer) -> Iterator[MakeTarget]:
    """Opened targets posting to `server.url` (or `url`), closed at the end."""
    opened: list[WebhookTarget] = []

    def make(url: str | None = None, **options: object) -> WebhookTarget:
        target = WebhookTarget(WebhookConfig(url=url or server.url, **options))  # type: ignore[arg-type]
        target.open()
        opened.append(target)
        return target

    yield make
    server.closing.set()
    for target in opened:
        target.close()


def test_s3_envelope_posts_the_body_and_headers(server: HookServer, target_for: MakeTarget) -> None:
    d = delivery("2026/cat.jpg")
    target = target_for(headers={"X-Tenant": "acme"})

    assert target.publish([d]) == [OK]

    (request,) = server.requests
    assert request.path == "/hook"
    assert request.body == d.body
    assert orjson.loads(request.body)["Records"][0]["s3"]["object"]["key"] == "2026/cat.jpg"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-ripple-event-id"] == d.event_id
    assert request.headers["x-tenant"] == "acme"
    assert "authorization" not in request.headers
    assert "x-ripple-signature" not in request.headers


def test_signature_is_hmac_sha256_of_the_exact_body(
    server: HookServer, target_for: MakeTarget
) -> None:
    d = delivery()
    target_for(secret="s3cr3t").publish([d])

    (request,) = server.requests
    expected = hmac.new(b"s3cr3t", request.body, hashlib.sha256).hexdigest()
    assert request.headers["x-ripple-signature"] == f"sha256={expected}"
    assert request.body == d.body


def test_bearer_token(server: HookServer, target_for: MakeTarget) -> None:
    target_for(bearer_token="tok-123").publish([delivery()])

    assert server.requests[0].headers["authorization"] == "Bearer tok-123"


def test_pubsub_push_envelope_decodes_back_to_the_delivery(
    server: HookServer, target_for: MakeTarget
) -> None:
    d = delivery("a b/ü.txt", n=3)
    target = target_for(
        envelope="pubsub-push", subscription="projects/p/subscriptions/s", secret="k"
    )

    assert [r.outcome for r in target.publish([d])] == [Outcome.OK]

    (request,) = server.requests
    envelope = orjson.loads(request.body)
    message = envelope["message"]
    assert envelope["subscription"] == "projects/p/subscriptions/s"
    assert base64.b64decode(message["data"]) == d.body
    assert message["attributes"] == dict(d.attributes)
    assert message["messageId"] == message["message_id"] == d.event_id
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", message["publishTime"])
    assert message["publish_time"] == message["publishTime"]
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-ripple-event-id"] == d.event_id
    signature = hmac.new(b"k", request.body, hashlib.sha256).hexdigest()
    assert request.headers["x-ripple-signature"] == f"sha256={signature}"


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, Outcome.OK),
        (202, Outcome.OK),
        (204, Outcome.OK),
        (302, Outcome.RETRY),
        (400, Outcome.PERMANENT),
        (403, Outcome.PERMANENT),
        (404, Outcome.PERMANENT),
        (408, Outcome.RETRY),
        (429, Outcome.RETRY),
        (500, Outcome.RETRY),
        (503, Outcome.RETRY),
    ],
)
def test_status_outcomes(
    server: HookServer, target_for: MakeTarget, status: int, outcome: Outcome
) -> None:
    server.respond = lambda request: status

    (result,) = target_for().publish([delivery()])

    assert result.outcome is outcome
    if outcome is Outcome.OK:
        assert result.error is None
    else:
        assert result.error == f"HTTP {status} from {server.url}"


def test_connection_refused_is_retry(target_for: MakeTarget) -> None:
    with socket.socket() as bound:  # bound but not listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{bound.getsockname()[1]}/hook"

        (result,) = target_for(url=url).publish([delivery()])

    assert result.outcome is Outcome.RETRY
    assert result.error == f"connection refused: {url}"


def test_timeout_is_retry(server: HookServer, target_for: MakeTarget) -> None:
    server.respond = lambda request: "hold"

    (result,) = target_for(timeout_s=0.2).publish([delivery()])

    assert result.outcome is Outcome.RETRY
    assert result.error == f"timed out after 0.2s: {server.url}"


def test_connection_closed_without_answer_is_retry(
    server: HookServer, target_for: MakeTarget
) -> None:
    server.respond = lambda request: "close"

    (result,) = target_for().publish([delivery()])

    assert result.outcome is Outcome.RETRY
    assert result.error == (
        f"connection to {server.url} broken: Server disconnected without sending a response."
    )


STATUSES = [200, 404, 503, 429, 201, 408, 500, 410, 204, 400]
EXPECTED = {
    200: Outcome.OK,
    201: Outcome.OK,
    204: Outcome.OK,
    404: Outcome.PERMANENT,
    410: Outcome.PERMANENT,
    400: Outcome.PERMANENT,
    503: Outcome.RETRY,
    429: Outcome.RETRY,
    408: Outcome.RETRY,
    500: Outcome.RETRY,
}


def test_results_come_back_in_input_order(server: HookServer, target_for: MakeTarget) -> None:
    deliveries = [delivery(f"k/{n}", n=n) for n in range(50)]

    def respond(request: Request) -> Action:
        n = int(request.headers["x-ripple-event-id"].rsplit("-", 1)[1])
        if n < 3:  # the first ones answer last
            wait_for(lambda: len(server.requests) >= 45)
        return STATUSES[n % len(STATUSES)]

    server.respond = respond

    results = target_for(max_in_flight=8).publish(deliveries)

    assert [r.outcome for r in results] == [EXPECTED[STATUSES[n % 10]] for n in range(50)]
    assert len(server.requests) == 50
    assert {r.headers["x-ripple-event-id"] for r in server.requests} == {
        d.event_id for d in deliveries
    }


def test_at_most_max_in_flight_requests(server: HookServer, target_for: MakeTarget) -> None:
    server.respond = lambda request: "hold"
    target = target_for(max_in_flight=3)
    results: list[Result] = []

    def publish() -> None:
        results.extend(target.publish([delivery(n=n) for n in range(10)]))

    publisher = threading.Thread(target=publish)
    publisher.start()

    for released in range(10):
        held = min(3, 10 - released)
        wait_for(lambda: server.in_flight >= held)  # noqa: B023 (called at once)
        assert server.most_in_flight <= 3
        server.gate.release()
    publisher.join(10)

    assert not publisher.is_alive()
    assert server.most_in_flight == 3
    assert len(server.requests) == 10
    assert [r.outcome for r in results] == [Outcome.OK] * 10


def test_one_client_is_reused_across_batches(server: HookServer, target_for: MakeTarget) -> None:
    target = target_for(max_in_flight=2)
    client = target._client

    for n in range(3):
        assert target.publish([delivery(n=n), delivery(n=n + 10)])[0].ok

    assert target._client is client
    assert len(server.requests) == 6


def test_publish_before_open_is_a_bug(server: HookServer) -> None:
    with pytest.raises(RuntimeError, match="open"):
        WebhookTarget(WebhookConfig(url=server.url)).publish([delivery()])


def test_from_arguments() -> None:
    target = from_arguments(
        "hooks",
        "https://example.invalid/hook",
        {
            "verify-ssl": "false",
            "timeout": "2.5",
            "bearer-token": "tok",
            "secret": "shh",
            "header.X-Tenant": "acme",
            "header.X-Env": "test",
            "max-in-flight": "4",
            "envelope": "pubsub-push",
            "subscription": "projects/p/subscriptions/s",
        },
    )

    assert target.name == "hooks"
    assert target.config == WebhookConfig(
        url="https://example.invalid/hook",
        headers={"X-Tenant": "acme", "X-Env": "test"},
        bearer_token="tok",
        secret="shh",
        verify_ssl=False,
        timeout_s=2.5,
        max_in_flight=4,
        envelope="pubsub-push",
        subscription="projects/p/subscriptions/s",
    )


def test_from_arguments_defaults() -> None:
    target = from_arguments("h", "http://127.0.0.1:1/hook", {})

    assert target.config == WebhookConfig(url="http://127.0.0.1:1/hook")
    assert target.config.verify_ssl is True
    assert target.config.timeout_s == 5.0
    assert target.config.max_in_flight == 16
    assert target.config.envelope == "s3"


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"verify-ssl": "maybe"}, "'verify-ssl'"),
        ({"timeout": "soon"}, "'timeout'"),
        ({"timeout": "0"}, "'timeout'"),
        ({"timeout": "-1"}, "'timeout'"),
        ({"timeout": "nan"}, "'timeout'"),
        ({"max-in-flight": "0"}, "'max-in-flight'"),
        ({"max-in-flight": "2.5"}, "'max-in-flight'"),
        ({"max-in-flight": "many"}, "'max-in-flight'"),
        ({"envelope": "sns"}, "'envelope'"),
        ({"header.Bad Name": "x"}, "'header.Bad Name'"),
        ({"bearer-token": ""}, "'bearer-token'"),
        ({"secret": ""}, "'secret'"),
        ({"header.X-A": "one\r\nX-B: two"}, "'header.X-A'"),
        ({"bearer-token": "t\nX-B: two"}, "'bearer-token'"),
        ({"retries": "3"}, "'retries'"),
    ],
)
def test_from_arguments_errors_name_the_argument(arguments: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=re.escape(named)) as raised:
        from_arguments("h", "http://127.0.0.1:1/hook", arguments)

    assert str(raised.value).startswith("webhook 'h': ")

    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "127.0.0.1:8080/hook", "http:///hook"])
def test_from_arguments_rejects_a_bad_url(url: str) -> None:
    with pytest.raises(ValueError, match=r"webhook 'h': url .* must be an absolute http"):
        from_arguments("h", url, {})
