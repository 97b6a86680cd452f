"""Benchmark: storing events in a pull subscription on PostgreSQL, as a pipeline task does
(`SubscriptionStore.store`: one call per task, FOR UPDATE on the subscription, then its rows),
against the way it stored them before, measured in the same run.

  store     the store as it is: one binary COPY inside a savepoint, the unique index as
            the check (`ripple.subscriptions.store`)
  replay    the same call again with every event already stored (a batch Spark runs
            again): the COPY is refused, the stored events are looked up, nothing is copied
  before    the previous way, as the baseline: look the events up in one query, then a
            text COPY of the new ones

Each round stores `--events` new S3 event records (~800 bytes each, the pipeline's form) per
case, in `--calls` calls, into a fresh database's subscription; the cases take turns, so a
machine that slows down slows them alike. Reported: medians of the wall time and of the CPU
of the whole machine (this process and PostgreSQL alike, from /proc/stat) per event.
The machine should be otherwise idle. Last line JSON.

    .venv/bin/python bench/subscription_store.py [--events 50000] [--calls 4] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy as sa
from rich.console import Console
from rich.table import Table

from common import fresh_postgres_database, machine_cpu_s, progress_bar  # bench/common.py
from ripple.metabase import Metabase
from ripple.metabase.migrate import upgrade
from ripple.subscriptions.schema import subscriptions
from ripple.subscriptions.store import SubscriptionStore
from ripple.targets.base import Delivery

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' event records
from tests.subscriptions import delivery, s3_event

console = Console(stderr=True)
ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
TOPIC = "projects/bench/topics"  # one topic per case and round: TOPIC/<name>
CASES = ("store", "replay", "before")


def deliveries(first: int, count: int) -> list[Delivery]:
    """`count` S3 put event records as the pipeline makes them (the tests' own), event ids
    `evt-<n>` from `first`."""
    return [
        delivery(
            s3_event(f"photos/2026/11/{n:08d}.jpg", sequencer=f"18EA07F04CD9E115{n:08X}"),
            f"evt-{n:09d}",
        )
        for n in range(first, first + count)
    ]


def store_before(db: Metabase, topic: str, batch: Sequence[Delivery]) -> int:
    """The previous store: FOR UPDATE, a lookup of the stored events, a text COPY."""
    with db.write() as conn:
        names: list[str] = sorted(
            conn.execute(
                sa.select(subscriptions.c.name)
                .where(subscriptions.c.topic == topic)
                .with_for_update()
            ).scalars()
        )
        now_ns = time.time_ns()
        rows = [
            (n, d.event_id, d.message.decode(), now_ns, d.batch_id) for n in names for d in batch
        ]
        driver = conn.connection.driver_connection
        assert isinstance(driver, psycopg.Connection)
        with driver.cursor() as cursor:
            cursor.execute(
                "SELECT subscription, event_id FROM subscription_events "
                "WHERE subscription = ANY(%s) AND event_id = ANY(%s)",
                (names, [d.event_id for d in batch]),
            )
            seen = {(name, event_id) for name, event_id in cursor}
            count = 0
            with cursor.copy(
                "COPY subscription_events "
                "(subscription, event_id, event, created_at_ns, batch_id) FROM STDIN"
            ) as copy:
                for row in rows:
                    if (row[0], row[1]) not in seen:
                        seen.add((row[0], row[1]))
                        copy.write_row(row)
                        count += 1
        return count


def timed(work: Callable[[], int], events: int) -> tuple[float, float, int]:
    """(wall µs, machine CPU µs) per event, and what `work` returned."""
    cpu, start = machine_cpu_s(), time.perf_counter()
    stored = work()
    wall = time.perf_counter() - start
    return wall * 1e6 / events, (machine_cpu_s() - cpu) * 1e6 / events, stored


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=50_000, help="per case and round")
    parser.add_argument("--calls", type=int, default=4, help="store calls per case and round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    per_call = max(1, args.events // args.calls)
    results: dict[str, dict[str, list[float]]] = {c: {"wall": [], "cpu": []} for c in CASES}
    with fresh_postgres_database(ADMIN_URL, f"ripple_bench_store_{os.getpid()}") as url:
        db = Metabase(url)
        upgrade(db)
        store = SubscriptionStore(db)
        next_id = 0
        with progress_bar(console) as progress:
            task = progress.add_task("rounds", total=args.rounds)
            for _ in range(args.rounds):
                for case in CASES:
                    name = f"sub-{case}-{next_id}"  # each case its own fresh subscription
                    store.create(name, f"{TOPIC}/{name}")
                    batches = [
                        deliveries(next_id + i * per_call, per_call) for i in range(args.calls)
                    ]
                    next_id += per_call * args.calls
                    topic = f"{TOPIC}/{name}"
                    if case == "replay":
                        for batch in batches:
                            store.store(topic, batch)

                    def work(case: str = case, topic: str = topic, batches: Any = batches) -> int:
                        if case == "before":
                            return sum(store_before(db, topic, b) for b in batches)
                        return sum(store.store(topic, b) for b in batches)

                    wall, cpu, stored = timed(work, per_call * args.calls)
                    expected = 0 if case == "replay" else per_call * args.calls
                    if stored != expected:
                        raise RuntimeError(f"{case}: stored {stored}, expected {expected}")
                    results[case]["wall"].append(wall)
                    results[case]["cpu"].append(cpu)
                progress.advance(task)
        db.dispose()
    summary = {
        case: {
            "wall_us_per_event": round(statistics.median(v["wall"]), 2),
            "machine_cpu_us_per_event": round(statistics.median(v["cpu"]), 2),
        }
        for case, v in results.items()
    }
    table = Table(title=f"{per_call * args.calls:,} events a round, {args.rounds} rounds, medians")
    for column in ("case", "wall µs/event", "machine CPU µs/event"):
        table.add_column(column, justify="left" if column == "case" else "right")
    for case, figures in summary.items():
        table.add_row(
            case, f"{figures['wall_us_per_event']}", f"{figures['machine_cpu_us_per_event']}"
        )
    console.print(table)
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
