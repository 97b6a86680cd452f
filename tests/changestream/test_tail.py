"""Grouping a partition's records into transactions (`ripple.changestream.tail`)."""

from __future__ import annotations

from typing import Any

import pytest

from ripple.changestream.tail import transactions


def record(partition: int, position: int, last: bool) -> dict[str, Any]:
    return {
        "partition": partition,
        "position": position,
        "is_last_record_in_transaction_in_partition": last,
    }


def test_records_are_grouped_per_partition_until_each_transaction_ends() -> None:
    records = [record(0, 1, False), record(1, 1, True), record(0, 2, True), record(0, 3, True)]
    groups = [[(r["partition"], r["position"]) for r in g] for g in transactions(records)]
    assert groups == [[(1, 1)], [(0, 1), (0, 2)], [(0, 3)]]


def test_records_that_end_inside_a_transaction_are_left_out_or_refused() -> None:
    records = [record(0, 1, True), record(2, 2, False)]
    assert [len(g) for g in transactions(records)] == [1]
    with pytest.raises(RuntimeError, match=r"inside a transaction \(partitions 2\)"):
        list(transactions(records, strict=True))
