"""`ripple user create | list` and `ripple key create | list | revoke`, in this process,
against the test's metabase: what they print, and one-line errors that write nothing."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ripple.cli import cli
from ripple.identity import MASTER_KEY_FILE, AccessKey, Keyring, list_keys, list_users
from ripple.metabase import Metabase, list_projects

AK = "AKIAIOSFODNN7EXAMPLE"
SK = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


class Ripple:
    """The `ripple` command against the test's metabase, data directory `data_dir`."""

    def __init__(self, runner: CliRunner, db: Metabase, data_dir: Path) -> None:
        self.runner = runner
        self.data_dir = data_dir
        self.env = {
            "RIPPLE_DATABASE_URL": db.url.render_as_string(hide_password=False),
            "RIPPLE_DATA_DIR": str(data_dir),
        }

    def __call__(self, *args: str) -> Result:
        return self.runner.invoke(cli, list(args), env=self.env)

    def ok(self, *args: str) -> str:
        result = self(*args)
        assert result.exit_code == 0, result.output
        return result.stdout

    def error(self, *args: str) -> str:
        """The one line a failing command says."""
        result = self(*args)
        assert result.exit_code != 0, result.output
        assert result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("Error: ")
        return lines[0].removeprefix("Error: ")


@pytest.fixture
def ripple(runner: CliRunner, db: Metabase, tmp_path: Path) -> Ripple:
    return Ripple(runner, db, tmp_path / "data")


def new_key(output: str) -> tuple[str, str]:
    """The access key and secret key a create command printed."""
    found = re.search(r"^access key: (\S+)\nsecret key: (\S+)\n", output, re.MULTILINE)
    assert found, output
    return found[1], found[2]


def test_user_create_prints_a_working_key(ripple: Ripple, db: Metabase) -> None:
    out = ripple.ok("user", "create", "alice")
    [project] = list_projects(db)
    access_key, secret = new_key(out)
    lines = out.splitlines()
    assert lines[0] == f"user alice: project public id {project.public_id}"
    assert str(project.id) not in out  # the private id stays inside
    assert re.fullmatch(r"RK[A-Z2-7]{18}", access_key)
    assert len(secret) == 40
    assert "shown only this once and cannot be shown again" in lines[-1]
    assert Keyring(db, ripple.data_dir).secret_of(access_key) == secret
    assert stat.S_IMODE((ripple.data_dir / MASTER_KEY_FILE).stat().st_mode) == 0o600


def test_user_create_with_given_keys(ripple: Ripple, db: Metabase) -> None:
    out = ripple.ok("user", "create", "alice", "--access-key", AK, "--secret-key", SK)
    assert new_key(out) == (AK, SK)
    assert Keyring(db, ripple.data_dir).secret_of(AK) == SK


def test_duplicate_user(ripple: Ripple, db: Metabase) -> None:
    ripple.ok("user", "create", "alice")
    assert ripple.error("user", "create", "alice") == "user 'alice' already exists"
    assert len(list_projects(db)) == 1


def test_duplicate_access_key_writes_nothing(ripple: Ripple, db: Metabase) -> None:
    ripple.ok("user", "create", "alice", "--access-key", AK, "--secret-key", SK)
    message = ripple.error("user", "create", "bob", "--access-key", AK, "--secret-key", "x" * 20)
    assert message == f"access key {AK} already exists; choose another"
    assert [p.name for p in list_projects(db)] == ["alice"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--access-key", AK], "give both --access-key and --secret-key, or neither"),
        (["--secret-key", SK], "give both --access-key and --secret-key, or neither"),
        (["--access-key", "AK", "--secret-key", SK], "must be 16 to 128 letters and digits"),
        (["--access-key", AK, "--secret-key", "tiny"], "must be 16 to 128 characters long, not 4"),
    ],
)
def test_user_create_bad_keys(ripple: Ripple, db: Metabase, args: list[str], message: str) -> None:
    error = ripple.error("user", "create", "alice", *args)
    assert message in error
    assert SK not in error
    assert list_projects(db) == []


def test_user_list(ripple: Ripple, db: Metabase) -> None:
    assert ripple.ok("user", "list") == ""
    ripple.ok("user", "create", "bob")
    out = ripple.ok("user", "create", "alice")
    ripple.ok("key", "create", "alice", "--bucket", "photos")
    listed = [json.loads(line) for line in ripple.ok("user", "list").splitlines()]
    users = list_users(db)
    assert listed == [
        {
            "name": u.name,
            "project_public_id": str(u.project_public_id),
            "active_keys": u.active_keys,
            "created_at": u.created_at.isoformat(),
        }
        for u in users
    ]
    assert [(u["name"], u["active_keys"]) for u in listed] == [("alice", 2), ("bob", 1)]
    assert new_key(out)[1] not in ripple.ok("user", "list")


def test_key_create_with_restrictions(ripple: Ripple, db: Metabase) -> None:
    ripple.ok("user", "create", "alice")
    out = ripple.ok(
        "key",
        "create",
        "alice",
        "--bucket",
        "photos",
        "--prefix",
        "2024/",
        "--deny",
        "write",
        "--deny",
        "delete",
        "--allow-bypass-governance",
    )
    access_key, secret = new_key(out)
    assert out.splitlines()[0] == (
        "user alice: bucket photos, keys under '2024/'; denied delete, write; "
        "may bypass governance retention"
    )
    keyring = Keyring(db, ripple.data_dir)
    assert keyring.secret_of(access_key) == secret
    key = keyring.key(access_key)
    assert key is not None
    assert (key.bucket, key.prefix, key.denied, key.allow_bypass_governance) == (
        "photos",
        "2024/",
        frozenset({"write", "delete"}),
        True,
    )


