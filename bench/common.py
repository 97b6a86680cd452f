"""What the benchmarks share: a progress bar for long phases, the CPU and wall time a
block of this process spends, a percentile of sorted figures, a fresh PostgreSQL database
per run (dropped afterwards), so runs never see each other's data, the CPU the local
PostgreSQL server has used, and the CPU seconds of processes and their descendants from
/proc.

Imported as `from common import …`: running `python bench/NAME.py` puts bench/ on sys.path."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

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


def percentile(values: list[float], pct: float) -> float:
    """The `pct` percentile of sorted `values` (nearest rank)."""
    rank = max(1, min(len(values), round(pct / 100 * len(values) + 0.5)))
    return values[rank - 1]


@dataclass
class Spent:
    cpu_s: float = 0.0  # this process's CPU (all its threads), user + system
    wall_s: float = 0.0


@contextmanager
def spent() -> Iterator[Spent]:
    """The CPU and wall seconds this process spends in the block, set when it ends."""
    took = Spent()
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        yield took
    finally:
        took.cpu_s = time.process_time() - cpu
        took.wall_s = time.perf_counter() - wall


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


def machine_cpu_s() -> float:
    """CPU seconds the whole machine has spent outside idle and I/O wait (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / CLOCK_TICK


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


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat from the state on (None: the process is gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()  # fields from the state on


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK if fields else 0.0


def _pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def pids_named(*names: str) -> list[int]:
    found = []
    for pid in _pids():
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().strip() in names:
                found.append(pid)
    return found


def descendants(root: int) -> list[int]:
    """Every process below `root` (Spark's JVM and its Python workers)."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        fields = _stat(pid)
        if fields:
            children.setdefault(int(fields[1]), []).append(pid)
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def tree_cpu_seconds(pid: int) -> float:
    """CPU of `pid` and every process below it, as far as they still run."""
    return sum(cpu_s(p) for p in [pid, *descendants(pid)])
