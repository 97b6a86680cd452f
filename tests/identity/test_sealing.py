"""Sealed secrets: AES-256-GCM round trips, bound to the access key id and the master key;
the master key file created private and refused when it is not."""

from __future__ import annotations

import os
import pickle
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ripple.identity import MASTER_KEY_FILE, MasterKey, MasterKeyError, SealError

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_round_trip() -> None:
    master = MasterKey.generate()
    sealed = master.seal("RKAAAAAAAAAAAAAAAAAA", SECRET)
    assert SECRET.encode() not in sealed
    assert master.open("RKAAAAAAAAAAAAAAAAAA", sealed) == SECRET


def test_each_seal_is_different() -> None:
    master = MasterKey.generate()
    assert master.seal("RKAAAAAAAAAAAAAAAAAA", SECRET) != master.seal(
        "RKAAAAAAAAAAAAAAAAAA", SECRET
    )


def test_a_secret_moved_to_another_key_id_does_not_open() -> None:
    master = MasterKey.generate()
    sealed = master.seal("RKAAAAAAAAAAAAAAAAAA", SECRET)
    with pytest.raises(SealError, match="RKBBBBBBBBBBBBBBBBBB") as caught:
        master.open("RKBBBBBBBBBBBBBBBBBB", sealed)
    assert SECRET not in str(caught.value)


def test_a_wrong_master_key_does_not_open() -> None:
    sealed = MasterKey.generate().seal("RKAAAAAAAAAAAAAAAAAA", SECRET)
    with pytest.raises(SealError, match="another master key"):
        MasterKey.generate().open("RKAAAAAAAAAAAAAAAAAA", sealed)


@pytest.mark.parametrize("damage", ["flip", "truncate", "version"])
def test_an_altered_secret_does_not_open(damage: str) -> None:
    master = MasterKey.generate()
    sealed = bytearray(master.seal("RKAAAAAAAAAAAAAAAAAA", SECRET))
    if damage == "flip":
        sealed[-1] ^= 1
    elif damage == "truncate":
        del sealed[20:]
    else:
        sealed[0] = 2
    with pytest.raises(SealError):
        master.open("RKAAAAAAAAAAAAAAAAAA", bytes(sealed))


def test_master_key_is_created_private_and_then_reused(tmp_path: Path) -> None:
    old_umask = os.umask(0)  # even a permissive umask makes a private file
    try:
        first = MasterKey.load(tmp_path / "data", create=True)
    finally:
        os.umask(old_umask)
    path = tmp_path / "data" / MASTER_KEY_FILE
    assert first.path == path
    assert mode_of(path) == 0o600
    assert len(path.read_bytes()) == 32
    sealed = first.seal("RKAAAAAAAAAAAAAAAAAA", SECRET)
    again = MasterKey.load(tmp_path / "data", create=True)
    assert again.open("RKAAAAAAAAAAAAAAAAAA", sealed) == SECRET
    assert sorted(p.name for p in path.parent.iterdir()) == [MASTER_KEY_FILE]  # no leftovers


def test_missing_master_key_is_not_created_unless_asked(tmp_path: Path) -> None:
    with pytest.raises(MasterKeyError, match="does not exist: is data-dir"):
        MasterKey.load(tmp_path)
    assert not (tmp_path / MASTER_KEY_FILE).exists()


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_master_key_open_to_others_is_refused(tmp_path: Path, mode: int) -> None:
    MasterKey.load(tmp_path, create=True)
    path = tmp_path / MASTER_KEY_FILE
    path.chmod(mode)
    with pytest.raises(MasterKeyError) as caught:
        MasterKey.load(tmp_path, create=True)
    message = str(caught.value)
    assert f"mode {mode:04o}" in message
    assert f"chmod 600 {path}" in message
    assert "\n" not in message


@pytest.mark.parametrize("size", [0, 16, 31, 33, 64])
def test_master_key_of_the_wrong_length_is_refused(tmp_path: Path, size: int) -> None:
    path = tmp_path / MASTER_KEY_FILE
    path.write_bytes(b"k" * size)
    path.chmod(0o600)
    with pytest.raises(MasterKeyError, match=f"exactly 32 bytes, it holds {size}"):
        MasterKey.load(tmp_path, create=True)
    assert path.read_bytes() == b"k" * size  # never replaced


def test_master_key_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / MASTER_KEY_FILE).mkdir(mode=0o700)
    with pytest.raises(MasterKeyError, match="not a regular file"):
        MasterKey.load(tmp_path)


def test_master_key_is_hidden(tmp_path: Path) -> None:
    master = MasterKey.load(tmp_path, create=True)
    raw = (tmp_path / MASTER_KEY_FILE).read_bytes()
    for text in (repr(master), str(master)):
        assert "hidden" in text
        assert raw.hex() not in text
        assert repr(raw) not in text
    assert not hasattr(master, "__dict__")  # nothing more to show


def test_master_key_is_not_pickled() -> None:
    with pytest.raises(TypeError):
        pickle.dumps(MasterKey.generate())


def test_in_memory_key_must_be_32_bytes() -> None:
    with pytest.raises(MasterKeyError, match="32 bytes, not 16"):
        MasterKey(b"0" * 16)


def test_concurrent_first_use_agrees_on_one_key(tmp_path: Path) -> None:
    barrier = threading.Barrier(8)

    def load() -> bytes:
        barrier.wait()
        return MasterKey.load(tmp_path, create=True).seal("RKAAAAAAAAAAAAAAAAAA", SECRET)

    with ThreadPoolExecutor(8) as pool:
        sealed = list(pool.map(lambda _: load(), range(8)))
    final = MasterKey.load(tmp_path)
    assert {final.open("RKAAAAAAAAAAAAAAAAAA", s) for s in sealed} == {SECRET}
    assert [p.name for p in tmp_path.iterdir()] == [MASTER_KEY_FILE]
