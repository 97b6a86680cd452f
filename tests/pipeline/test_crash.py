"""Crash safety: `ripple pipeline run` is killed with SIGKILL while events flow, restarted,
and every event still reaches its webhook at least once and its pull subscription exactly
once (SQLite and PostgreSQL; the installed command, Spark local[2], a real HTTP socket).

The duplicates the webhook saw are reported. The pipeline records what it delivered in the
consumer offsets right after each batch, and a batch Spark runs again skips that, so only a
kill between a webhook's acknowledgement and that offset commit redelivers events.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson
import pytest

from ripple.changestream.reader import ChangeStreamReader
from ripple.metabase import (
    BucketLocation,
    Metabase,
    create_bucket,
    create_project,
)
from ripple.notifications.phase1 import parse_eventing_buckets
from ripple.notifications.registry import Registry
from ripple.pipeline.queue import RetryQueue
from ripple.subscriptions.store import SubscriptionStore
from tests.pipeline.conftest import wait_for
from tests.pipeline.helpers import ObjectWriter
from tests.ripple_process import RippleProcess

TOPIC = "projects/ripple-test/topics/events"
EVENTS = 600
# The restarted pipeline starts Spark and drains ~500 events in batches of 50: about 20 s
# here, about 60 s with both cores busy elsewhere; a loaded CI machine gets more room.
RESTART_TIMEOUT_S = 300.0


class Receiver:
    """A webhook receiver on 127.0.0.1 recording (event id, key) of every POST."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.received: list[tuple[str, str]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                [event] = orjson.loads(body)["Records"]
                with receiver.lock:
                    receiver.received.append(
                        (self.headers["X-Ripple-Event-Id"], event["s3"]["object"]["key"])
                    )
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"

    def snapshot(self) -> list[tuple[str, str]]:
        with self.lock:
            return list(self.received)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    yield receiver
    receiver.close()


def pulled_keys(store: SubscriptionStore) -> list[str]:
    """The keys of every event the subscription holds, in one pull."""
    page = store.pull("audit", None, 1000)
    assert not page.is_truncated
    return [record["s3"]["object"]["key"] for record in page.to_dict()["Records"]]


def why_not_delivered(
    db: Metabase, receiver: Receiver, writer: ObjectWriter, pipeline: RippleProcess
) -> str:
    """What a failed wait needs to be understood: the keys that never arrived, whether the
    pipeline still runs, where its consumer offsets stand against the stream's ends, its
    retry queue and dead letters, and the end of its log (less httpx's line per request)."""
    missing = sorted(set(writer.keys) - {key for _, key in receiver.snapshot()})
    reader = ChangeStreamReader(db.engine)
    ends = {p: reader.end(p) for p in range(reader.partitions())}
    queue = RetryQueue(db.engine)
    log = [line for line in pipeline.stderr.splitlines(True) if " httpx: " not in line]
    return (
        f"{len(missing)} keys never reached the webhook, e.g. {missing[:5]}; "
        f"the pipeline's exit code: {pipeline.process.poll()} (None: running); "
        f"consumer offsets {reader.offsets('pipeline')} of stream ends {ends}; "
        f"retry queue {queue.length()}, "
        f"dead letters {queue.dead_count()}; pipeline log:\n{''.join(log[-400:])}"
    )


def test_sigkill_while_events_flow_loses_nothing(
    db: Metabase, receiver: Receiver, tmp_path: Path, record_property: object
) -> None:
    project = create_project(db, "crash")
    create_bucket(db, BucketLocation(project.id, "photos"))
    eventing = f"{project.id}:photos:{TOPIC}"
    db.eventing = Registry(parse_eventing_buckets(eventing)).is_eventing
    store = SubscriptionStore(db)
    store.create("audit", TOPIC)
    config = tmp_path / "ripple.toml"
    config.write_text(f'[topics."{TOPIC}"]\npush-endpoint = "{receiver.url}"\n', encoding="utf-8")
    env = {
        "RIPPLE_DATA_DIR": str(tmp_path / "data"),
        "RIPPLE_DATABASE_URL": db.url.render_as_string(hide_password=False),
        "RIPPLE_BUCKET_EVENTING_BUCKETS": eventing,
        "RIPPLE_SPARK_MASTER": "local[2]",
    }
    args = ("--config", str(config), "pipeline", "run", "--max-records-per-batch", "50")

    writer = ObjectWriter(db, BucketLocation(project.id, "photos"), EVENTS, "crash/")
    with RippleProcess(tmp_path, *args, **env) as first:
        first.wait_for_output("pipeline running")
        writer.start()
        wait_for(lambda: len(receiver.snapshot()) >= 100, "events flow to the webhook")
        first.kill()
    seen_before_kill = len(receiver.snapshot())
    writer.join(120)
    assert writer.error is None, writer.error
    assert seen_before_kill < EVENTS, "the kill came after everything was delivered"

    with RippleProcess(tmp_path, *args, **env) as second:
        second.wait_for_output("pipeline running")
        try:
            wait_for(
                lambda: {key for _, key in receiver.snapshot()} >= set(writer.keys),
                "every event reaches the webhook after the restart",
                RESTART_TIMEOUT_S,
            )
        except AssertionError as e:
            why = why_not_delivered(db, receiver, writer, second)
            raise AssertionError(f"{e}: {why}") from None
        wait_for(
            lambda: len(pulled_keys(store)) >= EVENTS, "every event reaches the pull subscription"
        )
        assert second.interrupt() == 0, second.stderr[-3000:]

    received = receiver.snapshot()
    ids_by_key: dict[str, set[str]] = {}
    for event_id, key in received:
        ids_by_key.setdefault(key, set()).add(event_id)
    assert set(ids_by_key) == set(writer.keys)
    # a redelivery carries the same event id: one id per object, however often it came
    assert all(len(ids) == 1 for ids in ids_by_key.values())
    duplicates = len(received) - len(ids_by_key)
    record_property("webhook_duplicates", duplicates)  # type: ignore[operator]
    print(f"SIGKILL after {seen_before_kill} of {EVENTS} events: {duplicates} duplicates")

    assert sorted(pulled_keys(store)) == sorted(writer.keys)  # exactly once: no key twice
