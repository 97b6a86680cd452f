"""The Spark session the pipeline runs in: tuned for small, frequent micro-batches, bound
to the address its executors reach it at, and, on a cluster, with ripple's own code shipped
to the executors."""

from __future__ import annotations

import atexit
import functools
import os
import re
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from pyspark.sql import SparkSession

import ripple
from ripple.pipeline.source import ChangeStreamSource

__all__ = ["is_local_master", "ripple_archive", "spark_session", "with_task_retries"]

LOCAL_TASK_ATTEMPTS = 4
"""How many times a local master runs a task before it fails the job: a cluster's default
(spark.task.maxFailures), where a plain `local[N]` gives a task one attempt, so one task that
fails once (a JVM deserialization fault has been seen after a restart) stops the pipeline."""

_LOCAL_THREADS = re.compile(r"local(?:\[\s*([0-9]+|\*)\s*\])?")


def is_local_master(master: str) -> bool:
    """`local`, `local[N]`, `local[*]`, `local[N,F]`: Spark in this process's JVM."""
    return master == "local" or master.startswith("local[")


def with_task_retries(master: str) -> str:
    """`master` with LOCAL_TASK_ATTEMPTS attempts per task when it is `local` or `local[N]`
    (`local[N,4]`); any other master, and a local one that names its own, as it is."""
    match = _LOCAL_THREADS.fullmatch(master.strip())
    if match is None:
        return master
    return f"local[{match.group(1) or 1},{LOCAL_TASK_ATTEMPTS}]"


def spark_session(
    master: str, conf: dict[str, str] | None = None, driver_host: str = "127.0.0.1"
) -> SparkSession:
    """A Spark session tuned for small, frequent micro-batches on few cores. On a local
    master the Python workers run this interpreter; on a cluster, ripple's own code is
    shipped to the executors (`ripple_archive`), whose Python needs only its dependencies
    (PYSPARK_PYTHON, or Spark's `python3`)."""
    archive = None
    if is_local_master(master):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    else:
        # The driver's own Python helpers (the source's planner) run PYSPARK_PYTHON too,
        # which may lack ripple as the executors' does: they find it on the JVM's PYTHONPATH.
        archive = ripple_archive()
        paths = [str(archive), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    os.environ.setdefault("SPARK_LOCAL_IP", driver_host)  # the JVM's address, and no warning
    builder = (
        SparkSession.builder.master(with_task_retries(master))
        .appName("ripple-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", driver_host)
        .config("spark.driver.host", driver_host)
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.streaming.minBatchesToRetain", "20")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if archive is not None:
        spark.sparkContext.addPyFile(str(archive))  # to every executor's Python path
    spark.dataSource.register(ChangeStreamSource)
    return spark


@functools.cache
def ripple_archive() -> Path:
    """ripple's package as this process imported it, zipped for Spark to ship to the
    executors (`addPyFile`), whose Python then needs only ripple's dependencies. The zip
    lives in a temporary directory removed when this process exits."""
    package = Path(ripple.__file__).resolve().parent
    directory = Path(tempfile.mkdtemp(prefix="ripple-spark-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    archive = directory / "ripple.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                zf.write(path, Path("ripple") / path.relative_to(package))
    return archive
