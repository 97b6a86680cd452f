"""Two `ripple serve` processes on different ports over one metabase (SQLite, and
PostgreSQL as gateways on several machines would share it) and one data directory: what one
does, the other sees at once; the delete rate limit is one budget; a rename retried through
the other is answered as the first; two completes of one upload make one version; a
notification put through one makes the other record its writes; a revoked key is refused
by both; `ripple data gc` takes nothing either needs."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from ripple.metabase import Metabase
from tests.changestream.conftest import read_all
from tests.conftest import ADMIN_URL, fresh_postgres_database
from tests.gateway.helpers import client
from tests.ports import free_port
from tests.ripple_process import RippleProcess, credentials, ripple
from tests.waiting import wait_for

BURST = 20  # deletes per project, shared by both gateways; the rate refills almost nothing


@dataclass
class Pair:
    """The two gateways, the user's credentials and what they share."""

    urls: tuple[str, str]
    access: str
    secret: str
    env: dict[str, str]
    cwd: Path

    def s3(self, which: int, access: str | None = None, secret: str | None = None) -> Any:
        return client(self.urls[which], access or self.access, secret or self.secret)

    def ripple(self, *args: str) -> str:
        return ripple(self.cwd, *args, **self.env)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)]
)
def pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pair]:
    cwd = tmp_path_factory.mktemp("gateways")
    with _database(request.param, cwd) as url:
        env = {
            "RIPPLE_DATABASE_URL": url,
            "RIPPLE_DATA_DIR": str(cwd / "shared"),
            "RIPPLE_S3_DELETE_RATE": "0.001",
            "RIPPLE_S3_DELETE_BURST": str(BURST),
        }
        pair = Pair(("", ""), "", "", env, cwd)
        pair.access, pair.secret = credentials(pair.ripple("user", "create", "alice"))
        ports = free_port(), free_port()
        a = RippleProcess(cwd, "serve", "--address", f"127.0.0.1:{ports[0]}", **env)
        b = RippleProcess(cwd, "serve", "--address", f"127.0.0.1:{ports[1]}", **env)
        with a, b:
            a.wait_for_output("gateway running", timeout=60)
            b.wait_for_output("gateway running", timeout=60)
            pair.urls = (f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[1]}")
            yield pair
            for gateway in (a, b):
                assert "Traceback" not in gateway.stderr, gateway.stderr


def _database(kind: str, cwd: Path) -> Any:
    if kind == "postgresql":
        return fresh_postgres_database(ADMIN_URL, "ripple_gateways")
    return _sqlite(cwd)


class _sqlite:
    def __init__(self, cwd: Path) -> None:
        self.url = f"sqlite:///{cwd / 'metabase.db'}"

    def __enter__(self) -> str:
        return self.url

    def __exit__(self, *_: object) -> None:
        pass


def code(raised: pytest.ExceptionInfo[ClientError]) -> str:
    return str(raised.value.response["Error"]["Code"])


