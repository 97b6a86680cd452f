"""The index backends (SQLite, PostgreSQL, Redis): one suite run against each, then what is
particular to each (SQLite's WAL sharing, Redis's expiry, failed transactions, unreachable
servers).

SQLite lives in tmp_path; PostgreSQL in a database made for this module's run (each test has
its own table); Redis on 127.0.0.1:6379 under a key prefix of its own per test, deleted
after. A missing server skips its cases (fails them when CI is set).
"""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa

from ripple.snapshotter.index import Index, IndexEntry, IndexError_, open_index
from ripple.snapshotter.index.postgresql import PostgresIndex
from ripple.snapshotter.index.redis import RedisIndex
from ripple.snapshotter.index.sql import SqlIndex
from ripple.snapshotter.index.sqlite import SqliteIndex
from ripple.snapshotter.settings import SnapshotterSettings
from tests.conftest import ADMIN_URL, fresh_postgres_database, service_missing
from tests.snapshotter.helpers import entry
from tests.waiting import wait_for

REDIS_URL = "redis://127.0.0.1:6379/0"
Server = Any  # a redis.Redis: redis-py types its replies for sync and async clients at once
PASSWORD = "s3cret-pw-9f1c"

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql), "redis"]
SQL_BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)]


# --- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def postgres_index_url() -> Iterator[str]:
    with fresh_postgres_database(ADMIN_URL, "ripple_snapidx") as url:
        yield url


@pytest.fixture
def redis_server() -> Iterator[Server]:
    server = redis.Redis.from_url(REDIS_URL, socket_timeout=5, decode_responses=True)
    try:
        server.ping()
    except redis.RedisError as e:
        service_missing("Redis on 127.0.0.1:6379", str(e))
    yield server
    server.close()


