"""`run_lifecycle` at scale and under trouble: batches of at most `batch` rows (one key's
versions split across them, oldest first), the bounded scan across page boundaries, a
bucket that fails (deleted mid-run, a stored rule that no longer reads) skipped and
counted while the others are applied, and `cancelled` obeyed on every page read. Rules at
the edges of a date, and stored rules that no longer read: test_lifecycle_bounds.py."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from ripple.metabase import (
    Versioning,
    delete_object,
    lifecycle_apply,
    lifecycle_scan,
    run_lifecycle,
)
from ripple.metabase.schema import buckets, objects
from tests.changestream.conftest import read_all, tag_of
from tests.metabase.helpers import DAY, configure, rule, statuses
from tests.metabase.steps import T0, World


def transactions_of(records: list[dict[str, Any]], mod_type: str) -> list[int]:
    """Rows of `mod_type` per transaction, in commit order."""
    sizes: dict[str, int] = {}
    for record in records:
        if record["mod_type"] == mod_type:
            assert record["is_system_transaction"] is True
            txn = record["server_transaction_id"]
            sizes[txn] = sizes.get(txn, 0) + len(record["mods"])
    return list(sizes.values())


def test_batches_are_bounded(world: World, stream: str) -> None:
    bucket = world.bucket()
    for i in range(5):
        world.put(bucket, f"k{i}")
    configure(world, bucket, rule("expire-all", Expiration={"Days": 1}))
    seen: list[int] = []
    result = run_lifecycle(world.db, now=T0 + 5 * DAY, batch=2, progress=seen.append)
    assert (result.expired, result.transactions) == (5, 3)
    assert seen == [2, 2, 1]
    records = read_all(world.db, stream)
    for record in records:
        if record["mod_type"] == "DELETE":
            assert tag_of(record) == {
                "operation": "lifecycle-expiration",
                "lifecycle_rule": "expire-all",
            }
    assert sorted(transactions_of(records, "DELETE")) == [1, 2, 2]


def test_one_keys_versions_split_across_batches(
    world: World,
    stream: str,
) -> None:
    bucket = world.bucket(versioning=Versioning.ENABLED)
    versions = [world.put(bucket, "a") for _ in range(6)]  # 5 noncurrent, all due
    configure(world, bucket, rule(NoncurrentVersionExpiration={"NoncurrentDays": 1}))
    freed: list[int] = []
    result = run_lifecycle(
        world.db,
        now=T0 + 5 * DAY,
        batch=2,
        removed=lambda rows: freed.extend(r.version for r in rows),
    )
    assert (result.noncurrent_deleted, result.transactions) == (5, 3)
    assert transactions_of(read_all(world.db, stream), "DELETE") == [2, 2, 1]
    assert freed == [v.version for v in versions[:5]]  # oldest first
    assert [r.version_id for r in world.rows()] == [versions[-1].version_id]


def test_scan_across_pages_keeps_newer_noncurrent_versions(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lifecycle_scan, "PAGE", 2)  # keys' versions straddle page ends
    bucket = world.bucket(versioning=Versioning.ENABLED)
    a = [world.put(bucket, "a") for _ in range(7)]
    delete_object(world.db, world.loc(bucket, "b"))  # a lone marker between two pages
    c = [world.put(bucket, "c") for _ in range(2)]
    world.put(bucket, "d")
    delete_object(world.db, world.loc(bucket, "d"))  # a marker over a version: kept
    configure(
        world,
        bucket,
        rule(
            NoncurrentVersionExpiration={"NoncurrentDays": 1, "NewerNoncurrentVersions": 2},
            Expiration={"ExpiredObjectDeleteMarker": True},
        ),
    )
    result = run_lifecycle(world.db, now=T0 + 5 * DAY, batch=3)
    # a: 6 noncurrent, the 2 newest kept; c and d: one noncurrent each, kept
    assert (result.noncurrent_deleted, result.delete_markers_removed) == (4, 1)
    assert result.transactions == 3  # a's 4 in batches of 3 and 1; then b's marker
    assert [r.version_id for r in world.rows() if r.object_key == "a"] == [
        v.version_id for v in a[:3:-1]
    ]
    assert [k for k, _ in statuses(world)] == ["a", "a", "a", "c", "c", "d", "d"]
    assert [r.version_id for r in world.rows() if r.object_key == "c"] == [
        v.version_id for v in c[::-1]
    ]


# --- failures ------------------------------------------------------------------------


def drop_bucket(world: World, name: str) -> None:
    """Gone as if deleted by another client (rows first: they reference the bucket)."""
    with world.db.write() as conn:
        conn.execute(sa.delete(objects).where(objects.c.bucket_name == name))
        conn.execute(sa.delete(buckets).where(buckets.c.name == name))


def test_a_failing_bucket_is_skipped_and_counted(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    names = ("a-gone", "b-broken", "c-fine")
    for name in names:
        bucket = world.bucket(name)
        world.put(bucket, "k")
        configure(
            world,
            bucket,
            rule("r1", Expiration={"Days": 1}),
            rule("r2", Filter={"Prefix": "x"}, Expiration={"Days": 1}),
        )
    with world.db.write() as conn:  # a stored configuration that no longer reads
        conn.execute(
            sa.update(buckets)
            .where(buckets.c.name == "b-broken")
            .values(lifecycle=[{"ID": "bad", "Status": "On", "Expiration": {"Days": 1}}])
        )
    commit = lifecycle_apply.RuleRun._commit

    def deleted_first(run: Any, *args: Any) -> None:
        if run.loc.bucket_name == "a-gone":
            drop_bucket(world, "a-gone")  # after the scan, before the write
        commit(run, *args)

    monkeypatch.setattr(lifecycle_apply.RuleRun, "_commit", deleted_first)
    reasons: list[str] = []
    with caplog.at_level(logging.WARNING, logger="ripple.lifecycle"):
        result = run_lifecycle(world.db, now=T0 + 5 * DAY, rule_failed=reasons.append)
    assert (result.failed, result.rules_failed, result.expired, result.transactions) == (
        2,
        2,
        1,
        1,
    )
    assert not result.cancelled
    assert [r.bucket_name for r in world.rows()] == ["b-broken"]
    assert reasons == ["bucket_deleted", "invalid"]  # a-gone's r2 is not tried
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(messages) == 2
    assert "bucket 'a-gone': rule 'r1' failed: bucket 'a-gone' does not exist" in messages[0]
    assert "bucket 'b-broken': rule 'bad' skipped: today's checks refuse it: " in messages[1]


# --- cancelling ------------------------------------------------------------------------


@pytest.fixture
def pages_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the pages the scan reads, two rows a page."""
    monkeypatch.setattr(lifecycle_scan, "PAGE", 2)
    read: list[int] = []
    pages = lifecycle_scan._pages

    def counted(*args: Any) -> Iterator[list[Any]]:
        for page in pages(*args):
            read.append(len(page))
            yield page

    monkeypatch.setattr(lifecycle_scan, "_pages", counted)
    return read


