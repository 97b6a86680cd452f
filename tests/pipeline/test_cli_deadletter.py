"""`ripple deadletter list | replay [--destination D]` on SQLite and PostgreSQL, over dead
letters the pipeline's retry queue buried."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ripple.cli import cli
from ripple.metabase import Metabase
from ripple.pipeline.queue import RetryQueue
from tests.pipeline.fakes import delivery

Invoke = Callable[..., Result]  # ripple(*args): the command's result


@pytest.fixture
def ripple(db: Metabase, runner: CliRunner) -> Invoke:
    env = {"RIPPLE_DATABASE_URL": db.url.render_as_string(hide_password=False), "COLUMNS": "250"}

    def invoke(*args: str) -> Result:
        result = runner.invoke(cli, list(args), env=env)
        assert result.exception is None or isinstance(result.exception, SystemExit), result
        return result

    return invoke


@pytest.fixture
def queue(db: Metabase) -> RetryQueue:
    queue = RetryQueue(db.writer)
    queue.bury("hooks", [(delivery(1), "HTTP 404 from http://127.0.0.1:1/x")])
    queue.bury("hooks", [(delivery(2), "HTTP 410 from http://127.0.0.1:1/x")], attempts=3)
    queue.bury("projects/p/topics/t", [(delivery(3, bucket="logs"), "NOT_FOUND: no topic")])
    return queue


def test_list_shows_every_dead_letter_oldest_first(ripple: Invoke, queue: RetryQueue) -> None:
    result = ripple("deadletter", "list")
    assert result.exit_code == 0, result.output
    assert "3 dead letters" in result.output
    lines = [line for line in result.output.splitlines() if "HTTP 4" in line or "NOT_FOUND" in line]
    assert [line.split("│")[1].strip() for line in lines] == [
        "hooks",
        "hooks",
        "projects/p/topics/t",
    ]
    assert "photos/k1" in lines[0]
    assert "HTTP 404" in lines[0]
    assert "logs/k3" in lines[2]


def test_list_json_for_one_destination(ripple: Invoke, queue: RetryQueue) -> None:
    result = ripple("deadletter", "list", "--destination", "hooks", "--json")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert [(r["event_id"], r["attempts"], r["reason"]) for r in rows] == [
        (delivery(1).event_id, 1, "HTTP 404 from http://127.0.0.1:1/x"),
        (delivery(2).event_id, 3, "HTTP 410 from http://127.0.0.1:1/x"),
    ]
    assert rows[0]["event"] == delivery(1).event
    assert (rows[0]["bucket"], rows[0]["key"], rows[0]["event_name"]) == (
        "photos",
        "k1",
        "ObjectCreated:Put",
    )


def test_list_limit_says_there_are_more(ripple: Invoke, queue: RetryQueue) -> None:
    result = ripple("deadletter", "list", "--limit", "1")
    assert result.exit_code == 0, result.output
    assert "3 dead letters" in result.output
    assert "showing the oldest 1; use --limit to see more" in result.output


def test_replay_one_destination_puts_its_events_back_in_its_queue(
    ripple: Invoke, queue: RetryQueue
) -> None:
    result = ripple("deadletter", "replay", "--destination", "hooks")
    assert result.exit_code == 0, result.output
    assert "replayed 2 dead letters of hooks into the retry queues" in result.output
    assert [e.event_id for e in queue.due("hooks", now_ns=2**62)] == [
        delivery(1).event_id,
        delivery(2).event_id,
    ]
    assert [e.attempts for e in queue.due("hooks", now_ns=2**62)] == [0, 0]
    assert queue.dead_count("hooks") == 0
    assert queue.dead_count() == 1  # the other destination's dead letter stays

    again = ripple("deadletter", "replay", "--destination", "hooks")
    assert "no dead letters of hooks to replay" in again.output


def test_replay_all_and_list_when_empty(ripple: Invoke, queue: RetryQueue) -> None:
    assert "replayed 3 dead letters into" in ripple("deadletter", "replay").output
    assert queue.length() == 3
    assert "no dead letters" in ripple("deadletter", "list").output


def test_an_unmigrated_metabase_is_a_one_line_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    result = CliRunner().invoke(cli, ["deadletter", "list"], env={"RIPPLE_DATABASE_URL": url})
    assert result.exit_code == 1
    assert "cannot read the dead letters in the metabase at sqlite:///" in result.output
    assert "ripple db upgrade" in result.output


def test_purge_deletes_one_objects_dead_letters(ripple: Invoke, queue: RetryQueue) -> None:
    result = ripple("deadletter", "purge", "--destination", "hooks", "--object", "photos/k2")
    assert result.exit_code == 0, result.output
    assert "deleted 1 dead letters of hooks of photos/k2" in result.output
    assert [d.event_id for d in queue.dead()] == [delivery(1).event_id, delivery(3).event_id]
    result = ripple("deadletter", "purge", "--destination", "hooks")
    assert "deleted 1 dead letters of hooks" in result.output
    assert queue.dead_count() == 1
