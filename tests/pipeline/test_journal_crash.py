"""The journal after a crash: `ripple pipeline run` is killed with SIGKILL while a journaled
bucket's objects are written, restarted, and `spark.read.parquet` of the journal holds every
change exactly once — a batch Spark runs again never doubles a row (SQLite and PostgreSQL;
the installed command, Spark local[2])."""

from __future__ import annotations

from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from ripple.metabase import BucketLocation, Metabase, create_bucket, create_project
from ripple.notifications.journal import JournalStore
from ripple.notifications.registry import Registry
from ripple.pipeline.journal import journal_table
from tests.pipeline.conftest import wait_for
from tests.pipeline.helpers import ObjectWriter
from tests.ripple_process import RippleProcess

EVENTS = 400
RESTART_TIMEOUT_S = 300.0  # a start of Spark, or the rest of the writes, on a busy machine


class Journal:
    """The journal's keys as Spark reads them; read again only when a batch committed."""

    def __init__(self, spark: SparkSession, location: Path) -> None:
        self.spark = spark
        self.table = Path(journal_table(str(location)))
        self._log: list[str] = []
        self._keys: list[str] = []

    def keys(self) -> list[str]:
        log_dir = self.table / "_spark_metadata"
        log = sorted(p.name for p in log_dir.iterdir()) if log_dir.is_dir() else []
        if log != self._log:
            try:
                read = self.spark.read.parquet(str(self.table))
            except AnalysisException:  # no row yet
                return []
            self._keys = [row.key for row in read.select("key").collect()]
            self._log = log
        return self._keys


def test_sigkill_mid_batch_leaves_every_change_in_the_journal_once(
    db: Metabase, spark: SparkSession, tmp_path: Path
) -> None:
    project = create_project(db, "crash")
    bucket = BucketLocation(project.id, "photos")
    create_bucket(db, bucket)
    JournalStore(db).put(project.id, "photos", None, "test")
    registry = Registry()
    registry.replace_api({}, [(project.id, "photos")])
    db.eventing = registry.is_eventing  # the writer records the journaled bucket's changes
    location = tmp_path / "journal"
    env = {
        "RIPPLE_DATA_DIR": str(tmp_path / "data"),
        "RIPPLE_DATABASE_URL": db.url.render_as_string(hide_password=False),
        "RIPPLE_SPARK_MASTER": "local[2]",
        "RIPPLE_JOURNAL_LOCATION": str(location),
    }
    args = ("pipeline", "run", "--max-records-per-batch", "25")
    journal = Journal(spark, location)
    writer = ObjectWriter(db, bucket, EVENTS, "crash/")

    with RippleProcess(tmp_path, *args, **env) as first:
        first.wait_for_output("pipeline running", timeout=RESTART_TIMEOUT_S)
        writer.start()
        wait_for(lambda: len(journal.keys()) >= 50, "rows in the journal", RESTART_TIMEOUT_S)
        first.kill()
    before_kill = len(journal.keys())
    writer.join(120)
    assert writer.error is None, writer.error
    assert before_kill < EVENTS, "the kill came after everything was journaled"

    with RippleProcess(tmp_path, *args, **env) as second:
        second.wait_for_output("pipeline running", timeout=RESTART_TIMEOUT_S)
        wait_for(
            lambda: len(journal.keys()) >= EVENTS,
            "every change in the journal after the restart",
            RESTART_TIMEOUT_S,
        )
        assert second.interrupt() == 0, second.stderr[-3000:]
    keys = journal.keys()
    assert sorted(keys) == sorted(writer.keys)  # every change, none twice
    print(f"SIGKILL after {before_kill} of {EVENTS} rows journaled")
