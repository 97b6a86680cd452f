"""Users and access keys in the metabase: create, list, revoke; one transaction for a user
and its first key; input checked with one-line errors that never show a secret."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import sqlalchemy as sa

from ripple.identity import (
    AccessKey,
    BadInput,
    IdentityError,
    KeyExists,
    Keyring,
    MasterKey,
    MasterKeyError,
    UnknownKey,
    UnknownUser,
    User,
    UserExists,
    create_key,
    create_user,
    list_keys,
    list_users,
    revoke_key,
)
from ripple.identity.schema import access_keys
from ripple.metabase import Metabase, create_project, get_project, list_projects

AK = "AKIAIOSFODNN7EXAMPLE"
SK = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def test_create_user_makes_a_project_and_its_first_key(db: Metabase, data_dir: Path) -> None:
    project, key, secret = create_user(db, data_dir, "alice")
    assert get_project(db, project.id) == project
    assert project.name == "alice"
    assert project.public_id != project.id
    assert key == AccessKey(key.access_key_id, project.id, project.public_id, "alice")
    assert len(key.access_key_id) == 20
    assert key.access_key_id.startswith("RK")
    assert key.access_key_id.isalnum()
    assert key.access_key_id.isupper()
    assert len(secret) == 40
    assert Keyring(db, data_dir).secret_of(key.access_key_id) == secret


def test_generated_keys_differ(db: Metabase, data_dir: Path) -> None:
    made = [create_user(db, data_dir, f"user{i}") for i in range(5)]
    assert len({key.access_key_id for _, key, _ in made}) == 5
    assert len({secret for _, _, secret in made}) == 5


def test_create_user_with_given_keys(db: Metabase, data_dir: Path) -> None:
    _, key, secret = create_user(db, data_dir, "alice", access_key_id=AK, secret_key=SK)
    assert (key.access_key_id, secret) == (AK, SK)
    assert Keyring(db, data_dir).secret_of(AK) == SK


def test_the_secret_is_stored_sealed(db: Metabase, data_dir: Path) -> None:
    create_user(db, data_dir, "alice", access_key_id=AK, secret_key=SK)
    with db.read() as conn:
        sealed: bytes = conn.execute(sa.select(access_keys.c.sealed_secret)).scalar_one()
    assert SK.encode() not in bytes(sealed)
    assert MasterKey.load(data_dir).open(AK, bytes(sealed)) == SK


def test_user_names_are_unique(db: Metabase, data_dir: Path) -> None:
    create_user(db, data_dir, "alice")
    with pytest.raises(UserExists, match=r"^user 'alice' already exists$"):
        create_user(db, data_dir, "alice")
    assert [p.name for p in list_projects(db)] == ["alice"]


def test_a_project_without_keys_is_not_a_user(db: Metabase, data_dir: Path) -> None:
    """Projects made by other means may share a name; only users' names must differ."""
    other = create_project(db, "alice")
    project, _, _ = create_user(db, data_dir, "alice")
    assert project.id != other.id
    assert [u.project_id for u in list_users(db)] == [project.id]


def test_a_taken_access_key_leaves_nothing_behind(db: Metabase, data_dir: Path) -> None:
    """The project and its first key are one transaction: when the key cannot be written,
    no project remains."""
    create_user(db, data_dir, "alice", access_key_id=AK, secret_key=SK)
    with pytest.raises(KeyExists, match=f"^access key {AK} already exists; choose another$"):
        create_user(db, data_dir, "bob", access_key_id=AK, secret_key="another-secret-key")
    assert [p.name for p in list_projects(db)] == ["alice"]
    assert [u.name for u in list_users(db)] == ["alice"]
    assert Keyring(db, data_dir).secret_of(AK) == SK


