"""`ripple changestream tail`, `ripple changestream prune` and `ripple metabase expire`, run
as a user would (the installed command, in its own process) on SQLite and PostgreSQL, while
this process writes objects through the metabase."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import pytest
import sqlalchemy as sa

from ripple.changestream.reader import ChangeStreamReader
from ripple.changestream.schema import change_records
from ripple.config import ENVIRONMENT_VARIABLES
from ripple.metabase import (
    BucketLocation,
    Metabase,
    ObjectLocation,
    Project,
    create_bucket,
    create_project,
    delete_object,
)
from ripple.metabase.migrate import upgrade
from ripple.metabase.schema import objects
from tests.changestream.conftest import partition_of_key
from tests.conftest import fresh_postgres_database
from tests.metabase.objects import commit_inline_object

RIPPLE = Path(sys.executable).with_name("ripple")
PARTITIONS = 4
TOPIC = "projects/my-team/topics/events"
DEADLINE = 30.0


@dataclass
class Site:
    """A migrated metabase with a project and buckets, eventing configured for the
    `ripple` command (RIPPLE_BUCKET_EVENTING_BUCKETS) and for this process's writers.

    A single-key change goes to the partition of its key; `key` picks keys of `photos` in
    partition `p_photos` and keys of `docs` in `p_docs`, so each bucket's records the tests
    make are in one partition, and the two buckets' in two."""

    url: str
    cwd: Path
    db: Metabase = field(init=False)
    project: Project = field(init=False)
    photos: str = "photos"  # eventing; the tests write keys of partition `p_photos`
    docs: str = "docs"  # eventing; the tests write keys of partition `p_docs`
    p_photos: int = 1
    p_docs: int = 3
    quiet: str = "quiet"  # no eventing

    def __post_init__(self) -> None:
        project_id = uuid.uuid4()
        eventing = {(project_id, self.photos), (project_id, self.docs)}
        self.db = Metabase(self.url, eventing=lambda p, b: (p, b) in eventing)
        upgrade(self.db)
        self.project = create_project(self.db, "my-team", project_id=project_id)
        for name in (self.photos, self.docs, self.quiet):
            create_bucket(self.db, BucketLocation(project_id, name))

    def env(self) -> dict[str, str]:
        environ = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT_VARIABLES}
        pid = self.project.id
        environ.update(
            RIPPLE_DATA_DIR=str(self.cwd / "data"),
            RIPPLE_DATABASE_URL=self.url,
            RIPPLE_BUCKET_EVENTING_BUCKETS=f"{pid}:{self.photos}:{TOPIC},{pid}:{self.docs}:{TOPIC}",
            COLUMNS="250",  # keep rich from wrapping
            PYTHONUNBUFFERED="1",
        )
        return environ

    def ripple(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(RIPPLE), *args],
            cwd=self.cwd,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def tail(self, *args: str) -> list[dict[str, Any]]:
        """`ripple changestream tail ARGS`: its JSON lines (it must succeed)."""
        result = self.ripple("changestream", "tail", *args)
        assert result.returncode == 0, result.stderr
        return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]

    def key(self, bucket: str, template: str) -> str:
        """The first key `template.format(n=0, 1, ...)` of `bucket` (photos or docs) whose
        single-key changes go to the bucket's partition (`p_photos` or `p_docs`)."""
        partition = {self.photos: self.p_photos, self.docs: self.p_docs}[bucket]
        return next(
            key
            for key in (template.format(n=n) for n in itertools.count())
            if partition_of_key(self.project.id, bucket, key, PARTITIONS) == partition
        )

    def loc(self, bucket: str, key: str) -> ObjectLocation:
        return ObjectLocation(self.project.id, bucket, key)

    def put(self, bucket: str, key: str, *, expires_at: datetime | None = None) -> None:
        data = key.encode()
        commit_inline_object(
            self.db,
            self.loc(bucket, key),
            data,
            etag=hashlib.md5(data).hexdigest(),
            expires_at=expires_at,
        )

    def delete(self, bucket: str, key: str) -> None:
        delete_object(self.db, self.loc(bucket, key))


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    if request.param == "sqlite":
        made = Site(f"sqlite:///{tmp_path / 'metabase.db'}", tmp_path)
        try:
            yield made
        finally:
            made.db.dispose()
        return
    postgres_url = request.getfixturevalue("postgres_url")
    with fresh_postgres_database(postgres_url, "ripple_cs_cli") as url:
        made = Site(url, tmp_path)
        try:
            yield made
        finally:
            made.db.dispose()


