"""The keyring: keys and secrets looked up once and kept for `ttl` seconds; a revoked key
stops working once its answer expires; an unusable master key refuses keys and says why in
the log (never with the secret)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from ripple.identity import (
    MASTER_KEY_FILE,
    Keyring,
    MasterKey,
    MasterKeyError,
    create_key,
    create_user,
    revoke_key,
)
from ripple.identity.keyring import NotHeld
from ripple.metabase import Metabase
from tests.waiting import wait_for

AK = "AKIAIOSFODNN7EXAMPLE"
SK = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


class Queries:
    """Counts the statements the metabase runs."""

    def __init__(self, db: Metabase) -> None:
        self.count = 0
        self.db = db
        sa.event.listen(db.engine, "before_cursor_execute", self._seen)

    def _seen(self, *_args: object) -> None:
        self.count += 1

    def close(self) -> None:
        sa.event.remove(self.db.engine, "before_cursor_execute", self._seen)


@pytest.fixture
def queries(db: Metabase) -> Iterator[Queries]:
    counter = Queries(db)
    yield counter
    counter.close()


def test_lookups_are_cached(db: Metabase, tmp_path: Path, queries: Queries) -> None:
    _, key, secret = create_user(db, tmp_path, "alice")
    keyring = Keyring(db, tmp_path, ttl=60)
    before = queries.count
    assert keyring.secret_of(key.access_key_id) == secret
    looked_up = queries.count
    assert looked_up > before
    for _ in range(50):
        assert keyring.key(key.access_key_id) == key
        assert keyring.secret_of(key.access_key_id) == secret
    assert queries.count == looked_up


def test_revoked_key_is_served_from_cache_until_ttl(db: Metabase, tmp_path: Path) -> None:
    _, key, secret = create_user(db, tmp_path, "alice")
    keyring = Keyring(db, tmp_path, ttl=60)
    assert keyring.secret_of(key.access_key_id) == secret
    revoke_key(db, key.access_key_id)
    assert keyring.secret_of(key.access_key_id) == secret  # within ttl
    assert Keyring(db, tmp_path).secret_of(key.access_key_id) is None  # a new keyring sees it


def test_revoke_takes_effect_after_ttl(db: Metabase, tmp_path: Path) -> None:
    _, key, _ = create_user(db, tmp_path, "alice")
    other, other_secret = create_key(db, tmp_path, "alice")
    keyring = Keyring(db, tmp_path, ttl=0.05)
    assert keyring.key(key.access_key_id) == key
    revoke_key(db, key.access_key_id)
    wait_for(lambda: keyring.key(key.access_key_id) is None)
    assert keyring.secret_of(key.access_key_id) is None
    assert keyring.secret_of(other.access_key_id) == other_secret


def test_unknown_keys_are_remembered_too(db: Metabase, tmp_path: Path) -> None:
    """A flood of requests with an unknown key costs one query per ttl; a key created under
    that id is seen once the answer expires."""
    create_user(db, tmp_path, "alice")
    keyring = Keyring(db, tmp_path, ttl=60)
    quick = Keyring(db, tmp_path, ttl=0.05)
    assert keyring.secret_of(AK) is None
    assert quick.secret_of(AK) is None
    create_user(db, tmp_path, "bob", access_key_id=AK, secret_key=SK)
    assert keyring.secret_of(AK) is None
    wait_for(lambda: quick.secret_of(AK) == SK)


@pytest.mark.parametrize(
    "text", ["", "short", "AKIA-IOSFODNN7EXAMPLE", "A" * 129, "AKIA ÖSFODNN7EXAMPLE"]
)
def test_malformed_ids_cost_no_query(
    db: Metabase, tmp_path: Path, queries: Queries, text: str
) -> None:
    keyring = Keyring(db, tmp_path)
    before = queries.count
    assert keyring.key(text) is None
    assert keyring.secret_of(text) is None
    assert queries.count == before


def test_the_cache_is_bounded(
    db: Metabase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ripple.identity.keyring.MAX_CACHED", 3)
    keyring = Keyring(db, tmp_path, ttl=60)
    for i in range(10):
        assert keyring.key(f"RKUNKNOWN{i:011d}") is None
    assert list(keyring._cache) == [f"RKUNKNOWN{i:011d}" for i in (7, 8, 9)]


def test_a_bad_master_key_stops_the_keyring_at_once(db: Metabase, tmp_path: Path) -> None:
    create_user(db, tmp_path, "alice")
    (tmp_path / MASTER_KEY_FILE).chmod(0o644)
    with pytest.raises(MasterKeyError, match="mode 0644"):
        Keyring(db, tmp_path)


def test_the_master_key_may_come_later(db: Metabase, tmp_path: Path) -> None:
    """A gateway started before the first user exists finds the master key when it needs it."""
    keyring = Keyring(db, tmp_path, ttl=0.01)
    assert keyring.secret_of(AK) is None
    create_user(db, tmp_path, "alice", access_key_id=AK, secret_key=SK)
    wait_for(lambda: keyring.secret_of(AK) == SK)


def test_a_missing_master_key_refuses_keys_and_logs(
    db: Metabase, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    create_user(db, tmp_path / "data", "alice", access_key_id=AK, secret_key=SK)
    keyring = Keyring(db, tmp_path / "elsewhere")
    with caplog.at_level(logging.ERROR, logger="ripple.identity"):
        assert keyring.secret_of(AK) is None
        assert keyring.key(AK) is None
    assert f"access key {AK} is unusable" in caplog.text
    assert "does not exist" in caplog.text
    assert SK not in caplog.text


def test_a_wrong_master_key_refuses_keys_and_logs(
    db: Metabase, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    create_user(db, tmp_path / "data", "alice", access_key_id=AK, secret_key=SK)
    MasterKey.load(tmp_path / "elsewhere", create=True)
    keyring = Keyring(db, tmp_path / "elsewhere")
    with caplog.at_level(logging.ERROR, logger="ripple.identity"):
        assert keyring.secret_of(AK) is None
    assert "sealed under another master key" in caplog.text
    assert SK not in caplog.text


def test_held_lookups_never_query(db: Metabase, tmp_path: Path, queries: Queries) -> None:
    """What the gateway asks on its event loop: an answer from memory, or `NotHeld`."""
    _, key, secret = create_user(db, tmp_path, "alice")
    keyring = Keyring(db, tmp_path, ttl=60)
    before = queries.count
    with pytest.raises(NotHeld):
        keyring.held_secret_of(key.access_key_id)
    with pytest.raises(NotHeld):
        keyring.held_key("AKIAUNKNOWN000000000")
    assert queries.count == before
    assert keyring.secret_of(key.access_key_id) == secret  # now held, and so is an unknown
    assert keyring.key("AKIAUNKNOWN000000000") is None
    looked_up = queries.count
    assert keyring.held_secret_of(key.access_key_id) == secret
    assert keyring.held_key(key.access_key_id) == key
    assert keyring.held_key("AKIAUNKNOWN000000000") is None
    assert keyring.held_key("not a key id") is None  # malformed: no query, no entry
    assert queries.count == looked_up
    expired = Keyring(db, tmp_path, ttl=0.0)
    expired.secret_of(key.access_key_id)
    with pytest.raises(NotHeld):  # held, but not fresh
        expired.held_secret_of(key.access_key_id)
