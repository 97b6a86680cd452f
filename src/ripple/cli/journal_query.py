"""`ripple journal query SQL`: a Spark SQL query over the journal table, for users without a
notebook. The table is the view `journal`, read from `<journal.location>/journal` as any
Spark reader reads it (docs/journal.md), and the live inventories, once one is written, the
view `inventory` (`<journal.location>/inventory`); Spark runs on `spark.master`."""

from __future__ import annotations

import datetime
import logging
from typing import Any

import click
from pyspark.errors import AnalysisException, PySparkException
from rich.table import Table

from ripple.cli.common import console, errors
from ripple.config import Settings
from ripple.notifications.inventory import InventoryError, inventory_directory
from ripple.pipeline.journal import journal_table
from ripple.pipeline.session import spark_session

__all__ = ["run_query"]


def run_query(settings: Settings, sql: str, limit: int) -> None:
    """Print the first `limit` rows of `sql` over the view `journal` as a table;
    `click.ClickException` with Spark's first line when the query cannot run."""
    location = journal_table(settings.effective_journal_location)
    # PySpark logs a refused query's error as a JSON line too; it is said once, below
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    with errors.status("starting Spark…"):
        spark = spark_session(settings.spark_master)
    try:
        spark.read.parquet(location).createOrReplaceTempView("journal")
    except AnalysisException as e:
        raise click.ClickException(
            f"no journal rows at {location} yet ({_first_line(e)}): journal a bucket with "
            "`ripple journal enable BUCKET` and let the pipeline run"
        ) from e
    try:
        inventories = inventory_directory(settings.effective_journal_location)
    except InventoryError:  # a location that is not local holds none
        inventories = None
    if inventories is not None and inventories.is_dir():
        spark.read.parquet(str(inventories)).createOrReplaceTempView("inventory")
    try:
        frame = spark.sql(sql)
        rows = frame.limit(limit + 1).collect()
    except PySparkException as e:
        raise click.ClickException(f"the query failed: {_first_line(e)}") from e
    table = Table(show_header=True, header_style="bold")
    for column in frame.columns:
        table.add_column(column)
    for row in rows[:limit]:
        table.add_row(*(_shown(value) for value in row))
    console.print(table)
    if len(rows) > limit:
        errors.print(f"the first {limit} rows (--limit N for more)")


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _shown(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    return str(value)
