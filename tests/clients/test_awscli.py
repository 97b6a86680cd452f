"""aws-cli v1 against the gateway: `aws s3` mb/cp (a small file, and a 20 MiB file it sends
as a three-part multipart upload)/sync (uploads only what changed)/ls/rm --recursive/rb,
and `aws s3api` versioning, list-object-versions, head-object, get-object --range and
delete-objects; every byte and listing checked against what was put, and one run against
`ripple serve` in its own process."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from tests.clients.conftest import (
    SQLITE_ONLY,
    TREE,
    Endpoint,
    MiB,
    aws_client,
    keys_and_sizes,
    multipart_etag,
    random_file,
    read_tree,
    write_tree,
)


def listing(output: str) -> tuple[set[str], dict[str, int]]:
    """`aws s3 ls` output: its common prefixes (PRE lines) and its objects (name -> size)."""
    prefixes: set[str] = set()
    objects: dict[str, int] = {}
    for line in output.splitlines():
        if line.strip().startswith("PRE "):
            prefixes.add(line.strip().removeprefix("PRE "))
        elif line.strip():
            _date, _time, size, name = line.split(maxsplit=3)
            objects[name] = int(size)
    return prefixes, objects


def transferred(output: str, verb: str, bucket: str) -> set[str]:
    """The keys an `aws s3` command reports it uploaded or deleted ("upload: X to s3://…")."""
    return set(re.findall(rf"^{verb}: (?:.* to )?s3://{bucket}/(.+)$", output, re.MULTILINE))


@SQLITE_ONLY
def test_cp_a_small_and_a_multipart_file_up_and_down(
    endpoint: Endpoint, s3: Any, tmp_path: Path
) -> None:
    aws = aws_client(endpoint, tmp_path / "aws")
    assert aws("s3", "mb", "s3://cli-files").strip() == "make_bucket: cli-files"
    small = tmp_path / "small.txt"
    small.write_bytes(b"hello, ripple\n")
    big = random_file(tmp_path / "big.bin", 20 * MiB)

    aws("s3", "cp", small, "s3://cli-files/small.txt", "--no-progress")
    aws("s3", "cp", tmp_path / "big.bin", "s3://cli-files/dir/big.bin", "--no-progress")
    assert keys_and_sizes(s3, "cli-files") == {"small.txt": 14, "dir/big.bin": 20 * MiB}

    # aws-cli's default 8 MiB chunks: parts of 8, 8 and 4 MiB, and S3's multipart ETag
    head = json.loads(aws("s3api", "head-object", "--bucket", "cli-files", "--key", "dir/big.bin"))
    assert head["ContentLength"] == 20 * MiB
    assert head["ETag"] == multipart_etag(big, 8 * MiB)

    down = tmp_path / "down"
    aws("s3", "cp", "s3://cli-files/small.txt", down / "small.txt", "--no-progress")
    aws("s3", "cp", "s3://cli-files/dir/big.bin", down / "big.bin", "--no-progress")
    assert (down / "small.txt").read_bytes() == b"hello, ripple\n"
    assert (down / "big.bin").read_bytes() == big


@SQLITE_ONLY
def test_sync_uploads_only_what_changed(endpoint: Endpoint, s3: Any, tmp_path: Path) -> None:
    aws = aws_client(endpoint, tmp_path / "aws")
    aws("s3", "mb", "s3://cli-sync")
    tree = tmp_path / "tree"
    write_tree(tree)

    first = aws("s3", "sync", tree, "s3://cli-sync/backup", "--no-progress")
    assert transferred(first, "upload", "cli-sync") == {f"backup/{name}" for name in TREE}
    assert keys_and_sizes(s3, "cli-sync") == {f"backup/{k}": len(v) for k, v in TREE.items()}

    down = tmp_path / "down"
    aws("s3", "sync", "s3://cli-sync/backup", down, "--no-progress")
    assert read_tree(down) == TREE

    again = aws("s3", "sync", tree, "s3://cli-sync/backup", "--no-progress")
    assert again.strip() == "", "a second sync of an unchanged tree uploads nothing"

    changed = b"a longer readme than before\n" * 30
    (tree / "docs/readme.md").write_bytes(changed)
    third = aws("s3", "sync", tree, "s3://cli-sync/backup", "--no-progress")
    assert transferred(third, "upload", "cli-sync") == {"backup/docs/readme.md"}
    body = s3.get_object(Bucket="cli-sync", Key="backup/docs/readme.md")["Body"].read()
    assert body == changed


@SQLITE_ONLY
def test_ls_plain_and_recursive(endpoint: Endpoint, tmp_path: Path) -> None:
    aws = aws_client(endpoint, tmp_path / "aws")
    aws("s3", "mb", "s3://cli-list")
    write_tree(tmp_path / "tree")
    aws("s3", "sync", tmp_path / "tree", "s3://cli-list", "--no-progress")

    buckets = [line.split(maxsplit=2)[2] for line in aws("s3", "ls").splitlines()]
    assert buckets == ["cli-list"]
    assert listing(aws("s3", "ls", "s3://cli-list")) == (
        {"docs/", "media/"},
        {"top.txt": len(TREE["top.txt"])},
    )
    assert listing(aws("s3", "ls", "s3://cli-list/docs/")) == (
        {"deeper/"},
        {"readme.md": len(TREE["docs/readme.md"])},
    )
    assert listing(aws("s3", "ls", "--recursive", "s3://cli-list")) == (
        set(),
        {name: len(data) for name, data in TREE.items()},
    )


@SQLITE_ONLY
def test_rm_recursive_empties_the_bucket_and_rb_removes_it(
    endpoint: Endpoint, s3: Any, tmp_path: Path
) -> None:
    aws = aws_client(endpoint, tmp_path / "aws")
    aws("s3", "mb", "s3://cli-gone")
    write_tree(tmp_path / "tree")
    aws("s3", "sync", tmp_path / "tree", "s3://cli-gone", "--no-progress")

    refused = aws.run("s3", "rb", "s3://cli-gone")
    assert refused.returncode != 0
    assert "BucketNotEmpty" in refused.stderr

    # DeleteObjects (aws-cli v1's `s3 rm --recursive` deletes one key per request)
    batch = ["docs/deeper/deepest/leaf.bin", "media/empty", "never/was"]
    answer = json.loads(
        aws(
            "s3api",
            "delete-objects",
            "--bucket",
            "cli-gone",
            "--delete",
            json.dumps({"Objects": [{"Key": key} for key in batch]}),
        )
    )
    assert {d["Key"] for d in answer["Deleted"]} == set(batch)
    assert not answer.get("Errors")
    left = {name for name in TREE if name not in batch}
    assert set(keys_and_sizes(s3, "cli-gone")) == left

    removed = aws("s3", "rm", "--recursive", "s3://cli-gone")
    assert transferred(removed, "delete", "cli-gone") == left
    assert keys_and_sizes(s3, "cli-gone") == {}
    assert aws("s3", "ls", "--recursive", "s3://cli-gone").strip() == ""

    assert aws("s3", "rb", "s3://cli-gone").strip() == "remove_bucket: cli-gone"
    assert "cli-gone" not in aws("s3", "ls")


@SQLITE_ONLY
def test_versions_head_and_ranges(endpoint: Endpoint, tmp_path: Path) -> None:
    aws = aws_client(endpoint, tmp_path / "aws")
    aws("s3", "mb", "s3://cli-versions")
    aws(
        "s3api",
        "put-bucket-versioning",
        "--bucket",
        "cli-versions",
        "--versioning-configuration",
        "Status=Enabled",
    )
    versioning = json.loads(aws("s3api", "get-bucket-versioning", "--bucket", "cli-versions"))
    assert versioning["Status"] == "Enabled"

    first, second = b"first\n", b"the second version\n"
    note = tmp_path / "note.txt"
    for data in (first, second):
        note.write_bytes(data)
        aws("s3", "cp", note, "s3://cli-versions/note.txt", "--no-progress")
    listed = json.loads(
        aws("s3api", "list-object-versions", "--bucket", "cli-versions", "--prefix", "note")
    )
    versions = listed["Versions"]
    assert [(v["Key"], v["Size"], v["IsLatest"]) for v in versions] == [
        ("note.txt", len(second), True),
        ("note.txt", len(first), False),
    ]
    newest, oldest = versions[0]["VersionId"], versions[1]["VersionId"]

    head = json.loads(aws("s3api", "head-object", "--bucket", "cli-versions", "--key", "note.txt"))
    assert head["ContentLength"] == len(second)
    assert head["VersionId"] == newest
    assert head["ETag"] == f'"{hashlib.md5(second).hexdigest()}"'

    old = tmp_path / "old.txt"
    got = json.loads(
        aws(
            "s3api",
            "get-object",
            "--bucket",
            "cli-versions",
            "--key",
            "note.txt",
            "--version-id",
            oldest,
            old,
        )
    )
    assert got["VersionId"] == oldest
    assert old.read_bytes() == first

    data = random_file(tmp_path / "data.bin", MiB, seed=7)
    aws("s3", "cp", tmp_path / "data.bin", "s3://cli-versions/data.bin", "--no-progress")
    for asked, expected, content_range in [
        ("bytes=1000-1999", data[1000:2000], f"bytes 1000-1999/{MiB}"),
        ("bytes=-10", data[-10:], f"bytes {MiB - 10}-{MiB - 1}/{MiB}"),
    ]:
        part = tmp_path / "part.bin"
        answer = json.loads(
            aws(
                "s3api",
                "get-object",
                "--bucket",
                "cli-versions",
                "--key",
                "data.bin",
                "--range",
                asked,
                part,
            )
        )
        assert answer["ContentRange"] == content_range
        assert answer["ContentLength"] == len(expected)
        assert part.read_bytes() == expected

    # deleting in a versioned bucket leaves a delete marker on top of both versions
    aws("s3", "rm", "s3://cli-versions/note.txt")
    listed = json.loads(
        aws("s3api", "list-object-versions", "--bucket", "cli-versions", "--prefix", "note")
    )
    assert [m["IsLatest"] for m in listed["DeleteMarkers"]] == [True]
    assert [v["VersionId"] for v in listed["Versions"]] == [newest, oldest]


def test_against_ripple_serve(served: Endpoint, tmp_path: Path) -> None:
    """mb, sync a tree and a two-part file up, list, copy back, rm --recursive, rb."""
    aws = aws_client(served, tmp_path / "aws")
    aws("s3", "mb", "s3://served")
    write_tree(tmp_path / "tree")
    big = random_file(tmp_path / "tree" / "big.bin", 9 * MiB, seed=3)
    aws("s3", "sync", tmp_path / "tree", "s3://served/tree", "--no-progress")
    expected = {**TREE, "big.bin": big}
    assert listing(aws("s3", "ls", "--recursive", "s3://served")) == (
        set(),
        {f"tree/{name}": len(data) for name, data in expected.items()},
    )
    aws("s3", "cp", "--recursive", "s3://served/tree", tmp_path / "down", "--no-progress")
    assert read_tree(tmp_path / "down") == expected
    removed = aws("s3", "rm", "--recursive", "s3://served")
    assert transferred(removed, "delete", "served") == {f"tree/{name}" for name in expected}
    aws("s3", "rb", "s3://served")
    assert aws("s3", "ls").strip() == ""