def test_key_create_unrestricted(ripple: Ripple, db: Metabase) -> None:
    ripple.ok("user", "create", "alice")
    out = ripple.ok("key", "create", "alice")
    assert out.splitlines()[0] == "user alice: every bucket; may bypass governance retention"
    key = Keyring(db, ripple.data_dir).key(new_key(out)[0])
    assert key is not None
    assert key.bucket is None
    assert key.denied == frozenset()


def test_key_create_prefix_needs_bucket(ripple: Ripple, db: Metabase) -> None:
    ripple.ok("user", "create", "alice")
    assert ripple.error("key", "create", "alice", "--prefix", "2024/") == (
        "--prefix needs --bucket: a prefix is within one bucket"
    )
    assert len(list_keys(db, "alice")) == 1


def test_key_create_bad_bucket(ripple: Ripple) -> None:
    ripple.ok("user", "create", "alice")
    assert "bucket name 'No_Such' must be" in ripple.error(
        "key", "create", "alice", "--bucket", "No_Such"
    )


def test_key_create_bad_deny_lists_the_choices(ripple: Ripple, db: Metabase) -> None:
    ripple.ok("user", "create", "alice")
    result = ripple("key", "create", "alice", "--deny", "admin")
    assert result.exit_code == 2
    assert "'admin' is not one of 'read', 'write', 'list', 'delete'" in result.stderr
    assert len(list_keys(db, "alice")) == 1


def test_key_create_unknown_user(ripple: Ripple) -> None:
    assert ripple.error("key", "create", "bob") == (
        "no user 'bob': create it with `ripple user create bob`"
    )


def test_key_list_never_shows_secrets(ripple: Ripple, db: Metabase) -> None:
    first = new_key(ripple.ok("user", "create", "alice"))
    second = new_key(ripple.ok("key", "create", "alice", "--bucket", "photos", "--deny", "list"))
    out = ripple.ok("key", "list", "alice")
    assert [json.loads(line) for line in out.splitlines()] == [
        {
            "access_key_id": first[0],
            "bucket": None,
            "prefix": None,
            "denied": [],
            "allow_bypass_governance": False,
        },
        {
            "access_key_id": second[0],
            "bucket": "photos",
            "prefix": None,
            "denied": ["list"],
            "allow_bypass_governance": False,
        },
    ]
    assert first[1] not in out
    assert second[1] not in out
    assert "no user 'bob'" in ripple.error("key", "list", "bob")


def test_key_revoke(ripple: Ripple, db: Metabase) -> None:
    access_key, _ = new_key(ripple.ok("user", "create", "alice"))
    out = ripple.ok("key", "revoke", access_key)
    assert out == (f"revoked access key {access_key}; gateways stop accepting it within 1 s\n")
    assert list_keys(db, "alice") == []
    assert Keyring(db, ripple.data_dir).key(access_key) is None
    ripple.ok("key", "revoke", access_key)  # again: no change, no error
    assert ripple.error("key", "revoke", "RKNOSUCHKEY234567ABC") == (
        "no access key 'RKNOSUCHKEY234567ABC'"
    )


def test_an_open_master_key_is_refused(ripple: Ripple, db: Metabase) -> None:
    ripple.ok("user", "create", "alice")
    path = ripple.data_dir / MASTER_KEY_FILE
    path.chmod(0o644)
    assert ripple.error("key", "create", "alice") == (
        f"master key {path} is accessible to group or others (mode 0644); run `chmod 600 {path}`"
    )
    assert len(list_keys(db, "alice")) == 1


def test_a_fresh_sqlite_data_dir(runner: CliRunner, tmp_path: Path) -> None:
    """`ripple user create` before anything else: the metabase is made and migrated."""
    result = runner.invoke(cli, ["user", "create", "alice"])
    assert result.exit_code == 0, result.output
    access_key, secret = new_key(result.stdout)
    fresh = Metabase(f"sqlite:///{tmp_path / '.ripple' / 'metabase.db'}")
    try:
        assert Keyring(fresh, tmp_path / ".ripple").secret_of(access_key) == secret
    finally:
        fresh.dispose()


def test_missing_tables_are_one_line(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["user", "list"])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "Is it running, and migrated (`ripple db upgrade`)?" in lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["user", "--help"], ["create", "list", "a project"]),
        (["user", "create", "--help"], ["--access-key", "--secret-key", "shown only", "public id"]),
        (["user", "list", "--help"], ["JSON"]),
        (["key", "--help"], ["create", "list", "revoke"]),
        (
            ["key", "create", "--help"],
            [
                "--bucket",
                "--prefix",
                "--deny",
                "read|write|list|delete",
                "--allow-bypass-governance",
            ],
        ),
        (["key", "list", "--help"], ["no secrets"]),
        (["key", "revoke", "--help"], ["ACCESS_KEY", "(1 s)"]),
        (["--help"], ["user", "key"]),
    ],
)
def test_help(runner: CliRunner, args: list[str], expected: list[str]) -> None:
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    for part in expected:
        assert part in text


def test_access_key_type_is_what_the_commands_print(ripple: Ripple, db: Metabase) -> None:
    access_key, _ = new_key(ripple.ok("user", "create", "alice"))
    [project] = list_projects(db)
    assert Keyring(db, ripple.data_dir).key(access_key) == AccessKey(
        access_key, project.id, project.public_id, "alice"
    )
