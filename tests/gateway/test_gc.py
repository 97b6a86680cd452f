"""`collect` (ripple data gc): what it removes (old temporaries, data files and parts no row
needs) and what it keeps (everything a row names, uploads in progress, anything young)."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from ripple.gateway import data as data_module
from ripple.gateway.gc import collect
from tests.gateway.helpers import data_files
from tests.gateway.wire import FILE_SIZE


def age(path: Path, seconds: float = 7200) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))
    if path.is_dir():
        for child in path.rglob("*"):
            os.utime(child, (past, past))


def test_collect_removes_only_what_no_row_needs(s3: Any, gateway: Any) -> None:
    services = gateway.services
    data = services.data
    s3.create_bucket(Bucket="bkt")
    s3.put_object(Bucket="bkt", Key="kept", Body=b"k" * FILE_SIZE)
    (kept,) = data_files(gateway.data_dir)
    # an upload in progress, with one part
    upload = s3.create_multipart_upload(Bucket="bkt", Key="pending")["UploadId"]
    s3.upload_part(Bucket="bkt", Key="pending", UploadId=upload, PartNumber=1, Body=b"p" * 10)
    # a completed upload whose parts a crash left behind
    done = s3.create_multipart_upload(Bucket="bkt", Key="done")["UploadId"]
    part = s3.upload_part(Bucket="bkt", Key="done", UploadId=done, PartNumber=1, Body=b"d" * 10)
    s3.complete_multipart_upload(
        Bucket="bkt",
        Key="done",
        UploadId=done,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    leftover_parts = data.parts / uuid.UUID(hex=done).hex
    leftover_parts.mkdir(parents=True, exist_ok=True)
    (leftover_parts / "00001.stale").write_bytes(b"d" * 10)
    # a file placed for a commit that never happened, and an upload's temporary file
    orphan = data.path_of(uuid.uuid4())
    orphan.parent.mkdir(parents=True, exist_ok=True)
    orphan.write_bytes(b"o" * 100)
    temporary = data.tmp / "torn"
    temporary.write_bytes(b"t" * 100)
    young_orphan = data.path_of(uuid.uuid4())
    young_orphan.parent.mkdir(parents=True, exist_ok=True)
    young_orphan.write_bytes(b"y")
    for path in (kept, orphan, temporary, leftover_parts, data.parts / uuid.UUID(hex=upload).hex):
        age(path)

    report = collect(services.db, data, dry_run=True)
    assert set(report.paths) == {orphan, temporary, leftover_parts}
    assert orphan.exists()  # a dry run removes nothing
    assert report.bytes == 100 + 100 + 10

    collect(services.db, data, grace_seconds=0)  # raised to the minimum: young files stay
    assert not orphan.exists()
    assert not temporary.exists()
    assert not leftover_parts.exists()
    assert young_orphan.exists()
    assert kept.exists()
    assert (data.parts / uuid.UUID(hex=upload).hex).exists()
    assert s3.get_object(Bucket="bkt", Key="kept")["Body"].read() == b"k" * FILE_SIZE
    assert s3.get_object(Bucket="bkt", Key="done")["Body"].read() == b"d" * 10
    parts = s3.list_parts(Bucket="bkt", Key="pending", UploadId=upload)["Parts"]
    assert [p["PartNumber"] for p in parts] == [1]


def test_gc_on_a_machine_whose_clock_runs_ahead_takes_no_young_file(
    gateway: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Age is judged by the filesystem's clock: a gc run on a machine two hours ahead of
    the (network) filesystem sees a file placed a moment ago as young."""
    data = gateway.services.data
    placed = data.path_of(uuid.uuid4())  # as for a commit still to come
    placed.parent.mkdir(parents=True, exist_ok=True)
    placed.write_bytes(b"p")
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 7200)
    assert collect(gateway.services.db, data, grace_seconds=60).paths == []
    assert placed.exists()


def test_new_data_not_committed_within_its_window_is_refused_and_removed(
    s3: Any, gateway: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit later than COMMIT_WINDOW_S after its data's last write could meet a gc that
    took the file: PutObject, CopyObject and CompleteMultipartUpload refuse it instead
    (503 SlowDown, try again), and keep neither the file nor a row."""
    s3.create_bucket(Bucket="bkt")
    s3.put_object(Bucket="bkt", Key="source", Body=b"s" * FILE_SIZE)
    upload = s3.create_multipart_upload(Bucket="bkt", Key="parts")["UploadId"]
    part = s3.upload_part(Bucket="bkt", Key="parts", UploadId=upload, PartNumber=1, Body=b"p" * 9)
    data = gateway.services.data
    before = set(data.stored())
    monkeypatch.setattr(data_module, "COMMIT_WINDOW_S", -1.0)  # every commit is too late
    calls = [
        lambda: s3.put_object(Bucket="bkt", Key="put", Body=b"x" * FILE_SIZE),
        lambda: s3.copy_object(Bucket="bkt", Key="copy", CopySource="bkt/source"),
        lambda: s3.complete_multipart_upload(
            Bucket="bkt",
            Key="parts",
            UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
        ),
    ]
    for call in calls:
        with pytest.raises(ClientError) as refused:
            call()
        assert refused.value.response["Error"]["Code"] == "SlowDown"
    assert set(data.stored()) == before
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="bkt")["Contents"]] == ["source"]
    monkeypatch.undo()  # the upload is still there to complete
    s3.complete_multipart_upload(
        Bucket="bkt",
        Key="parts",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert s3.get_object(Bucket="bkt", Key="parts")["Body"].read() == b"p" * 9