def test_a_revoked_access_key_id_is_not_given_again(db: Metabase, data_dir: Path) -> None:
    create_user(db, data_dir, "alice", access_key_id=AK, secret_key=SK)
    revoke_key(db, AK)
    with pytest.raises(KeyExists):
        create_user(db, data_dir, "bob", access_key_id=AK, secret_key=SK)


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("", {}, "user name '' must be 1 to 64"),
        ("-alice", {}, "starting with a letter or digit"),
        ("al ice", {}, "user name 'al ice'"),
        ("a" * 65, {}, "must be 1 to 64"),
        ("alice", {"access_key_id": AK}, "give both the access key and the secret key"),
        ("alice", {"secret_key": SK}, "give both the access key and the secret key"),
        ("alice", {"access_key_id": "SHORT", "secret_key": SK}, "16 to 128 letters and digits"),
        ("alice", {"access_key_id": "A" * 129, "secret_key": SK}, "16 to 128 letters"),
        ("alice", {"access_key_id": "AKIA-IOSFODNN7EXAMPLE", "secret_key": SK}, "letters and"),
        ("alice", {"access_key_id": AK, "secret_key": "short"}, "16 to 128 characters"),
        ("alice", {"access_key_id": AK, "secret_key": "x" * 129}, "16 to 128 characters"),
        ("alice", {"access_key_id": AK, "secret_key": "with space 1234567"}, "without spaces"),
        ("alice", {"access_key_id": AK, "secret_key": "ünïcödé-secret-key"}, "printable ASCII"),
    ],
)
def test_bad_input(
    db: Metabase, data_dir: Path, name: str, kwargs: dict[str, str], message: str
) -> None:
    with pytest.raises(BadInput, match=message) as caught:
        create_user(db, data_dir, name, **kwargs)
    text = str(caught.value)
    assert "\n" not in text
    if "secret_key" in kwargs:
        assert kwargs["secret_key"] not in text
    assert list_projects(db) == []
    assert not data_dir.exists()  # nothing written, not even the master key


def test_a_secret_given_as_the_access_key_is_not_shown(db: Metabase, data_dir: Path) -> None:
    with pytest.raises(BadInput) as caught:
        create_user(db, data_dir, "alice", access_key_id=SK, secret_key=AK)
    assert SK not in str(caught.value)


def test_create_key_with_restrictions(db: Metabase, data_dir: Path) -> None:
    project, first, _ = create_user(db, data_dir, "alice")
    key, secret = create_key(
        db,
        data_dir,
        "alice",
        bucket="photos",
        prefix="2024/",
        denied=["write", "delete", "write"],
        allow_bypass_governance=True,
    )
    assert key == AccessKey(
        key.access_key_id,
        project.id,
        project.public_id,
        "alice",
        bucket="photos",
        prefix="2024/",
        denied=frozenset({"write", "delete"}),
        allow_bypass_governance=True,
    )
    with db.read() as conn:
        denied: str = conn.execute(
            sa.select(access_keys.c.denied).where(access_keys.c.access_key_id == key.access_key_id)
        ).scalar_one()
    assert denied == "delete,write"
    assert list_keys(db, "alice") == [first, key]
    keyring = Keyring(db, data_dir)
    assert keyring.key(key.access_key_id) == key
    assert keyring.secret_of(key.access_key_id) == secret


@pytest.mark.parametrize(
    ("restrictions", "message"),
    [
        ({"prefix": "2024/"}, "a prefix restriction needs a bucket"),
        ({"bucket": "Photos"}, "bucket name 'Photos' must be 3 to 63"),
        ({"bucket": "photos", "prefix": ""}, "prefix must be 1 to 1024 bytes"),
        (
            {"bucket": "photos", "prefix": "é" * 513},
            "prefix must be 1 to 1024 bytes long, not 1026",
        ),
        ({"denied": ["read", "admin"]}, "unknown action 'admin' to deny; choose from read, write"),
    ],
)
def test_create_key_bad_restrictions(
    db: Metabase, data_dir: Path, restrictions: dict[str, object], message: str
) -> None:
    create_user(db, data_dir, "alice")
    with pytest.raises(BadInput, match=message):
        create_key(db, data_dir, "alice", **restrictions)  # type: ignore[arg-type]
    assert len(list_keys(db, "alice")) == 1


def test_create_key_for_an_unknown_user(db: Metabase, data_dir: Path) -> None:
    create_project(db, "bob")  # a project, but no user
    with pytest.raises(
        UnknownUser, match=r"^no user 'bob': create it with `ripple user create bob`$"
    ):
        create_key(db, data_dir, "bob")