def test_what_one_gateway_does_the_other_sees_at_once(pair: Pair) -> None:
    a, b = pair.s3(0), pair.s3(1)
    a.create_bucket(Bucket="seen")
    b.head_bucket(Bucket="seen")
    a.put_object(Bucket="seen", Key="k", Body=b"x" * 5000, Tagging="colour=blue")
    assert b.get_object(Bucket="seen", Key="k")["Body"].read() == b"x" * 5000
    assert b.get_object_tagging(Bucket="seen", Key="k")["TagSet"] == [
        {"Key": "colour", "Value": "blue"}
    ]
    b.copy_object(Bucket="seen", Key="copy", CopySource={"Bucket": "seen", "Key": "k"})
    assert a.get_object(Bucket="seen", Key="copy")["Body"].read() == b"x" * 5000
    a.rename_object(Bucket="seen", Key="renamed", RenameSource="seen/copy")
    assert b.get_object(Bucket="seen", Key="renamed")["Body"].read() == b"x" * 5000
    b.delete_object(Bucket="seen", Key="k")
    with pytest.raises(ClientError) as gone:
        a.head_object(Bucket="seen", Key="k")
    assert gone.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    upload = a.create_multipart_upload(Bucket="seen", Key="parts")["UploadId"]
    part = b.upload_part(
        Bucket="seen", Key="parts", UploadId=upload, PartNumber=1, Body=b"p" * 3000
    )
    assert [
        p["ETag"] for p in a.list_parts(Bucket="seen", Key="parts", UploadId=upload)["Parts"]
    ] == [part["ETag"]]
    b.complete_multipart_upload(
        Bucket="seen",
        Key="parts",
        UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    assert a.get_object(Bucket="seen", Key="parts")["Body"].read() == b"p" * 3000
    listed = [o["Key"] for o in b.list_objects_v2(Bucket="seen")["Contents"]]
    assert listed == ["parts", "renamed"]


def test_a_bucket_deleted_and_made_again_by_another_user_is_theirs_at_once(pair: Pair) -> None:
    carol_access, carol_secret = credentials(pair.ripple("user", "create", "carol"))
    a, b = pair.s3(0), pair.s3(1)
    a.create_bucket(Bucket="handed-on")
    a.put_object(Bucket="handed-on", Key="k", Body=b"1")
    a.get_object(Bucket="handed-on", Key="k")  # both remember alice owns the name
    b.get_object(Bucket="handed-on", Key="k")
    a.delete_object(Bucket="handed-on", Key="k")
    a.delete_bucket(Bucket="handed-on")
    carol_a = pair.s3(0, carol_access, carol_secret)
    carol_b = pair.s3(1, carol_access, carol_secret)
    carol_a.create_bucket(Bucket="handed-on")
    carol_b.put_object(Bucket="handed-on", Key="k", Body=b"carol's")
    assert carol_a.get_object(Bucket="handed-on", Key="k")["Body"].read() == b"carol's"


def test_the_delete_rate_limit_is_one_budget_across_both(pair: Pair) -> None:
    bob_access, bob_secret = credentials(pair.ripple("user", "create", "bob"))
    gateways = [pair.s3(0, bob_access, bob_secret), pair.s3(1, bob_access, bob_secret)]
    gateways[0].create_bucket(Bucket="limited")
    answers = Counter[tuple[int, str]]()
    for n in range(BURST + 6):
        which = n % 2
        try:
            gateways[which].delete_object(Bucket="limited", Key=f"k{n}")
            answers[which, "deleted"] += 1
        except ClientError as e:
            answers[which, e.response["Error"]["Code"]] += 1
    # each gateway alone would have allowed BURST
    assert answers == {
        (0, "deleted"): BURST // 2,
        (1, "deleted"): BURST // 2,
        (0, "SlowDown"): 3,
        (1, "SlowDown"): 3,
    }


def test_a_rename_retried_through_the_other_gateway_is_answered_as_the_first(
    pair: Pair,
) -> None:
    a, b = pair.s3(0), pair.s3(1)
    a.create_bucket(Bucket="renames")
    a.put_object(Bucket="renames", Key="from", Body=b"moved")
    a.rename_object(Bucket="renames", Key="to", RenameSource="renames/from", ClientToken="t-1")
    # the client's retry reaches the other gateway: the source is gone, the answer the same
    b.rename_object(Bucket="renames", Key="to", RenameSource="renames/from", ClientToken="t-1")
    assert a.get_object(Bucket="renames", Key="to")["Body"].read() == b"moved"
    with pytest.raises(ClientError) as mismatch:
        b.rename_object(Bucket="renames", Key="to", RenameSource="renames/x", ClientToken="t-1")
    assert code(mismatch) == "IdempotencyParameterMismatch"
    # a failed rename frees its token for the next try
    with pytest.raises(ClientError) as missing:
        a.rename_object(Bucket="renames", Key="2", RenameSource="renames/none", ClientToken="t-2")
    assert code(missing) == "NoSuchKey"
    b.put_object(Bucket="renames", Key="none", Body=b"now here")
    b.rename_object(Bucket="renames", Key="2", RenameSource="renames/none", ClientToken="t-2")
    assert a.get_object(Bucket="renames", Key="2")["Body"].read() == b"now here"


def test_completes_of_one_upload_through_both_make_one_version(pair: Pair) -> None:
    a, b = pair.s3(0), pair.s3(1)
    a.create_bucket(Bucket="uploads")
    a.put_bucket_versioning(Bucket="uploads", VersioningConfiguration={"Status": "Enabled"})
    for n in range(6):
        key = f"k{n}"
        upload = a.create_multipart_upload(Bucket="uploads", Key=key)["UploadId"]
        body = bytes([n]) * 4000
        part = a.upload_part(Bucket="uploads", Key=key, UploadId=upload, PartNumber=1, Body=body)
        document = {"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
        answers = _at_once([a, b], partial(_complete, key=key, upload=upload, document=document))
        assert answers[0]["VersionId"] == answers[1]["VersionId"]
        assert answers[0]["ETag"] == answers[1]["ETag"]
        assert b.get_object(Bucket="uploads", Key=key)["Body"].read() == body
    versions = a.list_object_versions(Bucket="uploads")["Versions"]
    assert sorted(v["Key"] for v in versions) == [f"k{n}" for n in range(6)]


def _complete(s3: Any, *, key: str, upload: str, document: dict[str, Any]) -> Any:
    return s3.complete_multipart_upload(
        Bucket="uploads", Key=key, UploadId=upload, MultipartUpload=document
    )


def _at_once(clients: list[Any], call: Callable[[Any], Any]) -> list[Any]:
    """`call(client)` for every client, in threads let go together; their answers."""
    start = threading.Barrier(len(clients))
    answers: list[Any] = [None] * len(clients)
    errors: list[BaseException] = []

    def run(which: int) -> None:
        start.wait()
        try:
            answers[which] = call(clients[which])
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    if errors:
        raise errors[0]
    return answers


def test_a_notification_put_through_one_records_writes_through_the_other(pair: Pair) -> None:
    a, b = pair.s3(0), pair.s3(1)
    arn = _pull_topic(pair, "pulled")
    a.create_bucket(Bucket="evented")
    a.put_bucket_notification_configuration(
        Bucket="evented",
        NotificationConfiguration={
            "TopicConfigurations": [{"TopicArn": arn, "Events": ["s3:ObjectCreated:*"]}]
        },
    )
    db = Metabase(pair.env["RIPPLE_DATABASE_URL"])
    try:

        def keys_recorded() -> Counter[str]:
            return Counter(
                mod["keys"]["object_key"]
                for record in read_all(db)
                for mod in record["mods"]
                if record["table_name"] == "objects" and mod["keys"]["bucket_name"] == "evented"
            )

        # the other gateway learns of it within a second; until it has, it records nothing
        probes = iter(range(1000))

        def b_records() -> bool:
            b.put_object(Bucket="evented", Key=f"probe-{next(probes)}", Body=b"p")
            return any(key.startswith("probe-") for key in keys_recorded())

        wait_for(b_records, what="gateway B to record writes to the bucket", timeout=20)
        written = [f"a-{n}" for n in range(10)] + [f"b-{n}" for n in range(10)]
        for key in written:
            (a if key.startswith("a-") else b).put_object(Bucket="evented", Key=key, Body=b"e")
        recorded = keys_recorded()
        assert {key: recorded[key] for key in written} == dict.fromkeys(written, 1)
    finally:
        db.dispose()


def test_a_revoked_key_is_refused_by_both(pair: Pair) -> None:
    access, secret = credentials(pair.ripple("key", "create", "alice"))
    clients = [pair.s3(0, access, secret), pair.s3(1, access, secret)]
    for s3 in clients:  # both now hold the key in their caches
        s3.list_buckets()
    pair.ripple("key", "revoke", access)

    def refused(s3: Any) -> bool:
        try:
            s3.list_buckets()
        except ClientError as e:
            return bool(e.response["Error"]["Code"] == "InvalidAccessKeyId")
        return False

    for s3 in clients:  # within the keyring's second (a far longer timeout than that)
        wait_for(partial(refused, s3), what="the revoked key refused", timeout=5)


def test_data_gc_beside_both_takes_nothing_they_need(pair: Pair) -> None:
    a, b = pair.s3(0), pair.s3(1)
    a.create_bucket(Bucket="collected")
    for n in range(5):
        (a, b)[n % 2].put_object(Bucket="collected", Key=f"k{n}", Body=bytes([n]) * 3000)
    # every file as old as a crash's leftovers: only the rows say which are needed
    for path in (pair.cwd / "shared" / "objects").rglob("*"):
        os.utime(path, (time.time() - 7200, time.time() - 7200))
    assert "removed 0 temporary files, 0 orphaned data files" in pair.ripple(
        "data", "gc", "--older-than", "60"
    )
    for n in range(5):
        body = (b, a)[n % 2].get_object(Bucket="collected", Key=f"k{n}")["Body"].read()
        assert body == bytes([n]) * 3000


def test_puts_of_the_same_keys_through_both_at_once_are_each_recorded_once_in_order(
    pair: Pair,
) -> None:
    """Both gateways commit in groups, and over PostgreSQL a write that waits for a key the
    other holds is undone and made again alone: still every PUT is answered, recorded once,
    and the last one recorded for a key is the one a GET returns."""
    a = pair.s3(0)
    a.create_bucket(Bucket="contended")
    a.put_bucket_notification_configuration(
        Bucket="contended",
        NotificationConfiguration={
            "TopicConfigurations": [
                {
                    "TopicArn": _pull_topic(pair, "contended-topic"),
                    "Events": ["s3:ObjectCreated:*"],
                }
            ]
        },
    )
    keys = [f"k{n}" for n in range(4)]
    db = Metabase(pair.env["RIPPLE_DATABASE_URL"])
    try:
        wait_for(
            lambda: _recorded_through_both(pair, db),
            what="both gateways to record writes to the bucket",
            timeout=20,
        )
        before = len(read_all(db))
        clients = [pair.s3(n % 2) for n in range(8)]  # made here: not thread-safe

        def writer(n: int) -> list[str]:
            bodies = []
            for i in range(16):
                body = f"writer {n} put {i}"
                clients[n].put_object(Bucket="contended", Key=keys[i % 4], Body=body.encode())
                bodies.append(body)
            return bodies

        results: dict[int, list[str]] = {}
        threads = [
            threading.Thread(target=lambda n=n: results.__setitem__(n, writer(n))) for n in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(results) == list(range(8))  # every writer's every PUT answered
        records = [r for r in read_all(db)[before:] if r["table_name"] == "objects"]
        inserts = [mod for r in records if r["mod_type"] == "INSERT" for mod in r["mods"]]
        by_key = Counter(mod["keys"]["object_key"] for mod in inserts)
        assert by_key == dict.fromkeys(keys, 8 * 16 // 4)  # each PUT once
        for key in keys:
            last = [m for m in inserts if m["keys"]["object_key"] == key][-1]
            got = a.get_object(Bucket="contended", Key=key)
            assert got["ETag"].strip('"') == last["new_values"]["etag"]
    finally:
        db.dispose()


def _pull_topic(pair: Pair, name: str) -> str:
    """A topic with no push endpoint (events are pulled), made through the first gateway."""
    sns = boto3.client(
        "sns",
        endpoint_url=pair.urls[0],
        region_name="us-east-1",
        aws_access_key_id=pair.access,
        aws_secret_access_key=pair.secret,
        config=Config(retries={"max_attempts": 1}),
    )
    return str(sns.create_topic(Name=name)["TopicArn"])


_PROBES = iter(range(10**6))


def _recorded_through_both(pair: Pair, db: Metabase) -> bool:
    """Whether a PUT into `contended` through each gateway was recorded (each has learnt
    of the bucket's notification). Only that bucket's records count: another test's
    bucket has probes of the same names, recorded long before."""
    probes = [f"probe-{next(_PROBES)}" for _ in range(2)]
    for which, key in enumerate(probes):
        pair.s3(which).put_object(Bucket="contended", Key=key, Body=b"p")
    recorded = {
        mod["keys"]["object_key"]
        for record in read_all(db)
        for mod in record["mods"]
        if record["table_name"] == "objects" and mod["keys"]["bucket_name"] == "contended"
    }
    return set(probes) <= recorded
