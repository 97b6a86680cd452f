"""The journal's record expiration over a table laid out as Spark's file sink lays it out
(its log's format as Spark 4 writes it): a bucket's days past its expiration leave the log
first, whole log files replaced, and leave the disk a run later; other buckets, later days,
lines it does not know and locations that are not local are left alone."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import orjson
import pytest

from ripple.notifications.journal_expiry import expired, journal_table, prune_journal

TODAY = date(2026, 11, 28)


def _entry(table: Path, partition: str, name: str) -> bytes:
    path = table / partition / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PAR1")
    return orjson.dumps(
        {
            "path": f"file://{path}",
            "size": 4,
            "isDir": False,
            "modificationTime": 1795880268117,
            "blockReplication": 1,
            "blockSize": 33554432,
            "action": "add",
        }
    )


def _log(table: Path, name: str, *entries: bytes) -> Path:
    log = table / "_spark_metadata" / name
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(b"\n".join([b"v1", *entries]))
    return log


def _listed(table: Path) -> list[str]:
    """The files the log lists, relative to the table."""
    found = []
    for log in sorted((table / "_spark_metadata").iterdir()):
        for line in log.read_bytes().split(b"\n")[1:]:
            if line.startswith(b"{"):
                found.append(orjson.loads(line)["path"].removeprefix(f"file://{table}/"))
    return found


@pytest.mark.parametrize(
    ("day", "days", "gone"),
    [
        (date(2026, 11, 20), 7, True),  # its last record is 7 days and a bit old
        (date(2026, 11, 21), 7, False),  # its last record may be under 7 days old
        (date(2026, 11, 27), 0, True),
        (date(2026, 11, 28), 0, False),
    ],
)
def test_a_day_expires_once_all_its_records_are_older(day: date, days: int, gone: bool) -> None:
    assert expired(day, days, TODAY) is gone


def test_expired_partitions_leave_the_log_then_the_disk(tmp_path: Path) -> None:
    table = Path(journal_table(str(tmp_path)))
    old_photos = "record_date=2026-11-01/bucket=photos"
    new_photos = "record_date=2026-11-27/bucket=photos"
    old_docs = "record_date=2026-11-01/bucket=docs"
    _log(table, "0", _entry(table, old_photos, "a.parquet"), _entry(table, old_docs, "b.parquet"))
    _log(table, "1", _entry(table, old_photos, "c.parquet"))  # only expired files: emptied
    _log(
        table,
        "2.compact",
        _entry(table, old_photos, "a.parquet"),
        _entry(table, new_photos, "d.parquet"),
    )
    garbage = "record_date=2026-10-01/bucket=photos"  # a crashed batch's files, never listed
    _entry(table, garbage, "e.parquet")

    first = prune_journal(str(tmp_path), {"photos": 7}, TODAY)
    assert first is not None
    assert first.dropped == 3
    assert first.unlisted == {old_photos}
    assert first.deleted == [garbage]  # never listed: nothing reads it
    assert _listed(table) == [f"{old_docs}/b.parquet", f"{new_photos}/d.parquet"]
    assert (table / "_spark_metadata" / "1").read_bytes() == b"v1"
    assert (table / old_photos / "a.parquet").is_file()  # a reader may still be at it
    assert not (table / "record_date=2026-10-01").exists()
    assert sorted(p.name for p in (table / "_spark_metadata").iterdir()) == ["0", "1", "2.compact"]

    second = prune_journal(str(tmp_path), {"photos": 7}, TODAY)
    assert second is not None
    assert second.dropped == 0
    assert second.deleted == [old_photos]
    assert not (table / old_photos).exists()
    assert (table / old_docs / "b.parquet").is_file()  # docs keeps its rows
    assert (table / new_photos / "d.parquet").is_file()


def test_without_expirations_nothing_changes(tmp_path: Path) -> None:
    table = Path(journal_table(str(tmp_path)))
    log = _log(table, "0", _entry(table, "record_date=2020-01-01/bucket=photos", "a.parquet"))
    before = log.read_bytes()
    pruned = prune_journal(str(tmp_path), {"docs": 7}, TODAY)
    assert pruned is not None
    assert (pruned.dropped, pruned.deleted) == (0, [])
    assert log.read_bytes() == before


def test_lines_and_logs_it_does_not_know_are_left_alone(tmp_path: Path) -> None:
    table = Path(journal_table(str(tmp_path)))
    expired_entry = _entry(table, "record_date=2020-01-01/bucket=photos", "a.parquet")
    log = _log(table, "0", b"{not json", expired_entry, b'["a list"]')
    other = _log(table, "1", expired_entry)
    other.write_bytes(b"v2\n" + expired_entry)  # a later format
    pruned = prune_journal(str(tmp_path), {"photos": 7}, TODAY)
    assert pruned is not None
    assert pruned.dropped == 1
    assert log.read_bytes() == b'v1\n{not json\n["a list"]'
    assert other.read_bytes() == b"v2\n" + expired_entry
    assert (table / "record_date=2020-01-01/bucket=photos/a.parquet").is_file()  # still listed


@pytest.mark.parametrize("location", ["hdfs://namenode/ripple", "s3a://bucket/journal"])
def test_a_location_that_is_not_local_is_not_pruned(location: str) -> None:
    assert prune_journal(location, {"photos": 7}, TODAY) is None


def test_a_file_url_is_pruned(tmp_path: Path) -> None:
    table = Path(journal_table(str(tmp_path)))
    _log(table, "0", _entry(table, "record_date=2020-01-01/bucket=photos", "a.parquet"))
    pruned = prune_journal(f"file://{tmp_path}", {"photos": 7}, TODAY)
    assert pruned is not None
    assert pruned.dropped == 1