def changes(records: list[dict[str, Any]]) -> list[tuple[int, str, str, str]]:
    """(partition, mod type, bucket, key) of each mod of each record, in output order."""
    return [
        (r["partition"], r["mod_type"], m["keys"]["bucket_name"], m["keys"]["object_key"])
        for r in records
        if "heartbeat_record" not in r
        for m in r["mods"]
    ]


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


# --- reading what another process wrote -------------------------------------------------


@pytest.fixture
def written(site: Site) -> list[tuple[int, str, str, str]]:
    """Objects written by this process; what `tail` should print, partition by partition."""
    red, ab = site.key(site.photos, "red flower {n}.jpg"), site.key(site.photos, "a/b{n}.txt")
    x = site.key(site.docs, "x{n}")
    site.put(site.photos, red)
    site.put(site.docs, x)
    site.put(site.photos, ab)
    site.put(site.quiet, "never")
    site.delete(site.photos, red)
    assert site.p_photos < site.p_docs
    return [
        (site.p_photos, "INSERT", site.photos, red),
        (site.p_photos, "INSERT", site.photos, ab),
        (site.p_photos, "DELETE", site.photos, red),
        (site.p_docs, "INSERT", site.docs, x),
    ]


def test_tail_prints_the_records_of_another_process(
    site: Site, written: list[tuple[int, str, str, str]]
) -> None:
    records = site.tail("--since", "1h", "--no-follow")
    assert changes(records) == written
    assert all(r["stream"] == "bucket_eventing" for r in records)
    assert [r["position"] for r in records if r["partition"] == site.p_photos] == [1, 2, 3]
    assert [r["position"] for r in records if r["partition"] == site.p_docs] == [1]
    for record in records:
        assert record["table_name"] == "objects"
        assert record["commit_timestamp"].endswith("Z")
        assert record["mods"][0]["keys"]["project_id"] == str(site.project.id)
    # without --since and without following: every retained record, the same
    assert changes(site.tail("--no-follow")) == written


def test_tail_events_prints_s3_event_messages(
    site: Site, written: list[tuple[int, str, str, str]]
) -> None:
    lines = site.tail("--since", "1h", "--no-follow", "--events")
    events = []
    for line in lines:
        (event,) = line["Records"]
        events.append(event)
    names = {"INSERT": "ObjectCreated:Put", "DELETE": "ObjectRemoved:Delete"}
    # "red flower N.jpg" is "red+flower+N.jpg" in an event; "a/bN.txt" and "xN" as they are
    assert sum(" " in key for _, _, _, key in written) == 2
    assert [
        (e["eventName"], e["s3"]["bucket"]["name"], e["s3"]["object"]["key"]) for e in events
    ] == [(names[mod], bucket, key.replace(" ", "+")) for _, mod, bucket, key in written]
    for event in events:
        assert event["eventVersion"] == "2.1"
        assert event["s3"]["bucket"]["ownerIdentity"]["principalId"] == str(site.project.public_id)
        assert event["s3"]["bucket"]["arn"] == f"arn:aws:s3:::{event['s3']['bucket']['name']}"


def test_tail_one_partition(site: Site, written: list[tuple[int, str, str, str]]) -> None:
    only_docs = site.tail("--since", "1h", "--no-follow", "--partition", str(site.p_docs))
    assert changes(only_docs) == [w for w in written if w[0] == site.p_docs]
    only_photos = site.tail("--no-follow", "--partition", str(site.p_photos))
    assert changes(only_photos) == [w for w in written if w[0] == site.p_photos]
    empty = next(p for p in range(PARTITIONS) if p not in (site.p_photos, site.p_docs))
    assert site.tail("--no-follow", "--partition", str(empty)) == []


