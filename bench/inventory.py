"""Benchmark: a journaled bucket's live inventory (issue 30) against a ListObjectVersions walk
of the same bucket, in the same run.

A fresh metabase (PostgreSQL by default, or SQLite) with one bucket (bench/world.py's) filled
with `--objects` PUTs from writer processes, journaled. Each round, in alternating order:
(a) listing: `list_object_versions` of the whole bucket, 1,000 rows a page, as the gateway
    answers ListObjectVersions (in this process, no HTTP);
(b) inventory: `write_inventory(..., all_versions=True)` in this process;
(c) command: `ripple journal inventory BUCKET --all-versions` as a user runs it (a process
    of its own, its start and its Parquet file included).
Rows per second of each; the inventory's and the command's against the listing's. The last
line is one JSON object: `inventory_rows_per_s`, `listing_rows_per_s`, `command_s`, … (the
medians over the rounds).

    PYTHONPATH=src:bench .venv/bin/python bench/inventory.py [--objects 200000]
        [--rounds 3] [--database postgresql|sqlite]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ripple.metabase import BucketLocation, Metabase, list_object_versions
from ripple.notifications.inventory import write_inventory
from ripple.notifications.journal import JournalStore
from world import database, fill_puts, make_world  # bench/world.py (bench/ is on sys.path)

console = Console(stderr=True)
RIPPLE = Path(sys.executable).with_name("ripple")


def listing_s(db: Metabase, loc: BucketLocation) -> tuple[float, int]:
    """Seconds to walk every version of the bucket, 1,000 a page; and the rows."""
    rows = 0
    key_marker = version_marker = ""
    start = time.perf_counter()
    while True:
        page = list_object_versions(
            db,
            loc,
            key_marker=key_marker,
            version_id_marker=version_marker,
            max_keys=1000,
        )
        rows += len(page.versions)
        if not page.is_truncated:
            return time.perf_counter() - start, rows
        key_marker, version_marker = page.next_key_marker, page.next_version_id_marker


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--database", choices=("postgresql", "sqlite"), default="postgresql")
    args = parser.parse_args()

    results: dict[str, list[float]] = {"listing": [], "inventory": [], "command": []}
    with database(args.database) as url, tempfile.TemporaryDirectory() as tmp:
        world = make_world(url, buckets=1, versioned=False, sync_commit=False)
        fill_s = fill_puts(world, args.objects, args.writers)
        console.print(f"filled {args.objects:,} objects in {fill_s:.1f} s")
        loc = BucketLocation(world.project_id, world.buckets[0])
        JournalStore(world.db).put(world.project_id, loc.bucket_name, None, "bench")
        env = {
            **os.environ,
            "RIPPLE_DATABASE_URL": url,
            "RIPPLE_JOURNAL_LOCATION": str(Path(tmp) / "command"),
        }
        for round_ in range(args.rounds):
            phases = ["listing", "inventory", "command"]
            if round_ % 2:
                phases.reverse()
            for phase in phases:
                if phase == "listing":
                    seconds, rows = listing_s(world.db, loc)
                elif phase == "inventory":
                    start = time.perf_counter()
                    written = write_inventory(
                        world.db, loc, str(Path(tmp) / "inventory"), all_versions=True
                    )
                    seconds = time.perf_counter() - start
                    rows = 0 if written is None else written.rows
                else:
                    start = time.perf_counter()
                    subprocess.run(
                        [str(RIPPLE), "journal", "inventory", loc.bucket_name, "--all-versions"],
                        env=env,
                        check=True,
                        capture_output=True,
                    )
                    seconds = time.perf_counter() - start
                    rows = args.objects
                if rows != args.objects:
                    raise RuntimeError(f"{phase}: {rows} rows, not {args.objects}")
                results[phase].append(seconds)
                console.print(
                    f"round {round_ + 1} {phase}: {seconds:.2f} s, {rows / seconds:,.0f} rows/s"
                )
        world.db.dispose()

    medians = {phase: statistics.median(times) for phase, times in results.items()}
    table = Table(title=f"inventory of {args.objects:,} objects ({args.database})")
    for column in ("phase", "median s", "rows/s", "÷ listing"):
        table.add_column(column)
    for phase, seconds in medians.items():
        table.add_row(
            phase,
            f"{seconds:.2f}",
            f"{args.objects / seconds:,.0f}",
            f"{medians['listing'] / seconds:.2f}",
        )
    console.print(table)
    print(
        json.dumps(
            {
                "objects": args.objects,
                "database": args.database,
                "listing_rows_per_s": round(args.objects / medians["listing"]),
                "inventory_rows_per_s": round(args.objects / medians["inventory"]),
                "command_rows_per_s": round(args.objects / medians["command"]),
                "inventory_over_listing": round(medians["listing"] / medians["inventory"], 2),
                "command_s": round(medians["command"], 2),
                "rounds": {phase: [round(t, 3) for t in times] for phase, times in results.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
