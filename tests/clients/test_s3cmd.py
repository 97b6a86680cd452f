"""s3cmd (Debian's) against the gateway: mb, put, get, ls, la, info (whose ?acl, ?policy,
?cors, ?lifecycle and ?requestPayment requests ripple answers 501 NotImplemented, which
s3cmd shows as "none"), sync of a directory (again: nothing to upload), a 12 MiB multipart
put in 5 MiB chunks, del --recursive --force (one DeleteObjects request) and rb; every
byte and listing checked against what was put, and one run against `ripple serve` in its
own process."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from tests.clients.conftest import (
    SQLITE_ONLY,
    TREE,
    Endpoint,
    MiB,
    keys_and_sizes,
    multipart_etag,
    random_file,
    read_tree,
    s3cmd_client,
    write_tree,
)


def listing(output: str) -> tuple[set[str], dict[str, int]]:
    """`s3cmd ls`/`la` output: its DIR lines' URIs, and its objects' URIs -> sizes."""
    dirs: set[str] = set()
    objects: dict[str, int] = {}
    for line in output.splitlines():
        fields = line.split(maxsplit=1)
        if not fields:
            continue
        if fields[0] == "DIR":
            dirs.add(fields[1].strip())
        else:
            _date, _time, size, uri = line.split(maxsplit=3)
            objects[uri] = int(size)
    return dirs, objects


def uploaded(output: str) -> set[str]:
    """The destinations of s3cmd's "upload: 'FILE' -> 'URI'" lines."""
    return set(re.findall(r"^upload: '.*' -> '(.*)'", output, re.MULTILINE))


