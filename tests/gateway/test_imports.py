"""The gateway imports no Spark and no broker SDK: it checks topics with
`ripple.targets.destinations`, which loads a target's SDK only when a target of its kind is
built, and nothing of the pipeline. Each check runs in a fresh interpreter, since this one
has long imported everything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ripple

SRC = Path(ripple.__file__).resolve().parents[1]  # the ripple under test, for the child too

# what a gateway must not load: Spark and Arrow, and each broker's SDK (and gRPC, Pub/Sub's)
HEAVY = (
    "pyspark",
    "pyarrow",
    "py4j",
    "grpc",
    "google.cloud.pubsub",
    "google.cloud.pubsub_v1",
    "google.pubsub_v1",
    "nats",
    "paho",
    "pika",
    "redis",
    "confluent_kafka",
    "ripple.pipeline",
)


def _loaded_by(code: str) -> list[str]:
    """The modules of HEAVY (or below them) that a fresh interpreter has after `code`."""
    probe = (
        f"{code}\nimport json, sys\n"
        f"heavy = {HEAVY!r}\n"
        "print(json.dumps(sorted({h for h in heavy for m in sys.modules "
        "if m == h or m.startswith(h + '.')})))"
    )
    path = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    "module", ["ripple.gateway.server", "ripple.gateway.app", "ripple.targets.destinations"]
)
def test_the_gateway_imports_no_spark_and_no_broker_sdk(module: str) -> None:
    assert _loaded_by(f"import {module}") == []


def test_a_webhook_topic_is_checked_without_any_broker_sdk() -> None:
    code = (
        "from ripple.notifications.topics import Topic\n"
        "from ripple.targets.destinations import policy_of, push_target\n"
        "topic = Topic('hook', 'http://127.0.0.1:9/s3', {'max-retries': '5'})\n"
        "assert push_target(topic) is not None\n"
        "assert policy_of(topic).max_retries == 5\n"
    )
    assert _loaded_by(code) == []


def test_a_broker_sdk_loads_when_a_target_of_its_kind_is_built() -> None:
    code = (
        "from ripple.notifications.topics import Topic\n"
        "from ripple.targets.destinations import push_target\n"
        "topic = Topic('q', 'amqp://127.0.0.1', {'amqp-exchange': 'ripple'})\n"
        "assert push_target(topic) is not None\n"
    )
    assert _loaded_by(code) == ["pika"]