def test_cancelled_scan_stops_on_a_page(world: World, pages_read: list[int]) -> None:
    bucket = world.bucket()
    for i in range(10):
        world.put(bucket, f"k{i:02}")
    configure(world, bucket, rule(Expiration={"Days": 30}))  # nothing due
    result = run_lifecycle(world.db, now=T0 + DAY, cancelled=lambda: True)
    assert result.cancelled
    assert pages_read == []
    result = run_lifecycle(world.db, now=T0 + DAY, cancelled=lambda: len(pages_read) >= 2)
    assert result.cancelled
    assert pages_read == [2, 2]  # not the 6 pages of a whole scan
    pages_read.clear()
    assert not run_lifecycle(world.db, now=T0 + DAY).cancelled
    assert pages_read == [2, 2, 2, 2, 2, 0]


def test_cancelled_run_stops_between_batches(world: World) -> None:
    bucket = world.bucket()
    for i in range(4):
        world.put(bucket, f"k{i}")
    configure(world, bucket, rule(Expiration={"Days": 1}))
    batches: list[int] = []
    result = run_lifecycle(
        world.db,
        now=T0 + 5 * DAY,
        batch=2,
        progress=batches.append,
        cancelled=lambda: len(batches) == 1,
    )
    assert result.cancelled
    assert (result.expired, result.transactions) == (2, 1)
    assert len(world.rows()) == 2
