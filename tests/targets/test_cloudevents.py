"""Webhooks with `cloudevents=true`: CloudEvents 1.0 in HTTP binary mode, checked by
parsing what a real HTTP server received with the `cloudevents` SDK."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from cloudevents.http import from_http

from ripple.targets.base import OK
from ripple.targets.cloudevents import binary_headers
from ripple.targets.webhook import from_arguments
from tests.targets.conftest import delivery
from tests.targets.webhook_server import HookServer


def test_binary_mode_parses_as_a_cloudevent(server: HookServer) -> None:
    d = delivery("2026/red flower.jpg")
    target = from_arguments("photos", server.url, {"cloudevents": "true"})
    target.open()
    try:
        assert target.publish([d]) == [OK]
    finally:
        target.close()
    (request,) = server.requests
    event: Any = from_http(request.headers, request.body)
    record = d.event
    response = record["responseElements"]
    assert event["specversion"] == "1.0"
    assert event["id"] == f"{response['x-amz-request-id']}.{response['x-amz-id-2']}"
    bucket = record["s3"]["bucket"]["name"]
    assert event["source"] == f"{record['eventSource']}.{record['awsRegion']}.{bucket}"
    assert event["type"] == f"com.amazonaws.{record['eventName']}"
    assert event["subject"] == record["s3"]["object"]["key"]
    assert event["time"] == record["eventTime"]
    assert request.headers["content-type"] == "application/json"
    # the data is the S3 event message itself, byte for byte
    assert request.body == d.body
    assert orjson.loads(request.body) == event.get_data()
    assert request.headers["x-ripple-event-id"] == d.event_id


def test_without_the_argument_no_ce_headers_are_sent(server: HookServer) -> None:
    target = from_arguments("photos", server.url, {})
    target.open()
    try:
        assert target.publish([delivery()]) == [OK]
    finally:
        target.close()
    (request,) = server.requests
    assert not [h for h in request.headers if h.startswith("ce-")]


def test_an_event_without_a_request_id_uses_the_event_id() -> None:
    headers = binary_headers({"eventName": "LifecycleExpiration:Delete"}, "evt-1")
    assert headers["ce-id"] == "evt-1"


def test_cloudevents_needs_the_s3_envelope() -> None:
    with pytest.raises(ValueError, match="cloudevents needs envelope s3"):
        from_arguments(
            "t", "http://127.0.0.1:1/", {"cloudevents": "true", "envelope": "pubsub-push"}
        )
    with pytest.raises(ValueError, match="'cloudevents' must be true or false"):
        from_arguments("t", "http://127.0.0.1:1/", {"cloudevents": "maybe"})
