"""A real Spark session (`local[2]`) shared by a test module, a pipeline running in a
thread against the test's metabase, its tasks delivering in Spark's Python workers, and
boto3's `sns` client of the gateway, for the modules that run one."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from pyspark.sql import SparkSession

from ripple.metabase import Metabase
from ripple.notifications.registry import Registry
from ripple.notifications.topics import Topic
from ripple.pipeline.job import LOCAL_CHECKPOINT_CONF, JobSettings, run, worker_setup
from ripple.pipeline.queue import RetryQueue
from ripple.pipeline.session import spark_session
from ripple.targets.base import Target
from ripple.targets.destinations import Destinations
from ripple.targets.retry import RetryPolicy
from tests.gateway.conftest import Running

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    # the workers unpickle the tests' target factories: they import `tests`
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    session = spark_session("local[2]", LOCAL_CHECKPOINT_CONF)  # the tests' are local
    yield session
    session.stop()


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting until {what}")
        time.sleep(0.05)


# Targets for the workers: a mapping of picklable targets, or a function of the worker's
# metabase that makes them (for targets that hold a connection pool).
Targets = dict[str, list[Target]] | Callable[[Metabase], dict[str, list[Target]]]


@dataclass(frozen=True)
class FixedTargets:
    """A worker's targets: `targets` (or what it makes), retried by `policy`."""

    targets: Targets

    def __call__(self, metabase: Metabase) -> Destinations:
        made = self.targets(metabase) if callable(self.targets) else self.targets
        return Destinations({topic: list(ts) for topic, ts in made.items()})


@dataclass
class RunningPipeline:
    """A running pipeline, as a test sees it: the retry queue its workers fill."""

    queue: RetryQueue


@contextmanager
def running_pipeline(
    url: str,
    checkpoint: Path,
    registry: Registry,
    targets: Targets,
    queue_engine: sa.Engine,
    *,
    max_records: int = 50_000,
    policy: RetryPolicy | None = None,
    configured: Mapping[str, Topic] | None = None,
    journal: Path | None = None,
) -> Iterator[RunningPipeline]:
    """The pipeline in a thread until the block ends; an error in it fails the test. The
    workers route by the registry's routes as they are at the start and deliver to
    `targets`; with `configured` topics (a configuration file's), they follow the API
    configuration, as `ripple pipeline run` does (`targets` and the registry are ignored).
    With `journal`, journaled buckets' events are written to that journal location."""
    policy = policy or RetryPolicy(base_delay_s=0.01, max_delay_s=0.2)
    settings = JobSettings(
        url,
        checkpoint,
        master="local[2]",
        max_records_per_batch=max_records,
        drain_interval_s=0.1,
        journal_location=str(journal or ""),
    )
    if configured is not None:
        setup = worker_setup(settings, topics=dict(configured), default_policy=policy)
    else:
        setup = worker_setup(
            settings,
            routes=registry.routes(),
            targets=FixedTargets(targets),
            default_policy=policy,
        )
    stop = threading.Event()
    errors: list[BaseException] = []

    def body() -> None:
        try:
            run(settings, setup, stop)
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=body, name="pipeline")
    thread.start()
    try:
        yield RunningPipeline(RetryQueue(queue_engine))
    finally:
        stop.set()
        thread.join(120)
        assert not thread.is_alive(), "the pipeline did not stop"
    assert errors == [], errors


@pytest.fixture
def sns(gateway: Running) -> Any:
    """boto3's `sns` client of the gateway (the `gateway` fixture the module imports)."""
    return gateway.sns()
