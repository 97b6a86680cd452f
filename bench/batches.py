"""Benchmark: what one micro-batch of the running pipeline costs, phase by phase, against
Spark's own floor measured in the same run.

Spark's query progress splits each trigger into latestOffset, walCommit (the offset log,
and the source's commit of the batch before), queryPlanning, addBatch (the foreachBatch call:
the batch's Spark job, whose tasks deliver) and commitOffsets (the commit log). Two cases,
each `--seconds` of batches on `local[2]`, in one Spark session:

  floor     a trivial Python streaming source (one row a batch) into foreachBatch, which
            collects it with toArrow: what any batch of a Python source costs here
  pipeline  ripple's pipeline (`ripple.pipeline.service.Pipeline`, in this process) over a
            fresh PostgreSQL metabase, one PUT into a pull topic's bucket every `--interval`
            seconds: batches of one or two events, each delivered by its batch's task (no
            leases, which deliver for seconds across batches)

`--hadoop-defaults` runs both with Hadoop's and Spark's checkpoint defaults instead of
`ripple.pipeline.job.LOCAL_CHECKPOINT_CONF` (the before of that change). Medians and 90th
percentiles in ms, the first 5 batches of each case left out; the last line is JSON.

    .venv/bin/python bench/batches.py [--seconds 20] [--interval 0.25] [--hadoop-defaults]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from rich.console import Console
from rich.table import Table

import pipeline as pipeline_bench  # bench/pipeline.py (bench/ is on sys.path)
from common import fresh_postgres_database
from ripple.config import load_settings
from ripple.metabase import Metabase, ObjectLocation
from ripple.metabase.put_object import put_object
from ripple.metabase.rows import new_stream_id
from ripple.pipeline.job import LOCAL_CHECKPOINT_CONF
from ripple.pipeline.service import Pipeline
from ripple.pipeline.session import spark_session

console = Console(stderr=True)
PHASES = (
    "triggerExecution",
    "latestOffset",
    "walCommit",
    "queryPlanning",
    "addBatch",
    "commitOffsets",
)
HADOOP_DEFAULTS = {
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.LocalFileSystem",
    "spark.sql.streaming.checkpointFileManagerClass": (
        "org.apache.spark.sql.execution.streaming.checkpointing."
        "FileContextBasedCheckpointFileManager"
    ),
}


class TickReader(DataSourceStreamReader):
    """A new offset every 0.1 s; each batch is one row."""

    def initialOffset(self) -> dict[str, int]:
        return {"tick": 0}

    def latestOffset(self) -> dict[str, int]:  # type: ignore[override]  # Spark's simple form
        return {"tick": int(time.time() * 10)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield pa.RecordBatch.from_pydict({"tick": [1]})

    def commit(self, end: dict[str, int]) -> None:
        pass


class TickSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "bench-tick"

    def schema(self) -> str:
        return "tick long"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return TickReader()


def summary(progress: list[Any]) -> dict[str, list[int]]:
    """{phase: [p50, p90]} over the batches that read rows, less the first five."""
    batches = [p for p in progress if p["numInputRows"]][5:]
    if not batches:
        raise RuntimeError("no batch read a row")
    out = {}
    for phase in PHASES:
        values = sorted(int(p["durationMs"].get(phase, 0)) for p in batches)
        out[phase] = [values[len(values) // 2], values[int(len(values) * 0.9)]]
    out["batches"] = [len(batches), len(batches)]
    return out


def floor(conf: dict[str, str], seconds: float) -> dict[str, list[int]]:
    spark = spark_session("local[2]", conf)
    spark.dataSource.register(TickSource)

    def collect(frame: DataFrame, _batch_id: int) -> None:
        frame.toArrow()

    with tempfile.TemporaryDirectory() as checkpoint:
        query = (
            spark.readStream.format("bench-tick")
            .load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="0 seconds")
            .start()
        )
        time.sleep(seconds)
        query.stop()
        return summary(query.recentProgress)


def ripple_pipeline(conf: dict[str, str], seconds: float, interval: float) -> dict[str, Any]:
    name = f"ripple_bench_batches_{os.getpid()}"
    with (
        fresh_postgres_database(pipeline_bench.ADMIN_URL, name) as url,
        tempfile.TemporaryDirectory() as directory,
    ):
        world = pipeline_bench.make_world(url, Path(directory), "http://127.0.0.1:9/unused")
        settings = load_settings(pipeline_bench.config_file(world), {"RIPPLE_DATABASE_URL": url})
        # no leases: each micro-batch delivers what it reads (a lease task delivers for
        # seconds across batches, which would leave no batch's phases to split)
        pipeline = Pipeline.from_settings(
            settings, checkpoint_dir=Path(directory) / "cp", lease_s=0
        )
        pipeline.job = dataclasses.replace(pipeline.job, spark_conf=conf)
        started: list[Any] = []
        runner = threading.Thread(target=pipeline.run, kwargs={"on_started": started.append})
        runner.start()
        db = Metabase(url, eventing=lambda _project, _bucket: True)
        try:
            while not started:
                if not runner.is_alive():
                    raise RuntimeError("the pipeline ended before it ran")
                time.sleep(0.1)
            query = started[0]
            end = time.monotonic() + seconds
            n = 0
            while time.monotonic() < end:
                location = ObjectLocation(world.project_id, "bench-pull", f"trickle-{n:05d}")
                put_object(
                    db,
                    location,
                    stream_id=new_stream_id(),
                    size=1,
                    etag=pipeline_bench.ETAG,
                    inline_data=b"x",
                )
                n += 1
                time.sleep(interval)
            time.sleep(2)
            return summary(query.recentProgress)
        finally:
            pipeline.stop.set()
            runner.join(120)
            db.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20, help="of batches per case")
    parser.add_argument("--interval", type=float, default=0.25, help="between the PUTs")
    parser.add_argument(
        "--hadoop-defaults", action="store_true", help="the checkpoint as Hadoop writes it"
    )
    args = parser.parse_args()
    conf = HADOOP_DEFAULTS if args.hadoop_defaults else LOCAL_CHECKPOINT_CONF
    results: dict[str, Any] = {
        "checkpoint": "hadoop-defaults" if args.hadoop_defaults else "ripple"
    }
    with console.status("floor: a trivial Python source"):
        results["floor"] = floor(conf, args.seconds)
    with console.status(f"pipeline: one PUT every {args.interval:.2f} s"):
        results["pipeline"] = ripple_pipeline(conf, args.seconds, args.interval)
    table = Table(title=f"ms per batch, p50 / p90 (checkpoint: {results['checkpoint']})")
    table.add_column("phase")
    table.add_column("floor", justify="right")
    table.add_column("pipeline", justify="right")
    for phase in (*PHASES, "batches"):
        table.add_row(
            phase,
            *(f"{results[c][phase][0]} / {results[c][phase][1]}" for c in ("floor", "pipeline")),
        )
    console.print(table)
    print(json.dumps(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