def info_fields(output: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in output.splitlines():
        name, colon, value = line.strip().partition(":")
        if colon:
            fields[name] = value.strip()
    return fields


@SQLITE_ONLY
def test_put_get_ls_la_and_info(endpoint: Endpoint, s3: Any, tmp_path: Path) -> None:
    s3cmd = s3cmd_client(endpoint, tmp_path / "s3cmd")
    assert s3cmd("mb", "s3://sc-files").strip() == "Bucket 's3://sc-files/' created"
    hello = tmp_path / "hello.txt"
    hello.write_bytes(b"hello from s3cmd\n")
    data = random_file(tmp_path / "data.bin", 300_000, seed=11)
    s3cmd("put", hello, "s3://sc-files/hello.txt")
    s3cmd("put", tmp_path / "data.bin", "s3://sc-files/dir/data.bin")
    assert keys_and_sizes(s3, "sc-files") == {"hello.txt": 17, "dir/data.bin": 300_000}

    s3cmd("get", "s3://sc-files/hello.txt", tmp_path / "got.txt")
    s3cmd("get", "s3://sc-files/dir/data.bin", tmp_path / "got.bin")
    assert (tmp_path / "got.txt").read_bytes() == b"hello from s3cmd\n"
    assert (tmp_path / "got.bin").read_bytes() == data

    assert [line.split()[-1] for line in s3cmd("ls").splitlines()] == ["s3://sc-files"]
    assert listing(s3cmd("ls", "s3://sc-files")) == (
        {"s3://sc-files/dir/"},
        {"s3://sc-files/hello.txt": 17},
    )
    assert listing(s3cmd("ls", "--recursive", "s3://sc-files")) == (
        set(),
        {"s3://sc-files/hello.txt": 17, "s3://sc-files/dir/data.bin": 300_000},
    )
    s3cmd("mb", "s3://sc-other")
    s3cmd("put", hello, "s3://sc-other/copy.txt")
    assert listing(s3cmd("la")) == (
        {"s3://sc-files/dir/"},
        {"s3://sc-files/hello.txt": 17, "s3://sc-other/copy.txt": 17},
    )

    # info reads the object's headers, then asks for its bucket's policy and CORS (ripple
    # answers those 501 NotImplemented, and s3cmd shows them as "none") and its ACL: the
    # owner's FULL_CONTROL (private)
    about = info_fields(s3cmd("info", "s3://sc-files/dir/data.bin"))
    assert about["File size"] == "300000"
    assert about["MD5 sum"] == hashlib.md5(data).hexdigest()
    assert (about["Policy"], about["CORS"]) == ("none", "none")
    assert about["ACL"].endswith(": FULL_CONTROL"), about["ACL"]
    bucket = info_fields(s3cmd("info", "s3://sc-files"))
    assert bucket["Location"] == "us-east-1"
    assert (bucket["Policy"], bucket["CORS"]) == ("none", "none")
    assert bucket["ACL"].endswith(": FULL_CONTROL"), bucket["ACL"]


@SQLITE_ONLY
def test_sync_a_directory(endpoint: Endpoint, s3: Any, tmp_path: Path) -> None:
    s3cmd = s3cmd_client(endpoint, tmp_path / "s3cmd")
    s3cmd("mb", "s3://sc-sync")
    tree = tmp_path / "tree"
    write_tree(tree)

    first = s3cmd("sync", f"{tree}/", "s3://sc-sync/backup/")
    assert uploaded(first) == {f"s3://sc-sync/backup/{name}" for name in TREE}
    assert keys_and_sizes(s3, "sc-sync") == {f"backup/{k}": len(v) for k, v in TREE.items()}

    again = s3cmd("sync", f"{tree}/", "s3://sc-sync/backup/")
    assert uploaded(again) == set(), again

    changed = b"another readme, longer than the first\n" * 10
    (tree / "docs/readme.md").write_bytes(changed)
    third = s3cmd("sync", f"{tree}/", "s3://sc-sync/backup/")
    assert uploaded(third) == {"s3://sc-sync/backup/docs/readme.md"}

    down = tmp_path / "down"
    down.mkdir()
    s3cmd("sync", "s3://sc-sync/backup/", f"{down}/")
    assert read_tree(down) == read_tree(tree)
    assert read_tree(down)["docs/readme.md"] == changed


@SQLITE_ONLY
def test_multipart_put(endpoint: Endpoint, s3: Any, tmp_path: Path) -> None:
    s3cmd = s3cmd_client(endpoint, tmp_path / "s3cmd")
    s3cmd("mb", "s3://sc-parts")
    data = random_file(tmp_path / "large.bin", 12 * MiB, seed=13)

    s3cmd("put", "--multipart-chunk-size-mb=5", tmp_path / "large.bin", "s3://sc-parts/large")
    head = s3.head_object(Bucket="sc-parts", Key="large")
    assert head["ETag"] == multipart_etag(data, 5 * MiB)  # parts of 5, 5 and 2 MiB
    assert head["ContentLength"] == len(data)

    s3cmd("get", "s3://sc-parts/large", tmp_path / "back.bin")
    assert (tmp_path / "back.bin").read_bytes() == data
    # s3cmd keeps the whole file's MD5 in the object's metadata and shows that
    about = info_fields(s3cmd("info", "s3://sc-parts/large"))
    assert about["MD5 sum"] == hashlib.md5(data).hexdigest()


@SQLITE_ONLY
def test_del_recursive_and_rb(endpoint: Endpoint, s3: Any, tmp_path: Path) -> None:
    s3cmd = s3cmd_client(endpoint, tmp_path / "s3cmd")
    s3cmd("mb", "s3://sc-gone")
    write_tree(tmp_path / "tree")
    s3cmd("sync", f"{tmp_path / 'tree'}/", "s3://sc-gone/")

    refused = s3cmd.run("rb", "s3://sc-gone")
    assert refused.returncode != 0
    assert "BucketNotEmpty" in refused.stderr

    # s3cmd deletes a listing's keys with one DeleteObjects (POST ?delete) request
    removed = s3cmd("del", "--recursive", "--force", "s3://sc-gone")
    deleted = set(re.findall(r"^delete: '(.*)'", removed, re.MULTILINE))
    assert deleted == {f"s3://sc-gone/{name}" for name in TREE}
    assert keys_and_sizes(s3, "sc-gone") == {}
    assert s3cmd("ls", "--recursive", "s3://sc-gone").strip() == ""

    assert s3cmd("rb", "s3://sc-gone").strip() == "Bucket 's3://sc-gone/' removed"
    assert s3.list_buckets()["Buckets"] == []


def test_against_ripple_serve(served: Endpoint, tmp_path: Path) -> None:
    """mb, sync a tree with a multipart file up, list, sync it back, del, rb."""
    s3cmd = s3cmd_client(served, tmp_path / "s3cmd")
    write_tree(tmp_path / "tree")
    large = random_file(tmp_path / "tree" / "large.bin", 7 * MiB, seed=17)
    expected = {**TREE, "large.bin": large}
    s3cmd("mb", "s3://served")
    s3cmd("sync", "--multipart-chunk-size-mb=5", f"{tmp_path / 'tree'}/", "s3://served/tree/")
    assert listing(s3cmd("ls", "--recursive", "s3://served")) == (
        set(),
        {f"s3://served/tree/{name}": len(data) for name, data in expected.items()},
    )
    down = tmp_path / "down"
    down.mkdir()
    s3cmd("sync", "s3://served/tree/", f"{down}/")
    assert read_tree(down) == expected
    s3cmd("del", "--recursive", "--force", "s3://served")
    s3cmd("rb", "s3://served")
    assert s3cmd("ls").strip() == ""
