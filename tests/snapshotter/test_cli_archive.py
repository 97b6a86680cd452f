"""`ripple snapshot replay | reconcile | compact` over a real archive, through click's runner:
the JSON lines of exactly a range, raw payloads, delivery to a webhook receiver on
127.0.0.1, the reports, and one-line errors for bad times, sizes, names and writers."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from ripple.cli import cli
from ripple.cli.snapshot_archive import commands
from ripple.config import Settings
from ripple.snapshotter.compact import parse_size
from ripple.snapshotter.index.sqlite import SqliteIndex
from ripple.snapshotter.service import Snapshotter
from ripple.snapshotter.settings import SnapshotterSettings
from ripple.snapshotter.storage import FilesystemStorage
from ripple.targets.guard import DestinationGuard, default_guard, set_default_guard
from tests.receiver import receiver

T0 = 1_760_000_000_000  # 2025-10-09T08:53:20Z


@click.group()
def snapshot() -> None:
    """The commands as `ripple snapshot` mounts them."""


for command in commands:
    snapshot.add_command(command)


def record(i: int) -> bytes:
    """An S3 event record, as a bucket notification snapshotter archives them."""
    return json.dumps(
        {"eventName": "ObjectCreated:Put", "s3": {"object": {"key": f"k{i}"}}, "n": i},
        separators=(",", ":"),
    ).encode()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """The default snapshotter's archive: writer "w" has 9 events one second apart in
    pages of 3 (the fifth is not UTF-8), writer "x" one page."""
    settings = SnapshotterSettings.embedded(tmp_path, max_events=3, max_age_seconds=3600.0)
    storage = FilesystemStorage(settings.pages_path)
    with Snapshotter(settings, storage, SqliteIndex(settings.index_location)) as snap:
        for i in range(9):
            payload = b"\xff\xfe binary" if i == 4 else record(i)
            snap.publish("w", payload, {"eventName": "ObjectCreated:Put"}, timestamp=T0 + i * 1000)
        snap.publish("x", b"other", timestamp=T0)
    return tmp_path


def run(data_dir: Path, *args: str, settings: Settings | None = None) -> Result:
    runner = CliRunner()
    return runner.invoke(snapshot, list(args), obj=settings or Settings(data_dir=data_dir))


def lines(result: Result) -> list[dict[str, object]]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def index_of(data_dir: Path) -> SqliteIndex:
    return SqliteIndex(SnapshotterSettings.embedded(data_dir).index_location)


def test_replay_prints_exactly_the_range_as_json_lines(data_dir: Path) -> None:
    result = run(data_dir, "replay", "--writer", "w", "--since", "2025-10-09T08:53:22Z",
                 "--until", str(T0 + 5000))  # fmt: skip
    assert result.exit_code == 0, result.output
    printed = lines(result)
    assert [p["timestamp"] for p in printed] == [T0 + i * 1000 for i in range(2, 6)]
    assert printed[0] == {
        "event_id": "0-2",
        "timestamp": T0 + 2000,
        "attributes": {"eventName": "ObjectCreated:Put"},
        "payload": record(2).decode(),
    }
    assert printed[2]["payload_base64"] == base64.b64encode(b"\xff\xfe binary").decode()
    assert "payload" not in printed[2]
    assert [p["event_id"] for p in printed] == ["0-2", "1-0", "1-1", "1-2"]


def test_replay_raw_and_open_ranges(data_dir: Path) -> None:
    result = run(data_dir, "replay", "--writer", "w", "--since", str(T0 + 7000), "--format", "raw")
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == record(7) + b"\n" + record(8) + b"\n"
    everything = run(data_dir, "replay", "--writer", "w")
    assert len(lines(everything)) == 9


def test_replay_to_a_webhook_delivers_every_event(data_dir: Path) -> None:
    with receiver() as hook:
        result = run(data_dir, "replay", "--writer", "w", "--until", str(T0 + 3000),
                     "--to", hook.url)  # fmt: skip
        assert result.exit_code == 0, result.output
        assert "4 events delivered" in result.stdout
        posts = hook.posts
    assert len(posts) == 4
    by_id = {p.headers["x-ripple-event-id"]: p.json() for p in posts}
    assert by_id == {
        event_id: {"Records": [json.loads(record(i))]}
        for i, event_id in enumerate(["0-0", "0-1", "0-2", "1-0"])
    }


def test_replay_to_a_failing_webhook_reports_and_fails(data_dir: Path) -> None:
    with receiver() as hook:
        hook.status = 503
        result = run(data_dir, "replay", "--writer", "w", "--until", str(T0 + 1000),
                     "--to", hook.url, "--retries", "1")  # fmt: skip
        posts = hook.posts
    assert result.exit_code == 1
    assert len(posts) == 4  # two events, each tried twice
    assert "not delivered: 0-0: " in result.stderr
    assert "2 of 2 events not delivered" in result.stderr


def test_replay_applies_the_configured_destination_guard(data_dir: Path, runner: CliRunner) -> None:
    """Through the `ripple` command itself: in production mode `--to` a loopback webhook is
    refused before anything is sent (issue 24: it used to ignore `mode`), and the allow
    list lets it through."""
    args = ["snapshot", "replay", "--writer", "w", "--until", str(T0), "--to"]
    env = {"RIPPLE_DATA_DIR": str(data_dir), "RIPPLE_MODE": "production"}
    with receiver() as hook:
        refused = runner.invoke(cli, [*args, hook.url], env=env)
        assert refused.exit_code == 2, refused.output
        assert "destination 127.0.0.1 is a loopback address, refused" in refused.stderr
        assert hook.posts == []
        allowed = {**env, "RIPPLE_DESTINATIONS_ALLOW": "127.0.0.1"}
        delivered = runner.invoke(cli, [*args, hook.url], env=allowed)
        assert delivered.exit_code == 0, delivered.output
        assert len(hook.posts) == 1
    # not only replay: the `ripple` group installs the configured guard for every command
    set_default_guard(DestinationGuard())
    status = runner.invoke(cli, ["db", "status"], env=env)
    assert "newest" in status.output, status.output
    assert default_guard().enforcing


def test_replay_refuses_a_pull_only_destination(data_dir: Path) -> None:
    result = run(data_dir, "replay", "--writer", "w", "--to", "none")
    assert result.exit_code == 2
    assert "is not a push endpoint" in result.stderr


def test_reconcile_reports_what_it_added(data_dir: Path) -> None:
    index = index_of(data_dir)
    try:
        lost = [e.page_key for e in index.query("w")][1:]
        with index.engine.begin() as conn:
            conn.execute(index.table.delete().where(index.table.c.page_key.in_(lost)))
    finally:
        index.close()
    result = run(data_dir, "reconcile")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "scanned 4 objects: 2 added to the index, 2 already listed, 0 superseded by "
        "compacted pages, 0 unreadable",
        *[f"added: {key}" for key in lost],
    ]
    again = run(data_dir, "reconcile")
    assert "0 added to the index, 4 already listed" in again.stdout


def test_compact_reports_and_keeps_the_replay(data_dir: Path) -> None:
    before = run(data_dir, "replay", "--writer", "w").stdout
    result = run(data_dir, "compact", "--writer", "w", "--below", "1MiB", "--grace", "0")
    assert result.exit_code == 0, result.output
    assert "writer w: 3 pages merged into 1 (1 groups)" in result.stdout
    assert "3 old pages deleted" in result.stdout
    index = index_of(data_dir)
    try:
        (entry,) = index.query("w")
    finally:
        index.close()
    assert entry.page_key.endswith("_0~c2.pb.zst")
    assert run(data_dir, "replay", "--writer", "w").stdout == before
    nothing = run(data_dir, "compact", "--writer", "w", "--below", "1000", "--grace", "0")
    assert "0 pages merged into 0" in nothing.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["replay", "--writer", "w", "--since", "yesterday"], "'yesterday' is not a time"),
        (["replay", "--writer", "w", "--until", "-1y"], "'-1y' is not a time"),
        (["replay", "--writer", "w", "--since", str(T0 + 1), "--until", str(T0)], "after --until"),
        (["compact", "--writer", "w", "--below", "ten"], "'ten' is not a size"),
        (["compact", "--writer", "w", "--below", "1MiB", "--grace", "-1"], "--grace"),
        (["replay", "--writer", "w", "--to", "http://127.0.0.1:1/", "--format", "raw"], "--format"),
    ],
)
def test_bad_arguments_are_one_line_usage_errors(
    data_dir: Path, args: list[str], message: str
) -> None:
    result = run(data_dir, *args)
    assert result.exit_code == 2
    error = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert len(error) == 1, result.stderr
    assert message in error[0]


def test_an_unknown_snapshotter_lists_the_configured_ones(data_dir: Path) -> None:
    settings = Settings(data_dir=data_dir, snapshotter_tables={"audit": {"format": "ndjson"}})
    for command in (["replay", "--writer", "w"], ["reconcile"], ["compact", "--writer", "w",
                                                                "--below", "1KiB"]):  # fmt: skip
        result = run(data_dir, *command, "--name", "nope", settings=settings)
        assert result.exit_code == 1
        assert result.stderr.strip() == (
            "Error: no snapshotter 'nope'; configured: audit, default "
            "(add a [snapshotters.nope] table to ripple.toml)"
        )


def test_an_unknown_writer_lists_the_known_ones(data_dir: Path) -> None:
    result = run(data_dir, "replay", "--writer", "nobody")
    assert result.exit_code == 1
    assert "writer 'nobody' has no pages in snapshotter 'default'; writers: 'w', 'x'" in (
        result.stderr
    )
    empty = run(data_dir, "replay", "--writer", "w", "--since", str(T0 + 60_000))
    assert (empty.exit_code, empty.stdout) == (0, "")  # a known writer, nothing in range


def test_an_index_that_cannot_open_is_a_one_line_error(data_dir: Path, tmp_path: Path) -> None:
    settings = Settings(
        data_dir=data_dir, snapshotter_tables={"broken": {"index-url": str(tmp_path)}}
    )
    result = run(data_dir, "reconcile", "--name", "broken", settings=settings)
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("Error: cannot open the index of snapshotter 'broken': sqlite index")
    assert "[snapshotters.broken]" in line


@pytest.mark.parametrize(
    ("text", "size"),
    [("1000", 1000), ("512KiB", 524_288), ("1MiB", 1_048_576), ("10MB", 10_000_000),
     ("1.5 GiB", 1_610_612_736), ("2k", 2000), ("64kb", 64_000), ("7B", 7)],
)  # fmt: skip
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "MiB", "-1", "1XB", "0"])
def test_parse_size_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="is not a size"):
        parse_size(text)
