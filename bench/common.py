"""What the benchmarks share: a progress bar for long phases, and a fresh PostgreSQL
database per run (dropped afterwards), so runs never see each other's data.

Imported as `from common import …`: running `python bench/NAME.py` puts bench/ on sys.path."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import sqlalchemy as sa
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


def progress_bar(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )


@contextmanager
def fresh_postgres_database(admin_url: str, name: str) -> Iterator[str]:
    """The URL of a new database `name` on the server of `admin_url`, dropped afterwards."""
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield sa.make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
