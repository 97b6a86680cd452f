"""Benchmark: how soon events arrive after the pipeline starts, and after an idle spell.

`ripple pipeline run` (Spark `local[2]`, a fresh SQLite metabase, a topic pushing to a
loopback webhook receiver) is started with events already committed and more committed while
it starts (one every 0.2 s); each is timed from "pipeline running" (or from its commit, if
later) to its receipt. Then, after `--idle` seconds without a change (Spark ends Python
workers idle for a minute), one event is committed and timed from its commit; then a steady
one a second for `--steady` seconds gives the baseline of the same run.

The last line is one JSON object:
{"startup_last_event_after_running_s", "after_idle_s", "idle_tree_cpu", "steady_p50_s", …}

    .venv/bin/python bench/startup.py [--idle 70] [--steady 10] [--lease-seconds S]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from rich.console import Console

from common import machine_cpu_s, tree_cpu_seconds  # bench/ is on sys.path
from receiver import Receiver
from ripple.metabase import (
    BucketLocation,
    Metabase,
    ObjectLocation,
    create_bucket,
    create_project,
)
from ripple.metabase.migrate import upgrade
from ripple.metabase.put_object import put_object
from ripple.metabase.rows import new_stream_id

console = Console(stderr=True)
RIPPLE = Path(sys.executable).with_name("ripple")
TOPIC = "projects/ripple-bench/topics/hook"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", type=float, default=70.0, help="seconds without a change")
    parser.add_argument("--steady", type=float, default=10.0, help="seconds of one event a second")
    parser.add_argument(
        "--lease-seconds", default=None, help="ripple pipeline run's --lease-seconds (0: none)"
    )
    args = parser.parse_args()
    receiver = Receiver()
    with tempfile.TemporaryDirectory(prefix="ripple-bench-startup-") as tmp:
        directory = Path(tmp)
        url = f"sqlite:///{directory / 'metabase.db'}"
        db = Metabase(url, eventing=lambda _p, _b: True)
        upgrade(db)
        project = create_project(db, "bench")
        create_bucket(db, BucketLocation(project.id, "startup"))
        (directory / "ripple.toml").write_text(
            f'[bucket-eventing]\nbuckets = "{project.id}:startup:{TOPIC}"\n'
            f'[topics."{TOPIC}"]\npush-endpoint = "{receiver.url}"\n',
            encoding="utf-8",
        )
        commits: dict[str, int] = {}

        def commit(key: str) -> None:
            loc = ObjectLocation(project.id, "startup", key)
            data = key.encode()
            etag = hashlib.md5(data).hexdigest()
            put_object(
                db, loc, stream_id=new_stream_id(), size=len(data), etag=etag, inline_data=data
            )
            commits[key] = time.time_ns()

        def received(keys: set[str]) -> dict[str, int]:
            dump = receiver.dump()
            return {k: ns for k, ns in zip(dump["keys"], dump["ns"], strict=True) if k in keys}

        def wait_for(keys: set[str], timeout: float = 120.0) -> dict[str, int]:
            deadline = time.monotonic() + timeout
            while len(got := received(keys)) < len(keys):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{len(keys) - len(got)} events never arrived")
                time.sleep(0.02)
            return got

        for i in range(5):
            commit(f"before-{i}")
        env = {k: v for k, v in os.environ.items() if not k.startswith("RIPPLE_")}
        env.update(RIPPLE_DATABASE_URL=url, RIPPLE_DATA_DIR=str(directory / "data"))
        env["RIPPLE_SPARK_MASTER"] = "local[2]"
        started = time.monotonic()
        process = subprocess.Popen(
            [str(RIPPLE), "--config", str(directory / "ripple.toml"), "pipeline", "run"]
            + ([] if args.lease_seconds is None else ["--lease-seconds", args.lease_seconds]),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        running = threading.Event()
        running_ns = [0]

        def watch() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                if "pipeline running" in line:
                    running_ns[0] = time.time_ns()
                    running.set()

        threading.Thread(target=watch, daemon=True).start()
        n = 0
        while not running.wait(0.2):
            if process.poll() is not None:
                raise RuntimeError("the pipeline exited before it was running")
            commit(f"during-{n}")
            n += 1
        start_s = time.monotonic() - started
        try:
            startup_keys = set(commits)
            got = wait_for(startup_keys)
            after_running = [(ns - max(commits[k], running_ns[0])) / 1e9 for k, ns in got.items()]
            console.print(f"started in {start_s:.1f} s; {len(startup_keys)} events waiting")
            console.print(f"idle for {args.idle:g} s")
            idle_cpu = tree_cpu_seconds(process.pid), machine_cpu_s()
            time.sleep(args.idle)
            idle_tree_cpu = (tree_cpu_seconds(process.pid) - idle_cpu[0]) / args.idle
            idle_machine_cpu = (machine_cpu_s() - idle_cpu[1]) / args.idle
            commit("after-idle")
            idle_s = (wait_for({"after-idle"})["after-idle"] - commits["after-idle"]) / 1e9
            steady: list[float] = []
            for i in range(int(args.steady)):
                key = f"steady-{i}"
                commit(key)
                steady.append((wait_for({key})[key] - commits[key]) / 1e9)
                time.sleep(max(0.0, 1.0 - steady[-1]))
        finally:
            os.killpg(process.pid, 2)
            process.wait(120)
            db.dispose()
            receiver.close()
    result = {
        "pipeline_start_s": round(start_s, 1),
        "startup_events": len(startup_keys),
        "startup_last_event_after_running_s": round(max(after_running), 3),
        "after_idle_s": round(idle_s, 3),
        # CPU seconds per second while idle: the pipeline's process tree, the whole machine
        "idle_tree_cpu": round(idle_tree_cpu, 3),
        "idle_machine_cpu": round(idle_machine_cpu, 3),
        "steady_p50_s": round(statistics.median(steady), 3),
        "steady_max_s": round(max(steady), 3),
        "run": uuid.uuid4().hex[:8],
    }
    console.print(result)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
