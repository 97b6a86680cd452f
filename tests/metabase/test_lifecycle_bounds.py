"""Lifecycle rules at the edges of a date (issue 24, 2.1), on SQLite and PostgreSQL: a rule
whose `Days` / `NoncurrentDays` / `DaysAfterInitiation` / `Date` would overflow a date is
refused when it is put (`InvalidArgument`), integers of any length are a refusal, never a
`ValueError`; the largest accepted values run at any `now` without a date overflowing in
Python or in a statement; and a stored rule that today's checks refuse (stored before the
bounds, or by hand) is logged, counted and skipped by `run_lifecycle`, while the bucket's
other rules and every other bucket are applied."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from ripple.metabase import Status, Versioning, get_bucket_lifecycle, lifecycle_apply, run_lifecycle
from ripple.metabase.errors import (
    InvalidArgument,
    LifecycleNotFound,
    MalformedLifecycle,
    MetabaseError,
)
from ripple.metabase.lifecycle import check_lifecycle, lifecycle_documents
from ripple.metabase.lifecycle_scan import midnight
from ripple.metabase.lifecycle_values import MAX_DAYS, MAX_SIZE
from ripple.metabase.schema import buckets
from ripple.metabase.uploads import begin_upload
from tests.metabase.helpers import DAY, configure, rule
from tests.metabase.steps import T0, World

HUGE = "9" * 5000  # past Python's 4,300-digit int() limit
END_OF_TIME = datetime(9999, 12, 31, 23, 59, tzinfo=UTC)


def store(world: World, name: str, lifecycle: Any) -> None:
    """A configuration written straight into `buckets.lifecycle`, past every check, as
    one stored before a check was added would be."""
    with world.db.write() as conn:
        conn.execute(sa.update(buckets).where(buckets.c.name == name).values(lifecycle=lifecycle))


# --- refused at PUT ---------------------------------------------------------------------

OVERFLOWING: list[tuple[dict[str, Any], type[MetabaseError], str]] = [
    (rule(Expiration={"Days": "999999999"}), InvalidArgument, "at most 1000000"),
    (rule(Expiration={"Days": MAX_DAYS + 1}), InvalidArgument, "would overflow a date"),
    (rule(Expiration={"Days": HUGE}), InvalidArgument, "at most 1000000"),
    (rule(Expiration={"Days": "-" + HUGE}), InvalidArgument, "must be a positive integer"),
    (rule(Expiration={"Days": "-1"}), InvalidArgument, "must be a positive integer"),
    (
        rule(NoncurrentVersionExpiration={"NoncurrentDays": "999999999"}),
        InvalidArgument,
        "'NoncurrentDays' for NoncurrentVersionExpiration action must be at most 1000000",
    ),
    (
        rule(AbortIncompleteMultipartUpload={"DaysAfterInitiation": "999999999"}),
        InvalidArgument,
        "'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be at most",
    ),
    (rule(Expiration={"Date": "10000-01-01T00:00:00Z"}), InvalidArgument, "to 9999-12-31"),
    (rule(Expiration={"Date": HUGE + "-01-01"}), InvalidArgument, "to 9999-12-31"),
    (rule(Expiration={"Date": "1969-12-31T00:00:00Z"}), InvalidArgument, "from 1970-01-01"),
    (rule(Expiration={"Date": "0001-01-01T00:00:00Z"}), InvalidArgument, "from 1970-01-01"),
    # offsets that carry the date across year 1 or 9999 (datetime's OverflowError before)
    (rule(Expiration={"Date": "0001-01-01T00:00:00+14:00"}), InvalidArgument, "from 1970"),
    (rule(Expiration={"Date": "9999-12-31T23:00:00-05:00"}), InvalidArgument, "to 9999"),
    (rule(Expiration={"Date": datetime(1, 1, 1, tzinfo=UTC)}), InvalidArgument, "from 1970"),
    (
        rule(Filter={"ObjectSizeGreaterThan": HUGE}, Expiration={"Days": 1}),
        InvalidArgument,
        f"'ObjectSizeGreaterThan' must be at most {MAX_SIZE}",
    ),
    (
        rule(Filter={"ObjectSizeLessThan": str(MAX_SIZE + 1)}, Expiration={"Days": 1}),
        InvalidArgument,
        "'ObjectSizeLessThan' must be at most",
    ),
    (
        rule(Filter={"ObjectSizeGreaterThan": "-1"}, Expiration={"Days": 1}),
        InvalidArgument,
        "must be a non-negative integer",
    ),
    (
        rule(NoncurrentVersionExpiration={"NoncurrentDays": 1, "NewerNoncurrentVersions": HUGE}),
        InvalidArgument,
        "between 1 and 100",
    ),
    # not whole numbers in ASCII digits: MalformedXML, whatever str.isdigit says
    (rule(Expiration={"Days": "²"}), MalformedLifecycle, "<Days> must be an integer, got '²'"),
    (rule(Expiration={"Days": "١٢"}), MalformedLifecycle, "<Days> must be an integer"),
    (rule(Expiration={"Days": "1_000"}), MalformedLifecycle, "<Days> must be an integer"),
    (rule(Expiration={"Days": " 7"}), MalformedLifecycle, "<Days> must be an integer"),
    (rule(Expiration={"Days": 7.0}), MalformedLifecycle, "<Days> must be an integer"),
]


@pytest.mark.parametrize(("bad", "error", "message"), OVERFLOWING)
def test_overflowing_values_are_refused_and_store_nothing(
    world: World, bad: dict[str, Any], error: type[MetabaseError], message: str
) -> None:
    bucket = world.bucket()
    configure(world, bucket, rule("kept", Expiration={"Days": 9}))
    with pytest.raises(error) as caught:
        configure(world, bucket, rule("other", Expiration={"Days": 1}), bad)
    assert type(caught.value) is error
    assert message in caught.value.message
    assert len(caught.value.message) < 200  # a huge value is not echoed whole
    assert [r.id for r in get_bucket_lifecycle(world.db, bucket)] == ["kept"]


def test_the_largest_values_are_accepted() -> None:
    rules = check_lifecycle(
        {
            "Rules": [
                rule(
                    "days",
                    Filter={"ObjectSizeGreaterThan": str(MAX_SIZE - 1)},
                    Expiration={"Days": "1000000"},
                    NoncurrentVersionExpiration={"NoncurrentDays": "0001000000"},
                    AbortIncompleteMultipartUpload={"DaysAfterInitiation": MAX_DAYS},
                ),
                rule("last", Expiration={"Date": "9999-12-31T00:00:00Z"}),
                rule("first", Expiration={"Date": "1970-01-01T00:00:00+00:00"}),
                rule("offset", Expiration={"Date": "2026-03-01T02:00:00+02:00"}),
            ]
        }
    )
    days, last, first, offset = rules
    assert (days.expiration_days, days.noncurrent_days, days.abort_days) == (MAX_DAYS,) * 3
    assert days.filter.size_greater_than == MAX_SIZE - 1
    assert last.document == {**rule("last"), "Expiration": {"Date": "9999-12-31T00:00:00Z"}}
    assert first.expiration_date == datetime(1970, 1, 1, tzinfo=UTC)
    assert offset.document is not None
    assert offset.document["Expiration"] == {"Date": "2026-03-01T00:00:00Z"}


# --- runs at the edges ------------------------------------------------------------------


def test_the_largest_ages_run_at_any_now(world: World) -> None:
    """`now - Days` before year 1: nothing is that old, and no date overflows, in Python or
    in a statement (the uploads' query gets the oldest bound that still is a date). Judged
    at 9999-12-31, a million days reaches back to year 7262: what 2026 wrote is due under
    every action, through the same statements."""
    bucket = world.bucket("bucket", versioning=Versioning.ENABLED)
    world.put(bucket, "k")
    world.put(bucket, "k")  # one noncurrent version
    begin_upload(world.db, world.loc(bucket, "u"))
    # Days whose cutoff is (a day after) 0001-01-01, and one day more
    oldest = (midnight(T0) - datetime(1, 1, 1, tzinfo=UTC)).days
    configure(
        world,
        bucket,
        rule("to-year-1", AbortIncompleteMultipartUpload={"DaysAfterInitiation": oldest}),
        rule(
            "past-year-1",
            Expiration={"Days": oldest + 1},
            NoncurrentVersionExpiration={"NoncurrentDays": oldest + 1},
            AbortIncompleteMultipartUpload={"DaysAfterInitiation": oldest + 1},
        ),
        rule(
            "largest",
            Expiration={"Days": MAX_DAYS},
            NoncurrentVersionExpiration={"NoncurrentDays": MAX_DAYS},
            AbortIncompleteMultipartUpload={"DaysAfterInitiation": MAX_DAYS},
        ),
        rule("last-date", Filter={"Prefix": "none/"}, Expiration={"Date": "9999-12-31"}),
    )
    before = world.rows()
    for now in (T0 + DAY, datetime(1, 1, 2, tzinfo=UTC)):
        result = run_lifecycle(world.db, now=now)
        assert (result.rules_failed, result.failed, result.changed) == (0, 0, 0)
    assert world.rows() == before
    result = run_lifecycle(world.db, now=END_OF_TIME)
    assert (result.rules_failed, result.uploads_aborted, result.delete_markers_created) == (0, 1, 1)
    # both versions of `k`: noncurrent since the marker, which the clock stamps in 2026
    assert result.noncurrent_deleted == 2
    assert [(r.object_key, r.status) for r in world.rows()] == [
        ("k", Status.DELETE_MARKER_VERSIONED)
    ]


# --- stored rules today's checks refuse -------------------------------------------------

# as an earlier ripple stored them (or a hand), each refused now for its own reason
STORED_BROKEN: list[tuple[Any, str]] = [
    (
        {"ID": "huge-days", "Status": "Enabled", "Filter": {}, "Expiration": {"Days": 999999999}},
        "rule 'huge-days' skipped: today's checks refuse it: 'Days' for Expiration action "
        "must be at most 1000000",
    ),
    (
        {
            "ID": "huge-noncurrent",
            "Status": "Enabled",
            "Filter": {},
            "NoncurrentVersionExpiration": {"NoncurrentDays": 999999999},
        },
        "rule 'huge-noncurrent' skipped: today's checks refuse it: 'NoncurrentDays'",
    ),
    (
        {
            "ID": "huge-abort",
            "Status": "Enabled",
            "Filter": {},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 999999999},
        },
        "rule 'huge-abort' skipped: today's checks refuse it: 'DaysAfterInitiation'",
    ),
    (
        # strftime("%Y") wrote year 1 as "1": not a date that reads back
        {"ID": "year-1", "Status": "Enabled", "Filter": {}, "Expiration": {"Date": "1-01-01"}},
        "rule 'year-1' skipped: today's checks refuse it: <Date> must be an ISO 8601 date",
    ),
    (
        {"Status": "Enabled", "Filter": {}, "Expiration": {"Days": 2**40}},
        "rule #5 (no ID) skipped: today's checks refuse it: 'Days' for Expiration",
    ),
    ("not a rule", "rule #6 (no ID) skipped: today's checks refuse it: each <Rule> must be"),
]


def test_a_stored_rule_that_no_longer_reads_is_skipped_logged_and_counted(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    broken, fine = world.bucket("a-broken"), world.bucket("b-fine")
    for bucket in (broken, fine):
        world.put(bucket, "keep")
        world.put(bucket, "tmp/x")
    configure(world, fine, rule("fine", Expiration={"Days": 1}))
    still_good = {"ID": "tmp", "Status": "Enabled", "Filter": {"Prefix": "tmp/"}}
    store(
        world,
        "a-broken",
        [raw for raw, _ in STORED_BROKEN]
        + [{**still_good, "Expiration": {"Days": 1}}]
        # disabled: does nothing, so is no failure, whatever it holds
        + [{**STORED_BROKEN[0][0], "ID": "off", "Status": "Disabled"}],
    )
    reasons: list[str] = []
    with caplog.at_level(logging.DEBUG, logger="ripple.lifecycle"):
        result = run_lifecycle(world.db, now=T0 + 5 * DAY, rule_failed=reasons.append)
    # the broken bucket's good rule and the other bucket's rule applied
    assert [(r.bucket_name, r.object_key) for r in world.rows()] == [("a-broken", "keep")]
    assert (result.expired, result.rules_failed, result.failed) == (3, len(STORED_BROKEN), 1)
    assert reasons == ["invalid"] * len(STORED_BROKEN)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == len(STORED_BROKEN)
    for record, (_, expected) in zip(warnings, STORED_BROKEN, strict=True):
        line = record.getMessage()
        assert line.startswith(f"lifecycle: project {broken.project_id}, bucket 'a-broken': ")
        assert expected in line
        assert "\n" not in line
        assert record.exc_info is None
    assert "Traceback" not in caplog.text


def test_a_configuration_that_is_no_list_is_skipped(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    dict_bucket, fine = world.bucket("a-dict"), world.bucket("b-fine")
    for bucket in (dict_bucket, fine):
        world.put(bucket, "k")
    configure(world, fine, rule(Expiration={"Days": 1}))
    store(world, "a-dict", {"Rules": [rule(Expiration={"Days": 1})]})
    with caplog.at_level(logging.WARNING, logger="ripple.lifecycle"):
        result = run_lifecycle(world.db, now=T0 + 5 * DAY)
    assert (result.expired, result.rules_failed, result.failed) == (1, 1, 1)
    assert [r.bucket_name for r in world.rows()] == ["a-dict"]
    assert "bucket 'a-dict': its configuration skipped: it is not a list of rules" in caplog.text
    with pytest.raises(LifecycleNotFound):  # and GET has no rules to answer
        lifecycle_documents(world.db, dict_bucket)


def test_get_answers_a_stored_rule_that_no_longer_reads(world: World) -> None:
    bucket = world.bucket()
    stored = [raw for raw, _ in STORED_BROKEN[:4]]
    store(world, "bucket", stored)
    assert lifecycle_documents(world.db, bucket) == stored
    with pytest.raises(InvalidArgument):  # the typed reading is strict
        get_bucket_lifecycle(world.db, bucket)


# --- rules that fail while applied ------------------------------------------------------


def test_a_rule_that_fails_while_applied_is_logged_counted_and_skipped(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An error that is the rule's own (here the database refusing a value, as PostgreSQL
    refuses a timestamp out of its range): one line naming the rule, no traceback, and
    the bucket's next rule and the other buckets still applied."""
    for name in ("a-failing", "b-fine"):
        bucket = world.bucket(name)
        world.put(bucket, "k")
        world.put(bucket, "tmp/k")
        configure(
            world,
            bucket,
            rule("bad", Expiration={"Days": 1}),
            rule("tmp", Filter={"Prefix": "tmp/"}, Expiration={"Days": 1}),
        )
    commit = lifecycle_apply.RuleRun._commit

    def refused(run: Any, *args: Any) -> None:
        if (run.loc.bucket_name, run.rule.id) == ("a-failing", "bad"):
            raise sa.exc.DataError(
                "DELETE FROM objects WHERE …",
                {"created_at": "…"},
                ValueError("timestamp out of range\nDETAIL: the SQL and its parameters"),
            )
        commit(run, *args)

    monkeypatch.setattr(lifecycle_apply.RuleRun, "_commit", refused)
    reasons: list[str] = []
    with caplog.at_level(logging.WARNING, logger="ripple.lifecycle"):
        result = run_lifecycle(world.db, now=T0 + 5 * DAY, rule_failed=reasons.append)
    assert [(r.bucket_name, r.object_key) for r in world.rows()] == [("a-failing", "k")]
    assert (result.expired, result.rules_failed, result.failed) == (3, 1, 1)
    assert reasons == ["error"]
    (record,) = caplog.records
    assert record.getMessage() == (
        f"lifecycle: project {world.project.id}, bucket 'a-failing': rule 'bad' failed: "
        "DataError: timestamp out of range"
    )
    assert record.exc_info is None


def test_the_database_away_ends_the_run(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """No rule's fault: the run ends (the schedule tries again at its next interval)."""
    for name in ("one", "two"):
        bucket = world.bucket(name)
        world.put(bucket, "k")
        configure(world, bucket, rule(Expiration={"Days": 1}))

    def away(*args: Any) -> None:
        raise sa.exc.OperationalError("SELECT 1", {}, ConnectionError("server closed"))

    monkeypatch.setattr(lifecycle_apply.RuleRun, "_commit", away)
    failed: list[str] = []
    with pytest.raises(sa.exc.OperationalError):
        run_lifecycle(world.db, now=T0 + 5 * DAY, rule_failed=failed.append)
    assert failed == []
    assert len(world.rows()) == 2