@pytest.fixture
def redis_prefix(redis_server: Server) -> Iterator[str]:
    """A key prefix of the test's own; its keys (`P:*`, `P-*`) are deleted after."""
    base = f"test-snapidx-{uuid.uuid4().hex[:12]}"
    yield f"{base}:"
    keys = [*redis_server.scan_iter(f"{base}:*"), *redis_server.scan_iter(f"{base}-*")]
    if keys:
        redis_server.delete(*keys)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test (a test may parametrize it to fewer)."""
    return str(request.param)


@pytest.fixture
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[str], Index]]:
    """Opens indexes of a backend, all on this test's data (its SQLite file, PostgreSQL table
    or Redis prefix); closes them after."""
    opened: list[Index] = []
    table = f"pages_{uuid.uuid4().hex[:12]}"

    def open_(backend: str) -> Index:
        index: Index
        if backend == "sqlite":
            index = SqliteIndex(tmp_path / "index" / "index.db")
        elif backend == "postgresql":
            index = PostgresIndex(request.getfixturevalue("postgres_index_url"), table=table)
        else:
            prefix = request.getfixturevalue("redis_prefix")
            index = RedisIndex(REDIS_URL, ttl_days=90, key_prefix=prefix)
        opened.append(index)
        return index

    yield open_
    for index in opened:
        index.close()


@pytest.fixture
def index(backend: str, opener: Callable[[str], Index]) -> Index:
    return opener(backend)


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (it was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --- every backend ------------------------------------------------------------------------


def test_an_empty_index(index: Index) -> None:
    assert index.query("w") == []
    assert index.writers() == []
    assert index.keys() == set()
    assert index.count() == 0
    assert index.last_sequence("w") == -1


def test_query_answers_entries_by_start_time_then_sequence(index: Index) -> None:
    published = [entry("w", 3, 100, 150), entry("w", 1, 300, 400), entry("w", 2, 100, 120)]
    for e in published:
        index.publish(e)

    found = index.query("w")

    assert [(e.start_time, e.page_sequence) for e in found] == [(100, 2), (100, 3), (300, 1)]
    assert found == sorted(published, key=lambda e: (e.start_time, e.page_sequence))
    assert found[0] == published[2]  # every field back as published


def test_query_answers_pages_that_overlap_the_range(index: Index) -> None:
    pages = {
        "ends-before": entry("w", 1, 0, 99),
        "ends-at-since": entry("w", 2, 10, 100),
        "spans-since": entry("w", 3, 40, 150),  # starts before since, ends after it
        "inside": entry("w", 4, 120, 130),
        "starts-at-until": entry("w", 5, 200, 260),
        "starts-after": entry("w", 6, 201, 300),
    }
    for e in pages.values():
        index.publish(e)

    def names(found: list[IndexEntry]) -> list[str]:
        return [name for name, e in pages.items() if e in found]

    in_range = index.query("w", since=100, until=200)
    assert names(in_range) == ["ends-at-since", "spans-since", "inside", "starts-at-until"]
    assert names(index.query("w", since=151)) == ["starts-at-until", "starts-after"]
    assert names(index.query("w", until=39)) == ["ends-before", "ends-at-since"]
    assert len(index.query("w")) == len(pages)
    assert index.query("w", since=301) == []


def test_writers_are_kept_apart_even_with_colons_in_their_ids(index: Index) -> None:
    # in Redis, "a" and "a:1" share key prefixes: snapshot:a:1:… could be either's
    index.publish(entry("a", 1, 1))
    index.publish(entry("a:1", 1, 1))
    index.publish(entry("a:1:1", 7, 1))

    assert index.writers() == ["a", "a:1", "a:1:1"]
    assert [e.writer_id for e in index.query("a")] == ["a"]
    assert [e.writer_id for e in index.query("a:1")] == ["a:1"]
    assert index.last_sequence("a:1") == 1
    assert index.last_sequence("a:1:1") == 7
    assert index.count() == 3


def test_publish_of_the_same_sequence_replaces_the_entry(index: Index) -> None:
    first = entry("w", 5, 1000, 1100, key="w/first")
    again = entry("w", 5, 2000, 2100, key="w/again")  # another start time, too
    index.publish(entry("w", 4, 900))
    index.publish(first)
    index.publish(again)
    index.publish(again)  # the same entry twice: still one

    assert index.query("w") == [entry("w", 4, 900), again]
    assert index.query("w", until=1500) == [entry("w", 4, 900)]
    assert index.count() == 2
    assert index.keys() == {entry("w", 4, 900).page_key, "w/again"}


def test_writers_keys_count_and_last_sequence(index: Index) -> None:
    for e in [entry("b", 1, 10), entry("b", 9, 20), entry("b", 4, 30), entry("a", 0, 10)]:
        index.publish(e)

    assert index.writers() == ["a", "b"]
    assert index.keys() == {"b/10_1.pb.zst", "b/20_9.pb.zst", "b/30_4.pb.zst", "a/10_0.pb.zst"}
    assert index.count() == 4
    assert index.last_sequence("b") == 9
    assert index.last_sequence("a") == 0
    assert index.last_sequence("c") == -1


def test_replace_swaps_old_entries_for_the_new_one(index: Index) -> None:
    olds = [entry("w", 1, 100, 150), entry("w", 2, 160, 200), entry("w", 3, 210, 300)]
    for e in [*olds, entry("x", 1, 100)]:
        index.publish(e)
    merged = entry("w", 1, 100, 200, key="w/merged")  # takes the first one's sequence

    index.replace(olds[:2], merged)

    assert index.query("w") == [merged, olds[2]]
    assert index.query("x") == [entry("x", 1, 100)]
    assert index.keys() == {"w/merged", olds[2].page_key, entry("x", 1, 100).page_key}
    assert index.count() == 3
    assert index.last_sequence("w") == 3


def test_replace_keeps_an_entry_republished_since(index: Index) -> None:
    read = entry("w", 1, 100, key="w/read")  # what compaction read…
    index.publish(read)
    republished = entry("w", 1, 150, key="w/republished")  # …then the writer republished it
    index.publish(republished)

    index.replace([read], entry("w", 5, 100, 200, key="w/merged"))

    assert index.keys() == {"w/republished", "w/merged"}


def test_replace_with_nothing_old_is_a_publish(index: Index) -> None:
    index.replace([], entry("w", 1, 100))
    assert index.query("w") == [entry("w", 1, 100)]


def test_readers_see_the_old_entry_or_the_new_never_both_or_neither(index: Index) -> None:
    current = entry("w", 0, 1000)
    index.publish(current)
    done = threading.Event()
    seen: list[int] = []

    def swap() -> None:
        nonlocal current
        try:
            for seq in range(1, 101):
                new = entry("w", seq, 1000 + 10 * (seq % 2), 1100)
                index.replace([current], new)
                current = new
        finally:
            done.set()

    swapper = threading.Thread(target=swap)
    swapper.start()
    while not done.is_set():
        seen.append(len(index.query("w", since=900, until=2000)))
    swapper.join()

    assert seen, "the reader never ran while replace did"
    assert set(seen) == {1}
    assert index.query("w") == [current]
    assert index.count() == 1


# --- SQL backends ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", SQL_BACKENDS)
def test_a_failed_replace_keeps_the_old_entries(index: Index, backend: str) -> None:
    olds = [entry("w", 1, 100), entry("w", 2, 200)]
    for e in olds:
        index.publish(e)
    broken = IndexEntry(**{**entry("w", 3, 100).__dict__, "page_key": None})

    with pytest.raises(IndexError_, match=rf"^{backend} index .*: replace: .*page_key"):
        index.replace(olds, broken)

    assert index.query("w") == olds
    assert index.count() == 2


@pytest.mark.parametrize("backend", SQL_BACKENDS)
def test_the_table_has_the_writer_start_time_index(index: Index) -> None:
    assert isinstance(index, SqlIndex)
    indexes = sa.inspect(index.engine).get_indexes(index.table.name)
    assert [i["column_names"] for i in indexes] == [["writer_id", "start_time"]]
    primary = sa.inspect(index.engine).get_pk_constraint(index.table.name)
    assert primary["constrained_columns"] == ["writer_id", "page_sequence"]


@pytest.mark.parametrize("backend", SQL_BACKENDS)
def test_a_second_index_on_the_same_table_sees_the_entries(
    opener: Callable[[str], Index], backend: str
) -> None:
    first = opener(backend)
    first.publish(entry("w", 1, 100))
    second = opener(backend)  # the table is there: opening it again changes nothing

    second.publish(entry("w", 2, 200))

    assert first.query("w") == [entry("w", 1, 100), entry("w", 2, 200)]
    assert second.count() == 2


# --- SQLite ---------------------------------------------------------------------------------


def test_sqlite_is_in_wal_mode_and_readers_do_not_wait_for_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    index = SqliteIndex(f"sqlite:///{path}")
    try:
        index.publish(entry("w", 1, 100))
        other = sqlite3.connect(path, isolation_level=None)
        try:
            assert other.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            other.execute("BEGIN IMMEDIATE")  # another process writing, not yet committed
            other.execute(
                "INSERT INTO snapshot_pages VALUES ('w', 2, 'k', 200, 200, 1, 1, 1, 'ndjson', "
                "'none')"
            )
            started = time.monotonic()
            assert index.query("w") == [entry("w", 1, 100)]
            assert time.monotonic() - started < 1
            other.execute("COMMIT")
        finally:
            other.close()
        assert [e.page_sequence for e in index.query("w")] == [1, 2]
    finally:
        index.close()


def test_sqlite_is_shared_with_another_process(tmp_path: Path) -> None:
    path = tmp_path / "index.db"
    index = SqliteIndex(path)
    try:
        index.publish(entry("w", 1, 100))
        script = (
            "import sys\n"
            "from ripple.snapshotter.index.sqlite import SqliteIndex\n"
            "from tests.snapshotter.helpers import entry\n"
            "index = SqliteIndex(sys.argv[1])\n"
            "print(index.count())\n"
            "index.replace(index.query('w'), entry('w', 2, 100, 300))\n"
            "index.close()\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script, str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=Path(__file__).parents[2],
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "1"  # it saw what this process published
        assert index.query("w") == [entry("w", 2, 100, 300)]  # and this one sees its change
    finally:
        index.close()


def test_sqlite_that_cannot_be_made_is_an_index_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(IndexError_, match=r"^sqlite index .*file.*: open: "):
        SqliteIndex(tmp_path / "file" / "index.db")
    with pytest.raises(IndexError_, match=r"^sqlite index .*: open: use a file"):
        SqliteIndex("sqlite:///:memory:")


# --- Redis ----------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["redis"])
def test_redis_entries_expire_after_ttl_days(
    index: Index, redis_server: Server, redis_prefix: str
) -> None:
    assert isinstance(index, RedisIndex)
    e = entry("w", 1, 100)
    index.publish(e)

    key = index.entry_key(e)
    assert key == f"{redis_prefix}w:100:1"
    assert 0 < redis_server.ttl(key) <= 90 * 86_400
    assert 0 < redis_server.ttl(index.pages_key("w")) <= 90 * 86_400
    assert IndexEntry.from_json(redis_server.get(key)) == e  # the value is the entry's JSON

    forever = RedisIndex(REDIS_URL, ttl_days=0, key_prefix=redis_prefix)
    try:
        forever.publish(e)
        assert redis_server.ttl(key) == -1  # no expiry
        assert redis_server.ttl(index.pages_key("w")) == -1
    finally:
        forever.close()


@pytest.mark.parametrize("backend", ["redis"])
def test_redis_drops_expired_entries(index: Index, redis_server: Server) -> None:
    assert isinstance(index, RedisIndex)
    kept, expiring, deleted = entry("w", 1, 100), entry("w", 2, 200), entry("w", 3, 300)
    for e in (kept, expiring, deleted):
        index.publish(e)
    redis_server.pexpire(index.entry_key(expiring), 1)
    redis_server.delete(index.entry_key(deleted))
    wait_for(lambda: not redis_server.exists(index.entry_key(expiring)), "the entry to expire")

    assert index.last_sequence("w") == 1  # the highest live one
    assert index.query("w") == [kept]
    assert index.count() == 1
    assert index.keys() == {kept.page_key}
    assert redis_server.zrange(index.pages_key("w"), 0, -1) == [index.entry_key(kept)]
    assert redis_server.zrange(index.sequences_key("w"), 0, -1) == [index.entry_key(kept)]


@pytest.mark.parametrize("backend", ["redis"])
def test_redis_forgets_writers_whose_entries_all_expired(
    index: Index, redis_server: Server
) -> None:
    assert isinstance(index, RedisIndex)
    index.publish(entry("gone", 1, 100))
    index.publish(entry("here", 1, 100))
    # what expiry does: the sorted sets expire with the last entry written
    redis_server.delete(
        index.entry_key(entry("gone", 1, 100)),
        index.pages_key("gone"),
        index.sequences_key("gone"),
    )

    assert index.writers() == ["here"]
    assert not redis_server.sismember(index.writers_key, "gone")
    assert index.query("gone") == []
    assert index.last_sequence("gone") == -1
    index.publish(entry("gone", 2, 200))  # a writer that comes back is listed again
    assert index.writers() == ["gone", "here"]


@pytest.mark.parametrize("backend", ["redis"])
def test_redis_entry_that_is_not_one_is_an_index_error(index: Index, redis_server: Server) -> None:
    assert isinstance(index, RedisIndex)
    index.publish(entry("w", 1, 100))
    key = index.entry_key(entry("w", 1, 100))
    redis_server.set(key, "not json")

    with pytest.raises(IndexError_, match=rf"^redis index redis://127.0.0.1:6379/0: read: {key} "):
        index.query("w")


def test_redis_prefix_must_end_with_a_colon() -> None:
    with pytest.raises(IndexError_, match="key_prefix 'snapshot' must end with ':'"):
        RedisIndex(REDIS_URL, key_prefix="snapshot")


# --- unreachable servers, open_index --------------------------------------------------------


@pytest.mark.parametrize(
    ("backend", "url"),
    [
        ("redis", f"redis://:{PASSWORD}@127.0.0.1:{{port}}/0"),
        ("postgresql", f"postgresql://ripple:{PASSWORD}@127.0.0.1:{{port}}/ripple"),
        ("postgresql", f"postgres://ripple:{PASSWORD}@127.0.0.1:{{port}}/ripple"),
    ],
)
def test_an_unreachable_server_is_an_index_error_at_once(backend: str, url: str) -> None:
    port = closed_port()
    started = time.monotonic()
    opening = RedisIndex if backend == "redis" else PostgresIndex
    with pytest.raises(IndexError_) as caught:
        opening(url.format(port=port))

    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert message.startswith(f"{backend} index {backend}://")
    assert f"127.0.0.1:{port}" in message
    assert PASSWORD not in message
    assert "\n" not in message
    assert "refused" in message.lower()


def test_postgres_url_and_table_are_checked() -> None:
    with pytest.raises(IndexError_, match=r"^postgresql index .*: open: not a postgresql"):
        PostgresIndex("sqlite:///index.db")
    with pytest.raises(IndexError_, match=r"^postgresql index .*: open: table name 'a-b'"):
        PostgresIndex("postgresql://postgres@127.0.0.1/x", table="a-b")


def test_open_index_opens_sqlite_under_the_snapshotter_directory(
    snapshot_settings: SnapshotterSettings,
) -> None:
    index = open_index(snapshot_settings)
    try:
        assert isinstance(index, SqliteIndex)
        assert index.path == snapshot_settings.directory / "index.db"
        assert index.path.exists()
    finally:
        index.close()


@pytest.mark.parametrize(
    "backend", ["redis", pytest.param("postgresql", marks=pytest.mark.postgresql)]
)
def test_open_index_opens_the_configured_server(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "redis":
        request.getfixturevalue("redis_server")
        url = REDIS_URL
    else:
        url = request.getfixturevalue("postgres_index_url").replace("postgresql://", "postgres://")
    settings = SnapshotterSettings.embedded(
        tmp_path, index=backend, index_url=url, index_ttl_days=7
    )
    index = open_index(settings)
    try:
        assert index.backend == backend
        if isinstance(index, RedisIndex):
            assert index.ttl_seconds == 7 * 86_400
            assert index.key_prefix == "snapshot:"
        else:
            assert isinstance(index, PostgresIndex)
            assert index.table.name == "snapshot_pages"
            assert index.count() == 0  # the table was made
    finally:
        index.close()