def test_list_users(db: Metabase, data_dir: Path) -> None:
    assert list_users(db) == []
    bob, bob_key, _ = create_user(db, data_dir, "bob")
    alice, _, _ = create_user(db, data_dir, "alice")
    create_key(db, data_dir, "bob", bucket="photos")
    revoke_key(db, bob_key.access_key_id)
    assert list_users(db) == [
        User("alice", alice.id, alice.public_id, alice.created_at, 1),
        User("bob", bob.id, bob.public_id, bob.created_at, 1),
    ]


def test_revoke(db: Metabase, data_dir: Path) -> None:
    _, first, _ = create_user(db, data_dir, "alice")
    second, _ = create_key(db, data_dir, "alice", denied=["delete"])
    revoke_key(db, first.access_key_id)
    assert list_keys(db, "alice") == [second]
    revoke_key(db, first.access_key_id)  # again: nothing changes
    assert list_keys(db, "alice") == [second]
    assert Keyring(db, data_dir).key(first.access_key_id) is None
    revoke_key(db, second.access_key_id)
    assert list_keys(db, "alice") == []
    assert [u.active_keys for u in list_users(db)] == [0]
    # still a user: its name stays taken and it may get new keys
    with pytest.raises(UserExists):
        create_user(db, data_dir, "alice")
    third, _ = create_key(db, data_dir, "alice")
    assert list_keys(db, "alice") == [third]


def test_revoke_unknown_key(db: Metabase) -> None:
    with pytest.raises(UnknownKey, match=r"^no access key 'RKNOSUCHKEY234567ABC'$"):
        revoke_key(db, "RKNOSUCHKEY234567ABC")


def test_list_keys_of_an_unknown_user(db: Metabase) -> None:
    with pytest.raises(UnknownUser):
        list_keys(db, "nobody")


def test_another_data_dir_is_refused(db: Metabase, tmp_path: Path) -> None:
    """Keys sealed under a master key no gateway has would never work: with keys in the
    metabase, creating more needs the master key that opens them."""
    create_user(db, tmp_path / "right", "alice")
    with pytest.raises(MasterKeyError, match=r"wrong/secret\.key does not exist: is data-dir"):
        create_user(db, tmp_path / "wrong", "bob")
    assert not (tmp_path / "wrong").exists()
    MasterKey.load(tmp_path / "other", create=True)
    with pytest.raises(MasterKeyError, match="does not open the secrets already in the metabase"):
        create_key(db, tmp_path / "other", "alice")
    assert [u.name for u in list_users(db)] == ["alice"]


def test_errors_share_a_base(db: Metabase, data_dir: Path) -> None:
    for error in (BadInput, UserExists, UnknownUser, KeyExists, UnknownKey, MasterKeyError):
        assert issubclass(error, IdentityError)
    with pytest.raises(IdentityError):
        create_key(db, data_dir, "nobody")


def test_secrets_are_not_in_reprs(db: Metabase, data_dir: Path) -> None:
    project, key, _ = create_user(db, data_dir, "alice", access_key_id=AK, secret_key=SK)
    keyring = Keyring(db, data_dir)
    assert keyring.secret_of(AK) == SK
    for shown in (project, key, keyring, list_users(db), list_keys(db, "alice")):
        assert SK not in repr(shown)
        assert SK not in str(shown)
    assert SK not in repr(keyring._cache)
    assert uuid.UUID(str(project.public_id)) == key.project_public_id


def test_concurrent_creations_of_one_user(postgres_db: Metabase, tmp_path: Path) -> None:
    """PostgreSQL runs writers side by side: one of them makes the user, the others are
    told it exists (SQLite serializes writers anyway)."""
    create_user(postgres_db, tmp_path, "first")  # the master key exists before the race
    barrier = threading.Barrier(6)

    def attempt() -> str:
        barrier.wait()
        try:
            create_user(postgres_db, tmp_path, "alice")
        except UserExists:
            return "exists"
        return "made"

    with ThreadPoolExecutor(6) as pool:
        outcomes = sorted(pool.map(lambda _: attempt(), range(6)))
    assert outcomes == ["exists"] * 5 + ["made"]
    assert sorted(p.name for p in list_projects(postgres_db)) == ["alice", "first"]