def test_tail_refuses_bad_arguments_in_one_line(site: Site) -> None:
    line = one_line_error(site.ripple("changestream", "tail", "--since", "yesterday"))
    assert "--since" in line
    assert "'yesterday'" in line

    line = one_line_error(site.ripple("changestream", "tail", "--no-follow", "--partition", "99"))
    assert "--partition 99" in line
    assert "0 to 3" in line

    line = one_line_error(site.ripple("changestream", "tail", "--no-follow", "--since", "3d"))
    assert "retention" in line


# --- following -----------------------------------------------------------------------------


class Lines:
    """The stdout lines of a running process, read by a thread, taken with a deadline."""

    def __init__(self, stream: IO[str]) -> None:
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def until(self, done: Any, what: str, timeout: float = DEADLINE) -> list[dict[str, Any]]:
        """Parsed lines until `done(lines so far)` is true; fails at EOF or the deadline."""
        deadline = time.monotonic() + timeout
        got: list[dict[str, Any]] = []
        while not done(got):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out waiting for {what}; got {got}")
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"the output ended before {what}; got {got}")
            if line.strip():
                got.append(json.loads(line))
        return got


def test_tail_follows_new_records(site: Site, tmp_path: Path) -> None:
    before, live_1 = site.key(site.photos, "before-{n}"), site.key(site.photos, "live-1-{n}")
    live_2 = site.key(site.docs, "live-2-{n}")
    site.put(site.photos, before)  # written before the tail started: not printed
    stderr = (tmp_path / "stderr.txt").open("w")
    proc = subprocess.Popen(
        [str(RIPPLE), "changestream", "tail", "--heartbeat", "0.2"],
        cwd=site.cwd,
        env=site.env(),
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = Lines(proc.stdout)
        beats = lines.until(
            lambda got: any("heartbeat_record" in g for g in got), "a heartbeat line"
        )
        assert changes(beats) == []
        beat = next(b for b in beats if "heartbeat_record" in b)
        assert beat["stream"] == "bucket_eventing"
        assert set(beat["heartbeat_record"]) == {"timestamp"}

        site.put(site.photos, live_1)
        site.put(site.docs, live_2)
        site.delete(site.photos, live_1)
        want = {
            (site.p_photos, "INSERT", site.photos, live_1),
            (site.p_docs, "INSERT", site.docs, live_2),
            (site.p_photos, "DELETE", site.photos, live_1),
        }
        got = lines.until(lambda g: set(changes(g)) >= want, "the records of the new writes")
        assert sorted(changes(got)) == sorted(want)
        in_photos = [c for c in changes(got) if c[0] == site.p_photos]
        assert [c[1] for c in in_photos] == ["INSERT", "DELETE"]
        # `before` took position 1 of the photos partition and was not printed
        assert [
            r["position"] for r in got if "position" in r and r["partition"] == site.p_photos
        ] == [2, 3]
        assert proc.poll() is None, "tail --follow exited"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
        stderr.close()


# --- consumers -----------------------------------------------------------------------------


def test_tail_consumer_resumes_where_it_stopped(site: Site) -> None:
    k1, k3 = site.key(site.photos, "k1-{n}"), site.key(site.photos, "k3-{n}")
    k2 = site.key(site.docs, "k2-{n}")
    site.put(site.photos, k1)
    site.put(site.docs, k2)
    first = site.tail("--consumer", "c1", "--no-follow")
    assert sorted(c[3] for c in changes(first)) == [k1, k2]
    reader = ChangeStreamReader(site.db.engine, "bucket_eventing", write_engine=site.db.writer)
    assert reader.offsets("c1") == {site.p_photos: 1, site.p_docs: 1}

    assert site.tail("--consumer", "c1", "--no-follow") == []
    site.put(site.photos, k3)
    assert [c[3] for c in changes(site.tail("--consumer", "c1", "--no-follow"))] == [k3]
    assert reader.offsets("c1") == {site.p_photos: 2, site.p_docs: 1}
    # another consumer has its own positions
    assert sorted(c[3] for c in changes(site.tail("--consumer", "c2", "--no-follow"))) == [
        k1,
        k2,
        k3,
    ]


def test_tail_consumer_with_since_resumes_after_its_saved_positions(site: Site) -> None:
    site.put(site.photos, "k1")
    site.put(site.docs, "k2")
    args = ("--consumer", "c1", "--since", "1h", "--no-follow")
    first = site.tail(*args)
    assert sorted(c[3] for c in changes(first)) == ["k1", "k2"]
    assert site.tail(*args) == [], "the second run printed records the consumer had seen"
    site.put(site.docs, "k3")
    assert [c[3] for c in changes(site.tail(*args))] == ["k3"]


# --- TTL deletes and pruning ------------------------------------------------------------------


def object_keys(site: Site) -> list[str]:
    with site.db.read() as conn:
        rows = conn.execute(sa.select(objects.c.object_key).order_by(objects.c.object_key))
        return [bytes(r.object_key).decode() for r in rows]


def test_metabase_expire_deletes_expired_objects_as_system_transactions(site: Site) -> None:
    """Since 0012 bucket_eventing records expirations (they are LifecycleExpiration events):
    the TTL delete is one DELETE in a system transaction tagged ttl-delete."""
    expired, kept = site.key(site.photos, "expired-{n}"), site.key(site.photos, "kept-{n}")
    forever = site.key(site.docs, "forever-{n}")
    past = datetime.now(UTC) - timedelta(minutes=5)
    site.put(site.photos, expired, expires_at=past)
    site.put(site.photos, kept, expires_at=datetime.now(UTC) + timedelta(days=1))
    site.put(site.docs, forever)

    result = site.ripple("metabase", "expire")
    assert result.returncode == 0, result.stderr
    assert "expired 1 objects" in result.stdout
    assert object_keys(site) == [forever, kept]

    again = site.ripple("metabase", "expire")
    assert again.returncode == 0, again.stderr
    assert "expired 0 objects" in again.stdout

    records = site.tail("--since", "1h", "--no-follow")
    assert sorted(changes(records)) == sorted(
        [
            (site.p_photos, "INSERT", site.photos, expired),
            (site.p_photos, "INSERT", site.photos, kept),
            (site.p_docs, "INSERT", site.docs, forever),
            (site.p_photos, "DELETE", site.photos, expired),
        ]
    )
    [expiry] = [r for r in records if r["mod_type"] == "DELETE"]
    assert expiry["is_system_transaction"] is True
    assert json.loads(expiry["transaction_tag"])["operation"] == "ttl-delete"


def test_changestream_prune_reports_how_many_it_deleted(site: Site) -> None:
    site.db.clock = lambda: datetime.now(UTC) - timedelta(days=2)
    site.put(site.photos, "old-1")
    site.put(site.docs, "old-2")
    site.db.clock = lambda: datetime.now(UTC)
    site.put(site.photos, "new")

    result = site.ripple("changestream", "prune")
    assert result.returncode == 0, result.stderr
    assert "pruned 2 change records of bucket_eventing" in result.stdout
    with site.db.read() as conn:
        left = conn.execute(
            sa.select(sa.func.count())
            .select_from(change_records)
            .where(change_records.c.stream_name == "bucket_eventing")
        ).scalar()
    assert left == 1
    assert [c[3] for c in changes(site.tail("--no-follow"))] == ["new"]

    again = site.ripple("changestream", "prune")
    assert again.returncode == 0, again.stderr
    assert "pruned 0 change records" in again.stdout


def test_changestream_prune_of_an_unknown_stream(site: Site) -> None:
    line = one_line_error(site.ripple("changestream", "prune", "--stream", "nope"))
    assert "'nope'" in line
    assert "does not exist" in line
