"""Benchmark: what per-key ordering (`ordering = per-key`) costs a webhook destination, in
events/s, against ordering off in the same run.

ripple's `Deliverer` (no Spark) over a fresh PostgreSQL metabase (or `--database sqlite`)
delivers to a webhook target posting to the loopback receiver of `bench/receiver.py`. Each
case runs ordering off and per-key in turn, `--rounds` times, alternating which goes first;
the medians are reported:

  spread    `--events` events in batches of `--batch`, every event of its own key: one wave
            a batch; per-key adds the lookup of held keys (two indexed queries while the
            destination has nothing queued)
  hot       the same events over `--hot-keys` keys: each batch holds `--batch / --hot-keys`
            events of every key, sent one wave after another
  held      as spread, while one other key is held (an event of it in the retry queue):
            per-key looks each batch's keys up in the queue and the dead letters (ordering
            off is measured with nothing queued: with a queue it sends nothing at once)
  drain     `--queued` events in the retry queue, 10 per key, drained into the recovered
            destination: ordering off sends pages of due events, per-key each key's head,
            round after round

The last line is JSON: {case: {"off": events/s, "per_key": events/s, "ratio": per_key/off}}.

    .venv/bin/python bench/ordering.py [--events 50000] [--batch 5000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from rich.console import Console
from rich.table import Table

from common import fresh_postgres_database
from receiver import Receiver
from ripple.metabase import Metabase
from ripple.metabase.migrate import upgrade
from ripple.pipeline.deliver import Deliverer
from ripple.pipeline.queue import RetryQueue
from ripple.pipeline.schema import dead_letters, delivery_retries
from ripple.targets.base import Delivery, Target
from ripple.targets.retry import RetryPolicy
from ripple.targets.webhook import WebhookConfig, WebhookTarget

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
console = Console(stderr=True)


def deliveries(count: int, keys: int | None, first: int = 0) -> list[Delivery]:
    """`count` events, as routing makes them; over `keys` keys (round robin), or each of
    its own key."""
    out = []
    for n in range(first, first + count):
        key = f"k{n % keys}" if keys else f"k{n}"
        sequencer = f"{0x18EA07F04CD9E115 + n:016X}00000000"
        event = {
            "eventVersion": "2.1",
            "eventSource": "ripple:s3",
            "eventName": "ObjectCreated:Put",
            "s3": {
                "bucket": {"name": "photos"},
                "object": {"key": key, "size": 1024, "sequencer": sequencer},
            },
        }
        attributes = {
            "eventName": "ObjectCreated:Put",
            "bucket": "photos",
            "key": key,
            "sequencer": sequencer,
        }
        out.append(Delivery.of(f"0-{sequencer}", event, attributes, batch_id=1))
    return out


class Bench:
    def __init__(self, engine: sa.Engine, receiver: Receiver) -> None:
        self.engine = engine
        self.receiver = receiver
        self.target: Target = WebhookTarget(WebhookConfig(url=receiver.url), name="bench")
        self.target.open()

    def deliverer(self, per_key: bool) -> Deliverer:
        policy = RetryPolicy(per_key_order=per_key)
        return Deliverer({"t": [self.target]}, RetryQueue(self.engine), {"bench": policy})

    def empty(self) -> None:
        with self.engine.begin() as conn:
            conn.execute(sa.delete(delivery_retries))
            conn.execute(sa.delete(dead_letters))
        self.receiver._call("POST", "/_reset")

    def batches(self, per_key: bool, events: list[Delivery], batch: int) -> float:
        deliverer = self.deliverer(per_key)
        start = time.perf_counter()
        for i in range(0, len(events), batch):
            deliverer.deliver({"t": events[i : i + batch]})
        seconds = time.perf_counter() - start
        got = self.receiver._call("GET", "/_stats")["unique"]
        if got < len(events):
            raise RuntimeError(f"the receiver got {got} of {len(events)} events")
        return len(events) / seconds

    def held(self, per_key: bool, events: list[Delivery], batch: int) -> float:
        """Batches while one other key is held. Ordering off is measured with nothing
        queued: with a queue it would send nothing at all (the destination is failing)."""
        if per_key:
            hold = deliveries(1, None, first=10**9)[0]
            RetryQueue(self.engine).enqueue("bench", [(hold, "down")], time.time_ns() + 10**12)
        return self.batches(per_key, events, batch)

    def drain(self, per_key: bool, queued: int) -> float:
        events = deliveries(queued, queued // 10)
        queue = RetryQueue(self.engine)
        for i in range(0, queued, 5000):
            queue.enqueue("bench", [(d, "down") for d in events[i : i + 5000]], 0)
        deliverer = self.deliverer(per_key)
        start = time.perf_counter()
        while queue.length("bench"):
            if deliverer.drain(now_ns=time.time_ns(), limit=2000) == 0:
                raise RuntimeError("the drain delivered nothing")
        return queued / (time.perf_counter() - start)


def run(args: argparse.Namespace, url: str) -> dict[str, Any]:
    metabase = Metabase(url)
    upgrade(metabase)
    receiver = Receiver()
    bench = Bench(metabase.writer, receiver)
    spread = deliveries(args.events, None)
    hot = deliveries(args.events, args.hot_keys)
    cases: dict[str, Callable[[bool], float]] = {
        "spread": lambda per_key: bench.batches(per_key, spread, args.batch),
        "hot": lambda per_key: bench.batches(per_key, hot, args.batch),
        "held": lambda per_key: bench.held(per_key, spread, args.batch),
        "drain": lambda per_key: bench.drain(per_key, args.queued),
    }
    results: dict[str, Any] = {}
    try:
        bench.batches(False, deliveries(2000, None, first=10**8), 500)  # warm up
        for name, case in cases.items():
            runs: dict[bool, list[float]] = {False: [], True: []}
            for r in range(args.rounds):
                for per_key in (False, True) if r % 2 == 0 else (True, False):
                    bench.empty()
                    runs[per_key].append(case(per_key))
                    console.print(
                        f"{name} {'per-key' if per_key else 'off'}: {runs[per_key][-1]:,.0f} ev/s"
                    )
            off, per_key_rate = statistics.median(runs[False]), statistics.median(runs[True])
            results[name] = {
                "off": round(off),
                "per_key": round(per_key_rate),
                "ratio": round(per_key_rate / off, 3),
            }
    finally:
        bench.target.close()
        receiver.process.terminate()
        metabase.dispose()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=5_000)
    parser.add_argument("--hot-keys", type=int, default=100)
    parser.add_argument("--queued", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database", choices=("postgresql", "sqlite"), default="postgresql")
    args = parser.parse_args()
    if args.database == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            results = run(args, f"sqlite:///{Path(tmp) / 'metabase.db'}")
    else:
        with fresh_postgres_database(ADMIN_URL, f"bench_ordering_{uuid.uuid4().hex[:8]}") as url:
            results = run(args, url)
    table = Table(title=f"per-key ordering vs off, webhook, {args.database} (events/s, medians)")
    for column in ("case", "off", "per-key", "per-key / off"):
        table.add_column(column, justify="right")
    for name, r in results.items():
        table.add_row(name, f"{r['off']:,}", f"{r['per_key']:,}", f"{r['ratio']:.2f}")
    console.print(table)
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    sys.exit(main())
