"""The pipeline's Spark session: a local master retries a failed task as a cluster does."""

from __future__ import annotations

import pytest
from pyspark import TaskContext
from pyspark.sql import SparkSession

from ripple.pipeline.session import LOCAL_TASK_ATTEMPTS, with_task_retries


@pytest.mark.parametrize(
    ("master", "expected"),
    [
        ("local", f"local[1,{LOCAL_TASK_ATTEMPTS}]"),
        ("local[2]", f"local[2,{LOCAL_TASK_ATTEMPTS}]"),
        ("local[*]", f"local[*,{LOCAL_TASK_ATTEMPTS}]"),
        (" local[ 3 ] ", f"local[3,{LOCAL_TASK_ATTEMPTS}]"),
        ("local[2,1]", "local[2,1]"),  # the user's own attempts count
        ("spark://127.0.0.1:7077", "spark://127.0.0.1:7077"),
        ("local-cluster[2,1,1024]", "local-cluster[2,1,1024]"),
    ],
)
def test_a_local_master_gets_a_clusters_task_attempts(master: str, expected: str) -> None:
    assert with_task_retries(master) == expected


def test_a_task_that_fails_once_does_not_fail_the_job(spark: SparkSession) -> None:
    def fails_on_its_first_attempt(rows: object) -> list[int]:
        context = TaskContext.get()
        assert context is not None
        if context.attemptNumber() == 0:
            raise RuntimeError("a fault on the first attempt")
        return [context.attemptNumber()]

    attempts = spark.sparkContext.parallelize([0], 1).mapPartitions(fails_on_its_first_attempt)
    assert attempts.collect() == [1]
