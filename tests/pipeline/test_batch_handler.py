"""The driver's side of a delivery batch (`batch_handler`): when its query is stopping (its
job cancelled, or the wait for its result interrupted: Ctrl-C in a terminal reaches the
JVM too), the batch ends quietly instead of raising into Spark, which would print a Python
and a Java trace over the user's terminal; any other failure of the batch is raised."""

from __future__ import annotations

from typing import Any

import pytest
from py4j.protocol import Py4JJavaError

from ripple.pipeline.job import batch_handler


class JavaError(Py4JJavaError):
    """A Java exception as py4j hands it over, with its text (no JVM behind it)."""

    def __init__(self, text: str) -> None:
        Exception.__init__(self, text)
        self.text = text

    def __str__(self) -> str:
        return self.text


class Outcomes:
    """A batch's outcomes whose collect fails with `error`."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def toArrow(self) -> Any:  # Spark's name
        raise self.error


@pytest.mark.parametrize(
    "text",
    [
        "An error occurred while calling o167.getResult.\n: java.lang.InterruptedException\n"
        "\tat java.base/java.util.concurrent.locks.AbstractQueuedSynchronizer.acquire",
        "An error occurred while calling o90.collectAsArrowToPython.\n: "
        "org.apache.spark.SparkException: [SPARK_JOB_CANCELLED] Job 1 cancelled Query "
        "ripple-events was stopped",
    ],
)
def test_a_batch_whose_query_is_stopping_ends_quietly(text: str) -> None:
    batch_handler()(Outcomes(JavaError(text)), 0)  # type: ignore[arg-type]


def test_any_other_failure_of_a_batch_is_raised() -> None:
    error = JavaError(
        "An error occurred while calling o167.getResult.\n: org.apache.spark.SparkException: "
        "Job aborted due to stage failure: Task 0 in stage 1.0 failed 4 times"
    )
    with pytest.raises(Py4JJavaError):
        batch_handler()(Outcomes(error), 0)  # type: ignore[arg-type]
