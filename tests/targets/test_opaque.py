"""`OpaqueData`: copied into each event of the topic as `opaqueData`, by the wrapper the
pipeline puts around the topic's push target."""

from __future__ import annotations

import orjson
import pytest

from ripple.notifications.topics import Topic
from ripple.targets.destinations import push_target
from ripple.targets.opaque import OpaqueDataTarget, with_opaque_data
from tests.pipeline.fakes import RecordingTarget, delivery


def test_each_event_carries_the_opaque_data() -> None:
    inner = RecordingTarget("hook")
    target = OpaqueDataTarget(inner, 'tenant "acme"')
    events = [delivery(i) for i in range(3)]
    target.publish(events)
    (sent,) = inner.calls
    for original, wrapped in zip(events, sent, strict=True):
        record = orjson.loads(wrapped.message)
        assert record.pop("opaqueData") == 'tenant "acme"'
        assert record == original.event
        assert wrapped.event_id == original.event_id
    assert target.name == "hook"


def test_with_opaque_data_keeps_the_json_valid() -> None:
    assert orjson.loads(with_opaque_data(b"{}", b'"x"')) == {"opaqueData": "x"}
    assert orjson.loads(with_opaque_data(b'{"a":1} ', b'"x"')) == {"a": 1, "opaqueData": "x"}
    with pytest.raises(ValueError, match="JSON object"):
        with_opaque_data(b"[1]", b'"x"')


def test_a_topic_with_opaque_data_wraps_its_push_target() -> None:
    topic = Topic("t", "http://127.0.0.1:1/hook", {"OpaqueData": "abc", "persistent": "false"})
    target = push_target(topic)
    assert isinstance(target, OpaqueDataTarget)
    assert push_target(Topic("t", "http://127.0.0.1:1/hook")).__class__.__name__ == "WebhookTarget"
