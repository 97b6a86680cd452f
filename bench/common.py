"""What the benchmarks share: a progress bar for long phases, a fresh PostgreSQL
database per run (dropped afterwards), so runs never see each other's data, and the CPU
the local PostgreSQL server has used.

Imported as `from common import …`: running `python bench/NAME.py` puts bench/ on sys.path."""

from __future__ import annotations

import contextlib
import os
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


CLOCK_TICK = os.sysconf("SC_CLK_TCK")


def postgres_cpu_s() -> float:
    """CPU seconds of the local PostgreSQL server: every live `postgres` process, plus what
    the postmaster collected from its children that ended (backends closed by the
    connection pool). The whole server: run on an otherwise idle machine."""
    total = 0.0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                head, tail = f.read().rsplit(b")", 1)
            if not head.endswith(b"(postgres"):
                continue
            fields = tail.split()
            total += (int(fields[11]) + int(fields[12])) / CLOCK_TICK
            if _is_postmaster(int(fields[1])):
                total += (int(fields[13]) + int(fields[14])) / CLOCK_TICK
    return total


def _is_postmaster(parent: int) -> bool:
    """A `postgres` process whose parent is not one is the postmaster."""
    try:
        with open(f"/proc/{parent}/comm", "rb") as f:
            return f.read().strip() != b"postgres"
    except OSError:
        return True
