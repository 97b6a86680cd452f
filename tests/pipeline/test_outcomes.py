"""What a task tells the driver (`ripple.pipeline.outcomes`), without Spark: the counters'
increments during the task, the positions it delivered, the newest commit time and the
warnings it logged; and the driver adding a batch's rows to its own counters and log."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa
import pytest

from ripple.pipeline import metrics, outcomes
from ripple.pipeline.job import JobSettings, checkpoint_of
from ripple.pipeline.outcomes import Report, Summary, rows_of


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[outcomes._Captured]:
    """The worker's log capture, on a logger of its own (the process's stays as it is)."""
    handler = outcomes._Captured()
    monkeypatch.setattr(outcomes, "_captured", handler)
    logger = logging.getLogger("ripple.test_outcomes")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def test_a_task_reports_what_it_moved_and_the_driver_adds_it_up(
    captured: outcomes._Captured, caplog: pytest.LogCaptureFixture
) -> None:
    report = Report()  # as a task starts: the counters as they are
    metrics.PUSH_OK.labels("hook-a").inc(7)
    metrics.PUSH_FAIL.labels("hook-a").inc(2)
    metrics.EVENTS_UNROUTED.inc(1)
    logging.getLogger("ripple.test_outcomes").warning("hook-a: %d events queued", 2)
    report.positions = {3: 120, 0: 17}
    report.newest_commit_ns = 1_700_000_000_000_000_000
    report.lag_ns = 12_000_000
    report.events = 10
    rows = list(rows_of(pa.Table.from_batches([report.batch()])))
    other = Report(lag_ns=40_000_000).batch()  # another task of the batch, further behind

    counts = {(r["name"], r["label"]): r["value"] for r in rows if r["kind"] == "count"}
    assert counts == {
        ("ripple_push_ok", "hook-a"): 7,
        ("ripple_push_fail", "hook-a"): 2,
        ("ripple_events_unrouted", ""): 1,
    }
    assert [(r["label"], r["value"]) for r in rows if r["kind"] == "position"] == [
        ("0", 17),
        ("3", 120),
    ]
    [log] = [r for r in rows if r["kind"] == "log"]
    assert (log["name"], log["value"], log["text"]) == (
        "ripple.test_outcomes",
        logging.WARNING,
        "hook-a: 2 events queued",
    )

    # two tasks of a batch, on the driver
    summary = Summary.of(rows + rows)
    assert summary.count("ripple_push_ok") == 14
    assert summary.positions == {0: 17, 3: 120}
    assert summary.events == 20
    assert Summary.of(rows + list(rows_of(pa.Table.from_batches([other])))).lag_ns == 40_000_000
    assert Summary.of([]).lag_ns == -1  # nothing delivered: the lag stays as it was
    before = metrics.PUSH_OK.labels("hook-a")._value.get()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ripple.test_outcomes"):
        summary.publish()
    assert metrics.PUSH_OK.labels("hook-a")._value.get() == before + 14
    assert caplog.messages.count("hook-a: 2 events queued") == 2


def test_a_task_with_many_warnings_reports_the_first_and_counts_the_rest(
    captured: outcomes._Captured,
) -> None:
    report = Report()
    logger = logging.getLogger("ripple.test_outcomes")
    for n in range(outcomes.MAX_LOG_LINES + 5):
        logger.error("failure %d", n)
    logs = [r for r in report.batch().to_pylist() if r["kind"] == "log"]
    assert len(logs) == outcomes.MAX_LOG_LINES + 1
    assert logs[-1]["text"] == "5 more warnings of this task not shown"
    assert captured.take() == ([], 0)  # taken: the next task starts clean


def test_a_checkpoint_may_be_any_hadoop_path(tmp_path: object) -> None:
    hdfs = JobSettings("sqlite://", "hdfs://namenode:8020/ripple/checkpoint/")
    assert checkpoint_of(hdfs, "bucket_eventing") == "hdfs://namenode:8020/ripple/checkpoint"
    assert checkpoint_of(hdfs, "project_eventing") == (
        "hdfs://namenode:8020/ripple/checkpoint/project-events"
    )
    local = JobSettings("sqlite://", "relative/checkpoint")
    assert checkpoint_of(local, "project_eventing").endswith("/relative/checkpoint/project-events")
    assert checkpoint_of(local, "project_eventing").startswith("/")
