"""rclone (Debian's) against the gateway: mkdir, copy a tree up and back (`rclone check`
finds no differences), a 12 MiB file sent as a multipart upload in 5 MiB chunks, lsf and
lsjson (sizes and MD5s), delete/deletefile/purge and rmdir; every byte and listing checked
against what was put, and one run against `ripple serve` in its own process."""

from __future__ import annotations

import hashlib
import json
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
    rclone_client,
    read_tree,
    write_tree,
)

# the directories of TREE, as `rclone lsf -R` shows them
TREE_DIRS = {"docs/", "docs/deeper/", "docs/deeper/deepest/", "media/"}
MULTIPART = ["--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M"]


def bucket_names(s3: Any) -> set[str]:
    return {b["Name"] for b in s3.list_buckets()["Buckets"]}


@SQLITE_ONLY
def test_copy_a_tree_up_and_back(endpoint: Endpoint, s3: Any, tmp_path: Path) -> None:
    rclone = rclone_client(endpoint, tmp_path / "rclone")
    rclone("mkdir", "ripple:rc-tree")
    assert bucket_names(s3) == {"rc-tree"}
    write_tree(tmp_path / "tree")

    rclone("copy", tmp_path / "tree", "ripple:rc-tree/tree")
    assert keys_and_sizes(s3, "rc-tree") == {f"tree/{k}": len(v) for k, v in TREE.items()}
    checked = rclone.run("check", tmp_path / "tree", "ripple:rc-tree/tree")
    assert checked.returncode == 0, checked.stderr
    assert "0 differences found" in checked.stderr
    assert f"{len(TREE)} matching files" in checked.stderr

    rclone("copy", "ripple:rc-tree/tree", tmp_path / "back")
    assert read_tree(tmp_path / "back") == TREE

    assert set(rclone("lsf", "-R", "ripple:rc-tree/tree").splitlines()) == set(TREE) | TREE_DIRS
    assert rclone("lsf", "ripple:rc-tree/tree/docs").splitlines() == ["deeper/", "readme.md"]
    listed = json.loads(rclone("lsjson", "-R", "--files-only", "--hash", "ripple:rc-tree"))
    assert {e["Path"]: (e["Size"], e["Hashes"]["md5"]) for e in listed} == {
        f"tree/{name}": (len(data), hashlib.md5(data).hexdigest()) for name, data in TREE.items()
    }


@SQLITE_ONLY
def test_a_large_file_goes_up_in_parts(endpoint: Endpoint, s3: Any, tmp_path: Path) -> None:
    rclone = rclone_client(endpoint, tmp_path / "rclone")
    rclone("mkdir", "ripple:rc-parts")
    data = random_file(tmp_path / "large.bin", 12 * MiB, seed=5)

    rclone("copyto", tmp_path / "large.bin", "ripple:rc-parts/large.bin", *MULTIPART)
    # parts of 5, 5 and 2 MiB: S3's multipart ETag proves rclone used a multipart upload
    head = s3.head_object(Bucket="rc-parts", Key="large.bin")
    assert head["ETag"] == multipart_etag(data, 5 * MiB)
    assert head["ContentLength"] == len(data)
    # rclone keeps the whole file's MD5 in the object's metadata and shows it as the hash
    listed = json.loads(rclone("lsjson", "--hash", "ripple:rc-parts"))
    assert [(e["Path"], e["Size"], e["Hashes"]["md5"]) for e in listed] == [
        ("large.bin", len(data), hashlib.md5(data).hexdigest())
    ]

    rclone("copyto", "ripple:rc-parts/large.bin", tmp_path / "back.bin")
    assert (tmp_path / "back.bin").read_bytes() == data


@SQLITE_ONLY
def test_delete_purge_and_rmdir(endpoint: Endpoint, s3: Any, tmp_path: Path) -> None:
    rclone = rclone_client(endpoint, tmp_path / "rclone")
    write_tree(tmp_path / "tree")
    rclone("mkdir", "ripple:rc-gone")
    rclone("copy", tmp_path / "tree", "ripple:rc-gone")

    refused = rclone.run("rmdir", "ripple:rc-gone")
    assert refused.returncode != 0
    assert "BucketNotEmpty" in refused.stderr
    assert len(keys_and_sizes(s3, "rc-gone")) == len(TREE)

    rclone("delete", "ripple:rc-gone/docs")
    assert set(keys_and_sizes(s3, "rc-gone")) == {"top.txt", "media/empty"}
    rclone("deletefile", "ripple:rc-gone/top.txt")
    rclone("purge", "ripple:rc-gone/media")
    assert keys_and_sizes(s3, "rc-gone") == {}
    assert rclone("lsf", "-R", "ripple:rc-gone") == ""

    rclone("rmdir", "ripple:rc-gone")
    assert "rc-gone" not in bucket_names(s3)

    # purge of a whole bucket: its objects and the bucket
    rclone("copy", tmp_path / "tree", "ripple:rc-purged")
    assert len(keys_and_sizes(s3, "rc-purged")) == len(TREE)
    rclone("purge", "ripple:rc-purged")
    assert bucket_names(s3) == set()
    assert rclone("lsf", "ripple:") == ""


def test_against_ripple_serve(served: Endpoint, tmp_path: Path) -> None:
    """mkdir, copy a tree with a multipart file up, check, list, copy back, purge."""
    rclone = rclone_client(served, tmp_path / "rclone")
    write_tree(tmp_path / "tree")
    large = random_file(tmp_path / "tree" / "large.bin", 7 * MiB, seed=9)
    expected = {**TREE, "large.bin": large}
    rclone("mkdir", "ripple:served")
    rclone("copy", tmp_path / "tree", "ripple:served/tree", *MULTIPART)
    checked = rclone.run("check", tmp_path / "tree", "ripple:served/tree")
    assert checked.returncode == 0, checked.stderr
    assert "0 differences found" in checked.stderr
    listed = json.loads(rclone("lsjson", "-R", "--files-only", "ripple:served"))
    assert {e["Path"]: e["Size"] for e in listed} == {
        f"tree/{name}": len(data) for name, data in expected.items()
    }
    rclone("copy", "ripple:served/tree", tmp_path / "back")
    assert read_tree(tmp_path / "back") == expected
    rclone("purge", "ripple:served")
    assert rclone("lsf", "ripple:") == ""
