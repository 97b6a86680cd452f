"""`ripple subscription create | list | pull | ack | delete | expire`, run as a user would (the
installed command, in its own process) on SQLite and PostgreSQL, while this process stores
events as the pipeline would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ripple.config import ENVIRONMENT_VARIABLES
from ripple.metabase import Metabase
from ripple.subscriptions import SubscriptionStore, compact_event
from tests.subscriptions import TOPIC, deliveries

RIPPLE = Path(sys.executable).with_name("ripple")


class Ripple:
    """The `ripple` command against the test's metabase."""

    def __init__(self, db: Metabase, cwd: Path) -> None:
        self.url = db.url.render_as_string(hide_password=False)
        self.cwd = cwd

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        environ = {k: v for k, v in os.environ.items() if k not in ENVIRONMENT_VARIABLES}
        environ.update(
            RIPPLE_DATA_DIR=str(self.cwd / "data"),
            RIPPLE_DATABASE_URL=self.url,
            COLUMNS="250",  # keep rich from wrapping
        )
        return subprocess.run(
            [str(RIPPLE), *args],
            cwd=self.cwd,
            env=environ,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def ok(self, *args: str) -> str:
        result = self(*args)
        assert result.returncode == 0, result.stderr
        return result.stdout

    def pull(self, *args: str) -> dict[str, Any]:
        return json.loads(self.ok("subscription", "pull", *args))  # type: ignore[no-any-return]


@pytest.fixture
def ripple(db: Metabase, tmp_path: Path) -> Ripple:
    return Ripple(db, tmp_path)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_create_pull_ack_round_trip(ripple: Ripple, db: Metabase) -> None:
    out = ripple.ok("subscription", "create", "audit", "--topic", TOPIC)
    assert out.strip() == f"subscription audit to topic {TOPIC}: format s3, events kept 7 days"
    assert ripple.pull("audit") == {"next_marker": "", "is_truncated": False, "Records": []}

    sent = deliveries(3)
    assert SubscriptionStore(db).store(TOPIC, sent, 7) == 3

    first = ripple.pull("audit", "--max-entries", "2")
    assert first["is_truncated"] is True
    assert first["Records"] == [{**d.event, "eventId": d.event_id} for d in sent[:2]]
    rest = ripple.pull("audit", "--marker", first["next_marker"], "--max-entries", "2")
    assert [r["eventId"] for r in rest["Records"]] == ["evt-0002"]
    assert rest["is_truncated"] is False
    assert int(rest["next_marker"]) > int(first["next_marker"])

    out = ripple.ok("subscription", "ack", "audit", "evt-0000", "evt-0002")
    assert out.strip() == "acknowledged 2 events"
    left = ripple.pull("audit")
    assert [r["eventId"] for r in left["Records"]] == ["evt-0001"]
    assert left["next_marker"] == first["next_marker"]


def test_compact_subscription(ripple: Ripple, db: Metabase) -> None:
    out = ripple.ok(
        "subscription", "create", "small", "--topic", TOPIC, "--format", "compact",
        "--retention-days", "2",
    )  # fmt: skip
    assert "format compact, events kept 2 days" in out
    sent = deliveries(2)
    SubscriptionStore(db).store(TOPIC, sent, 7)
    page = ripple.pull("small")
    assert page == {
        "next_marker": page["next_marker"],
        "is_truncated": False,
        "events": [compact_event(d.event, d.event_id) for d in sent],
    }
    ripple.ok("subscription", "ack", "small", "evt-0001")
    assert [e["id"] for e in ripple.pull("small")["events"]] == ["evt-0000"]


def test_list_update_and_delete(ripple: Ripple, db: Metabase) -> None:
    ripple.ok("subscription", "create", "b", "--topic", TOPIC)
    ripple.ok("subscription", "create", "a", "--topic", "projects/x/topics/other")
    ripple.ok("subscription", "create", "b", "--topic", TOPIC, "--format", "compact")
    lines = [json.loads(line) for line in ripple.ok("subscription", "list").splitlines()]
    assert lines == [
        {"name": "a", "topic": "projects/x/topics/other", "format": "s3",
         "events_retention_days": 7},
        {"name": "b", "topic": TOPIC, "format": "compact", "events_retention_days": 7},
    ]  # fmt: skip
    only = ripple.ok("subscription", "list", "--topic", TOPIC).splitlines()
    assert [json.loads(line)["name"] for line in only] == ["b"]

    SubscriptionStore(db).store(TOPIC, deliveries(2), 7)
    out = ripple.ok("subscription", "delete", "b")
    assert out.strip() == "deleted subscription b and its 2 events"
    names = [json.loads(line)["name"] for line in ripple.ok("subscription", "list").splitlines()]
    assert names == ["a"]


def test_expire(ripple: Ripple, db: Metabase) -> None:
    ripple.ok("subscription", "create", "audit", "--topic", TOPIC, "--retention-days", "1")
    db.clock = lambda: datetime.now(UTC) - timedelta(days=2)
    SubscriptionStore(db).store(TOPIC, deliveries(2), 7)
    db.clock = lambda: datetime.now(UTC)
    SubscriptionStore(db).store(TOPIC, deliveries(1, first=2), 8)
    assert ripple.ok("subscription", "expire").strip() == "expired 2 events"
    assert [r["eventId"] for r in ripple.pull("audit")["Records"]] == ["evt-0002"]


def test_errors_are_one_line(ripple: Ripple, db: Metabase) -> None:
    line = one_line_error(ripple("subscription", "pull", "nope"))
    assert "no subscription 'nope'" in line
    assert "ripple subscription create nope --topic TOPIC" in line

    line = one_line_error(ripple("subscription", "create", "bad name", "--topic", TOPIC))
    assert "subscription name 'bad name' must be 1 to 255 letters" in line

    usage = ripple("subscription", "create", "x", "--topic", TOPIC, "--format", "xml")
    assert usage.returncode == 2  # click's usage error
    assert usage.stderr.strip().splitlines()[-1] == (
        "Error: Invalid value for '--format': 'xml' is not one of 's3', 'compact'."
    )

    line = one_line_error(
        ripple("subscription", "create", "x", "--topic", TOPIC, "--retention-days", "0")
    )
    assert "events_retention_days must be a whole number of days from 1 to 3650, got 0" in line

    ripple.ok("subscription", "create", "x", "--topic", TOPIC)
    line = one_line_error(ripple("subscription", "create", "x", "--topic", "projects/a/topics/b"))
    assert f"exists for topic '{TOPIC}'" in line

    line = one_line_error(ripple("subscription", "pull", "x", "--max-entries", "1001"))
    assert "max-entries must be a whole number from 1 to 1000, got 1001" in line
    line = one_line_error(ripple("subscription", "pull", "x", "--marker", "abc"))
    assert "marker 'abc'" in line

    SubscriptionStore(db).store(TOPIC, deliveries(1), 7)
    line = one_line_error(ripple("subscription", "ack", "x", "evt-0000", "evt-9999"))
    assert line.endswith(
        "acknowledged 1 of 2 events; subscription x has no unacknowledged event 'evt-9999'"
    )
    assert ripple.pull("x")["Records"] == []

    line = one_line_error(ripple("subscription", "delete", "nope"))
    assert "no subscription 'nope'" in line


def test_an_unmigrated_metabase_says_what_to_do(tmp_path: Path) -> None:
    fresh = Metabase(f"sqlite:///{tmp_path / 'fresh.db'}")
    try:
        line = one_line_error(Ripple(fresh, tmp_path)("subscription", "list"))
    finally:
        fresh.dispose()
    assert "no such table: subscriptions" in line
    assert "ripple db upgrade" in line
