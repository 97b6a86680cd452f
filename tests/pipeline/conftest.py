"""A real Spark session (`local[2]`) shared by a test module, and a pipeline running in a
thread against the test's metabase."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from ripple.notifications.registry import Registry
from ripple.pipeline.deliver import Deliverer, RetryPolicy
from ripple.pipeline.job import JobSettings, run, spark_session
from ripple.pipeline.queue import RetryQueue
from ripple.pipeline.reconfigure import Reconfigurer
from ripple.targets.base import Target


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = spark_session("local[2]")
    yield session
    session.stop()


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting until {what}")
        time.sleep(0.05)


@contextmanager
def running_pipeline(
    url: str,
    checkpoint: Path,
    registry: Registry,
    targets: dict[str, list[Target]],
    queue_engine: object,
    *,
    max_records: int = 50_000,
    policy: RetryPolicy | None = None,
    reconfigurer: Reconfigurer | None = None,
) -> Iterator[Deliverer]:
    """The pipeline in a thread until the block ends; an error in it fails the test. With a
    `reconfigurer` (over `registry`), its targets are the API configuration's and follow it,
    as `ripple pipeline run` wires it; `targets` are then ignored."""
    policy = policy or RetryPolicy(base_delay_s=0.01, max_delay_s=0.2)
    policies: dict[str, RetryPolicy] = {}
    if reconfigurer is not None:
        built = reconfigurer.initial()
        targets, policies = built.targets, built.policies
    deliverer = Deliverer(
        targets,
        RetryQueue(queue_engine),  # type: ignore[arg-type]
        policies,
        default_policy=policy,
    )
    if reconfigurer is not None:
        reconfigurer.deliverer = deliverer
    settings = JobSettings(
        url, checkpoint, master="local[2]", max_records_per_batch=max_records, drain_interval_s=0.1
    )
    stop = threading.Event()
    errors: list[BaseException] = []

    def body() -> None:
        try:
            run(
                settings,
                registry,
                deliverer,
                stop,
                reconfigure=reconfigurer.check if reconfigurer is not None else None,
            )
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=body, name="pipeline")
    thread.start()
    try:
        yield deliverer
    finally:
        stop.set()
        thread.join(120)
        assert not thread.is_alive(), "the pipeline did not stop"
    assert errors == [], errors
