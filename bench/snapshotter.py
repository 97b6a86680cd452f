"""Benchmark: the snapshotter's throughput for 1 KiB events, every format and compression.

Each run publishes N events of about 1 KiB (S3 event records, each a different object, as
the snapshot target archives them) from one thread in batches (`publish_many`), to a
snapshotter over the filesystem and the SQLite index in a temporary directory, through
the whole path: buffer → write-ahead log (fsynced per batch) → page → filesystem (temp
file, fsync, rename) → index. Timed from the first publish until `flush()` returns, so
every event is in a page. The median of the rounds is reported.

Baseline, measured in the same run: the same payload bytes appended to one file with the
same fsync per batch, nothing else: what the disk and the loop cost without the
snapshotter. Also: bytes per event (uncompressed and as stored) per format and compression,
single `publish` calls from 8 threads (group commit), and replay (pages of the protobuf /
zstd run read back through the index, events/s). The last line is JSON:

    {"protobuf_zstd_events_per_s": …, "ndjson_gzip_events_per_s": …, …,
     "protobuf_to_ndjson_bytes_ratio": …, "replay_events_per_s": …, …}

    .venv/bin/python bench/snapshotter.py [--events 200000] [--rounds 3] [--batch 500]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table

from common import progress_bar
from ripple.snapshotter.formats import COMPRESSIONS, FORMATS
from ripple.snapshotter.index.sqlite import SqliteIndex
from ripple.snapshotter.replay import replay
from ripple.snapshotter.service import Publish, Snapshotter
from ripple.snapshotter.settings import SnapshotterSettings
from ripple.snapshotter.storage.filesystem import FilesystemStorage

console = Console(stderr=True)
WRITERS = ("photos", "logs", "backups", "media")


def events(n: int) -> list[Publish]:
    """N S3 event records of about 1 KiB, each for another object."""
    rng = random.Random(7)
    out = []
    for i in range(n):
        bucket = WRITERS[i % len(WRITERS)]
        key = f"2026/11/{rng.randrange(1, 31):02d}/{rng.getrandbits(64):016x}/IMG_{i:08d}.jpg"
        record = {
            "eventVersion": "2.1",
            "eventSource": "ripple:s3",
            "awsRegion": "us-east-1",
            "eventTime": f"2026-11-21T10:{i // 60000 % 60:02d}:{i // 1000 % 60:02d}.{i % 1000:03}Z",
            "eventName": rng.choice(
                ("ObjectCreated:Put", "ObjectRemoved:Delete", "ObjectCreated:Copy")
            ),
            "userIdentity": {"principalId": "6a1f3c2e-0b9d-4c57-9a43-1f2d3e4c5b6a"},
            "requestParameters": {
                "sourceIPAddress": f"10.0.{rng.randrange(256)}.{rng.randrange(256)}"
            },
            "responseElements": {
                "x-amz-request-id": f"{rng.getrandbits(64):016X}",
                "x-amz-id-2": f"{rng.getrandbits(128):032x}",
            },
            "s3": {
                "s3SchemaVersion": "1.0",
                "configurationId": "archive",
                "bucket": {
                    "name": bucket,
                    "ownerIdentity": {"principalId": "6a1f3c2e-0b9d-4c57-9a43-1f2d3e4c5b6a"},
                    "arn": f"arn:aws:s3:::{bucket}",
                },
                "object": {
                    "key": key,
                    "size": rng.randrange(1, 10**9),
                    "eTag": f"{rng.getrandbits(128):032x}",
                    "versionId": f"{rng.getrandbits(96):024x}",
                    "sequencer": f"{i:016X}",
                    "userMetadata": {"x-amz-meta-camera": rng.choice(("x100v", "a7iv", "r5"))},
                },
            },
        }
        payload = orjson.dumps(record)
        payload += b" " * max(0, 1024 - len(payload))  # pad to 1 KiB, as JSON allows
        attributes = {"eventName": record["eventName"], "bucket": bucket, "key": key}
        out.append(Publish(bucket, payload, attributes, None, 1795255200000 + i))
    return out


def open_snapshotter(directory: Path, page_format: str, compression: str) -> Snapshotter:
    settings = SnapshotterSettings.embedded(
        directory, format=page_format, compression=compression, max_age_seconds=3600.0
    )
    return Snapshotter(
        settings, FilesystemStorage(settings.pages_path), SqliteIndex(settings.index_location)
    )


def run_once(
    batch: list[Publish], size: int, page_format: str, compression: str
) -> tuple[float, dict[str, int], Path]:
    directory = Path(tempfile.mkdtemp(prefix="ripple-bench-snap-"))
    snap = open_snapshotter(directory, page_format, compression)
    started = time.perf_counter()
    for i in range(0, len(batch), size):
        snap.publish_many(batch[i : i + size])
    snap.flush()
    elapsed = time.perf_counter() - started
    stored = sum(p.stat().st_size for p in snap.settings.pages_path.rglob("*") if p.is_file())
    raw = sum(e.page_size_bytes for w in WRITERS for e in snap.index.query(w))
    snap.close()
    return elapsed, {"stored": stored, "raw": raw}, directory


def baseline(batch: list[Publish], size: int) -> float:
    """The payloads appended to one file with one fsync per batch: nothing else."""
    with tempfile.TemporaryDirectory(prefix="ripple-bench-snap-") as tmp:
        fd = os.open(Path(tmp) / "plain", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        started = time.perf_counter()
        for i in range(0, len(batch), size):
            os.write(fd, b"".join(e.payload for e in batch[i : i + size]))
            os.fsync(fd)
        elapsed = time.perf_counter() - started
        os.close(fd)
    return elapsed


def threaded_publish(batch: list[Publish], threads: int) -> float:
    """Single `publish` calls from several threads: each waits for the fsync of its group."""
    with tempfile.TemporaryDirectory(prefix="ripple-bench-snap-") as tmp:
        snap = open_snapshotter(Path(tmp), "protobuf", "zstd")
        chunks = [batch[t::threads] for t in range(threads)]

        def work(chunk: list[Publish]) -> None:
            for e in chunk:
                snap.publish(e.writer_id, e.payload, e.attributes, timestamp=e.timestamp)

        workers = [threading.Thread(target=work, args=(c,)) for c in chunks]
        started = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        snap.flush()
        elapsed = time.perf_counter() - started
        snap.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000, help="events per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs per format and compression")
    parser.add_argument("--batch", type=int, default=500, help="events per publish_many")
    args = parser.parse_args()
    batch = events(args.events)
    results: dict[str, Any] = {"events": args.events, "batch": args.batch}
    table = Table(title=f"snapshotter, {args.events:,} events of 1 KiB, median of {args.rounds}")
    for column in (
        "format",
        "compression",
        "events/s",
        "vs baseline",
        "raw B/event",
        "stored B/event",
    ):
        table.add_column(column, justify="right")
    combos = [(f, c) for f in FORMATS for c in COMPRESSIONS]
    replay_dir: Path | None = None
    with progress_bar(console) as progress:
        task = progress.add_task("baseline", total=args.rounds * (len(combos) + 2))
        base = statistics.median(baseline(batch, args.batch) for _ in range(args.rounds))
        progress.advance(task, args.rounds)
        results["baseline_events_per_s"] = round(args.events / base)
        raw_bytes: dict[str, float] = {}
        for page_format, compression in combos:
            progress.update(task, description=f"{page_format}/{compression}")
            times, sizes = [], {}
            for _ in range(args.rounds):
                elapsed, sizes, directory = run_once(batch, args.batch, page_format, compression)
                times.append(elapsed)
                if (page_format, compression) == ("protobuf", "zstd") and replay_dir is None:
                    replay_dir = directory
                progress.advance(task)
            rate = args.events / statistics.median(times)
            name = f"{page_format}_{compression}"
            results[f"{name}_events_per_s"] = round(rate)
            results[f"{name}_raw_bytes_per_event"] = round(sizes["raw"] / args.events, 1)
            results[f"{name}_stored_bytes_per_event"] = round(sizes["stored"] / args.events, 1)
            raw_bytes[page_format] = sizes["raw"] / args.events
            table.add_row(
                page_format,
                compression,
                f"{rate:,.0f}",
                f"{rate / results['baseline_events_per_s']:.2f}",
                f"{sizes['raw'] / args.events:,.1f}",
                f"{sizes['stored'] / args.events:,.1f}",
            )
        progress.update(task, description="8 threads, single publish")
        results["threads_8_single_publish_events_per_s"] = round(
            args.events / threaded_publish(batch, 8)
        )
        progress.update(task, description="replay")
        assert replay_dir is not None
        settings = SnapshotterSettings.embedded(replay_dir)
        storage = FilesystemStorage(settings.pages_path)
        index = SqliteIndex(settings.index_location)
        started = time.perf_counter()
        replayed = sum(1 for w in WRITERS for _ in replay(index, storage, w))
        replay_s = time.perf_counter() - started
        index.close()
        assert replayed == args.events, (replayed, args.events)
        results["replay_events_per_s"] = round(replayed / replay_s)
    results["protobuf_to_ndjson_bytes_ratio"] = round(
        raw_bytes["protobuf"] / raw_bytes["ndjson"], 3
    )
    results["protobuf_zstd_to_baseline"] = round(
        results["protobuf_zstd_events_per_s"] / results["baseline_events_per_s"], 3
    )
    console.print(table)
    console.print(
        f"baseline (append + fsync per batch): {results['baseline_events_per_s']:,} events/s; "
        f"8 threads of single publish: {results['threads_8_single_publish_events_per_s']:,}; "
        f"replay: {results['replay_events_per_s']:,} events/s; protobuf/NDJSON raw bytes: "
        f"{results['protobuf_to_ndjson_bytes_ratio']}"
    )
    print(json.dumps(results))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
