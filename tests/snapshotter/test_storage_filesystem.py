"""FilesystemStorage: round trips, atomic replacement, listings in key order, refused keys,
missing keys, empty directories removed, and failures as one-line StorageErrors."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from ripple.snapshotter.settings import SnapshotterSettings
from ripple.snapshotter.storage import (
    FilesystemStorage,
    StorageError,
    open_storage,
)
from ripple.snapshotter.storage.filesystem import TEMP_PREFIX, content_type_of


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "pages"


@pytest.fixture
def storage(root: Path) -> FilesystemStorage:
    return FilesystemStorage(root)


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_round_trip(storage: FilesystemStorage, root: Path) -> None:
    data = b"\x28\xb5\x2f\xfd page bytes"
    stored = storage.put("w1/2024-05-01/17_1.pb.zst", data, "application/x-protobuf", {"a": "1"})

    assert stored.key == "w1/2024-05-01/17_1.pb.zst"
    assert stored.size == len(data)
    assert stored.etag == hashlib.md5(data).hexdigest()
    assert stored.content_type == "application/x-protobuf"
    assert stored.metadata == {"a": "1"}
    assert (root / "w1" / "2024-05-01" / "17_1.pb.zst").read_bytes() == data
    assert storage.get("w1/2024-05-01/17_1.pb.zst") == data

    head = storage.head("w1/2024-05-01/17_1.pb.zst")
    assert head is not None
    assert (head.key, head.size, head.content_type) == (stored.key, len(data), stored.content_type)
    assert head.metadata == {}  # no sidecar files: metadata is not kept
    assert head.last_modified == pytest.approx(stored.last_modified)
    assert storage.backend == "filesystem"


def test_put_replaces_and_leaves_no_temporary_files(storage: FilesystemStorage, root: Path) -> None:
    storage.put("k.ndjson", b"old", "application/x-ndjson", {})
    storage.put("k.ndjson", b"new, longer", "application/x-ndjson", {})

    assert storage.get("k.ndjson") == b"new, longer"
    assert os.listdir(root) == ["k.ndjson"]


def test_a_reader_never_sees_part_of_a_replaced_page(
    storage: FilesystemStorage, root: Path
) -> None:
    size = 4 * 1024 * 1024
    versions = [bytes([n]) * size for n in range(3)]
    storage.put("big.pb", versions[0], "application/x-protobuf", {})
    done = threading.Event()
    seen: list[int] = []
    torn: list[int] = []

    def read() -> None:
        while not done.is_set():
            data = storage.get("big.pb")
            if data in versions:
                seen.append(data[0])
            else:
                torn.append(len(data))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(30):
            storage.put("big.pb", versions[n % 3], "application/x-protobuf", {})
    finally:
        done.set()
        reader.join()

    assert torn == []
    assert seen  # the reader did read while the writer replaced
    assert os.listdir(root) == ["big.pb"]
    assert storage.get("big.pb") == versions[29 % 3]


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("w/1_2.pb", "application/x-protobuf"),
        ("w/1_2.pb.zst", "application/x-protobuf"),
        ("w/1.5_2.pb.gz", "application/x-protobuf"),
        ("w/1_2.ndjson", "application/x-ndjson"),
        ("w/1_2.ndjson.gz", "application/x-ndjson"),
        ("w.pb/page", "application/octet-stream"),
        ("w/pb", "application/octet-stream"),
    ],
)
def test_content_type_comes_from_the_extension(
    storage: FilesystemStorage, key: str, expected: str
) -> None:
    assert content_type_of(key) == expected
    storage.put(key, b"x", "text/plain", {})
    head = storage.head(key)
    assert head is not None
    assert head.content_type == expected
    assert [o.content_type for o in storage.list()] == [expected]


KEYS = ["a-b", "a/b", "a/c/d.pb", "a/c/e.pb", "ab", "b", "a/c0", ".w/x.pb", "é/1"]


def test_list_is_in_key_order(storage: FilesystemStorage) -> None:
    for n, key in enumerate(KEYS):
        storage.put(key, b"x" * n, "", {})

    listed = list(storage.list())

    assert [o.key for o in listed] == sorted(KEYS)  # "a-b" < "a/b" < "a/c/d.pb" < "a/c0"
    assert {o.key: o.size for o in listed} == {key: n for n, key in enumerate(KEYS)}
    assert all(o.metadata == {} and o.etag == "" for o in listed)


@pytest.mark.parametrize(
    "prefix", ["", "a", "a/", "a/c", "a/c/", "a/c/d", "a-", "b", ".w/", "é", "zz", "x/y/"]
)
def test_list_with_a_prefix(storage: FilesystemStorage, prefix: str) -> None:
    for key in KEYS:
        storage.put(key, b"x", "", {})

    assert [o.key for o in storage.list(prefix)] == sorted(k for k in KEYS if k.startswith(prefix))


def test_list_before_the_first_page(storage: FilesystemStorage, root: Path) -> None:
    assert list(storage.list()) == []
    assert list(storage.list("a/b")) == []
    assert not root.exists()


def test_list_skips_temporary_files_and_symbolic_links(
    storage: FilesystemStorage, root: Path, tmp_path: Path
) -> None:
    storage.put("w/1.pb", b"x", "", {})
    (root / "w" / f"{TEMP_PREFIX}0123abcd").write_bytes(b"left by a crash")
    (root / f"{TEMP_PREFIX}dir").mkdir()
    (root / f"{TEMP_PREFIX}dir" / "2.pb").write_bytes(b"x")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "3.pb").write_bytes(b"x")
    (root / "link").symlink_to(outside)
    (root / "w" / "4.pb").symlink_to(outside / "3.pb")

    assert [o.key for o in storage.list()] == ["w/1.pb"]


@pytest.mark.parametrize(
    "key",
    [
        "",
        "/etc/passwd",
        "../x.pb",
        "a/../../x.pb",
        "a/..",
        "a//b.pb",
        "a/",
        ".",
        "a/./b.pb",
        f"{TEMP_PREFIX}1234",
        f"a/{TEMP_PREFIX}1234/b",
        "a\0b",
    ],
)
def test_keys_outside_the_root_are_refused(
    storage: FilesystemStorage, root: Path, tmp_path: Path, key: str
) -> None:
    shown = key if key and key.isprintable() else repr(key)
    for op, call in [
        ("put", lambda: storage.put(key, b"x", "", {})),
        ("get", lambda: storage.get(key)),
        ("head", lambda: storage.head(key)),
        ("delete", lambda: storage.delete(key)),
    ]:
        with pytest.raises(StorageError) as caught:
            call()
        assert str(caught.value).startswith(f"filesystem storage {root}: {op} {shown}: ")
        assert not caught.value.missing
        assert "\n" not in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written anywhere


def test_a_symbolic_link_out_of_the_root_is_refused(
    storage: FilesystemStorage, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root.mkdir()
    (root / "w").symlink_to(outside)

    with pytest.raises(StorageError, match=r"put w/1\.pb: the key leads out of the root"):
        storage.put("w/1.pb", b"x", "", {})
    with pytest.raises(StorageError, match="leads out of the root"):
        list(storage.list("w/"))
    assert list(outside.iterdir()) == []


def test_a_missing_key(storage: FilesystemStorage, root: Path) -> None:
    storage.put("w/1.pb", b"x", "", {})

    for key in ["w/2.pb", "v/1.pb", "w", "w/1.pb/deeper"]:
        with pytest.raises(StorageError) as caught:
            storage.get(key)
        assert caught.value.missing
        assert str(caught.value).startswith(f"filesystem storage {root}: get {key}: ")
        assert storage.head(key) is None


def test_delete_removes_empty_directories(storage: FilesystemStorage, root: Path) -> None:
    storage.put("w/2024-05-01/1.pb", b"x", "", {})
    storage.put("w/2024-05-02/2.pb", b"x", "", {})
    storage.put("v/3.pb", b"x", "", {})

    storage.delete("w/2024-05-01/1.pb")
    assert sorted(os.listdir(root / "w")) == ["2024-05-02"]
    storage.delete("w/2024-05-02/2.pb")
    assert sorted(os.listdir(root)) == ["v"]
    storage.delete("v/3.pb")
    assert root.is_dir()  # the root stays
    assert os.listdir(root) == []
    assert list(storage.list()) == []


def test_delete_of_a_missing_key_is_fine(storage: FilesystemStorage, root: Path) -> None:
    storage.put("w/1.pb", b"x", "", {})

    storage.delete("w/2.pb")
    storage.delete("v/1.pb")
    storage.delete("w/1.pb/deeper")
    storage.delete("w")  # a directory is not a page

    assert files_under(root) == ["w/1.pb"]


def test_put_over_a_directory_fails(storage: FilesystemStorage, root: Path) -> None:
    storage.put("w/1.pb", b"x", "", {})

    with pytest.raises(StorageError, match=rf"^filesystem storage {root}: put w: ") as caught:
        storage.put("w", b"y", "", {})
    assert not caught.value.missing
    assert os.listdir(root) == ["w"]
    assert os.listdir(root / "w") == ["1.pb"]


def test_an_unwritable_root(tmp_path: Path) -> None:
    if os.geteuid() == 0:  # root writes through permissions: make mkdir fail instead
        blocker = tmp_path / "a-file"
        blocker.write_bytes(b"")
        root = blocker / "pages"
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        root = locked / "pages"
    storage = FilesystemStorage(root)

    with pytest.raises(StorageError) as caught:
        storage.put("w/1.pb", b"x", "", {})

    message = str(caught.value)
    assert message.startswith(f"filesystem storage {root}: put w/1.pb: ")
    assert "\n" not in message
    assert not caught.value.missing
    assert list(storage.list()) == []


def test_puts_and_deletes_in_one_directory_at_once(storage: FilesystemStorage) -> None:
    """A delete that removes a directory as it empties does not fail a put racing it."""
    errors: list[BaseException] = []

    def churn(name: str) -> None:
        try:
            for n in range(200):
                storage.put(f"w/d/{name}-{n}.pb", b"x", "", {})
                storage.delete(f"w/d/{name}-{n}.pb")
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=churn, args=(str(n),)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert list(storage.list()) == []


def test_open_storage_makes_the_filesystem_storage(tmp_path: Path) -> None:
    settings = SnapshotterSettings.embedded(tmp_path)
    storage = open_storage(settings)

    assert isinstance(storage, FilesystemStorage)
    storage.put("w/1.pb", b"x", "", {})
    assert (tmp_path / "snapshots" / "default" / "pages" / "w" / "1.pb").read_bytes() == b"x"
    storage.close()

    elsewhere = open_storage(SnapshotterSettings.embedded(tmp_path, path=tmp_path / "p"))
    assert isinstance(elsewhere, FilesystemStorage)
    assert elsewhere.root == tmp_path / "p"
