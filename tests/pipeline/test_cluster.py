"""`ripple up` on a real Spark standalone cluster: a master and two one-core workers, each its
own JVM on loopback, started once for the module from PySpark's own `bin/spark-class`; a
PostgreSQL metabase; executors whose Python does not have ripple installed (ripple's code
reaches them from the driver). Through the gateway with boto3, a PUT, a copy, a multipart
upload, a DeleteObjects and a versioned delete reach a webhook and a pull subscription as
exactly the expected events; a worker JVM killed mid-stream, the driver killed and restarted,
and a webhook refusing for 20 s lose nothing."""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tests.conftest import ADMIN_URL, fresh_postgres_database
from tests.pipeline.cluster import StandaloneCluster, python_without_ripple, standalone_cluster
from tests.pipeline.conftest import wait_for
from tests.receiver import Receiver, receiver
from tests.ripple_process import RippleProcess, credentials, ripple, table_rows

pytestmark = pytest.mark.postgresql

DELIVERY_TIMEOUT_S = 180.0  # a loaded 2-core machine runs three JVMs and the gateway here


@dataclass
class Deployment:
    """A cluster, a metabase, a data directory and a user, shared by the module's tests."""

    cluster: StandaloneCluster
    directory: Path
    env: dict[str, str]
    access: str
    secret: str

    def ripple(self, *args: str) -> str:
        return ripple(self.directory, *args, **self.env)

    def up(self) -> RippleProcess:
        """`ripple up` against the cluster, once its pipeline runs."""
        up = RippleProcess(
            self.directory,
            "up",
            RIPPLE_S3_ADDRESS="127.0.0.1:0",
            RIPPLE_METRICS_ADDRESS="127.0.0.1:0",
            **self.env,
        )
        up.wait_for_output("pipeline running", timeout=300)
        return up

    def s3(self, up: RippleProcess) -> Any:
        return self._client("s3", up)

    def sns(self, up: RippleProcess) -> Any:
        return self._client("sns", up)

    def _client(self, service: str, up: RippleProcess) -> Any:
        return boto3.client(
            service,  # type: ignore[call-overload]
            endpoint_url=table_rows(up.stdout)["S3 endpoint"],
            region_name="us-east-1",
            aws_access_key_id=self.access,
            aws_secret_access_key=self.secret,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
        )

    def wait_for(self, up: RippleProcess, condition: Callable[[], bool], what: str) -> None:
        """`wait_for`, and on a timeout, or when `ripple up` exits first, the driver's log
        and each executor's last lines."""

        def met_or_exited() -> bool:
            if up.process.poll() is not None:
                raise AssertionError(f"ripple up exited ({up.process.returncode}) before {what}")
            return condition()

        try:
            wait_for(met_or_exited, what, DELIVERY_TIMEOUT_S)
        except AssertionError as e:
            executors = sorted((self.cluster.directory / "work").glob("app-*/*/stderr"))
            tails = [f"{p}:\n{p.read_text(errors='replace')[-3000:]}" for p in executors[-4:]]
            raise AssertionError("\n".join([str(e), "driver:", up.stderr[-6000:], *tails])) from e

    def pulled(self, subscription: str) -> list[dict[str, Any]]:
        """Every event the subscription holds, page after page (none acknowledged)."""
        out: list[dict[str, Any]] = []
        marker: list[str] = []
        while True:
            page = json.loads(
                self.ripple("subscription", "pull", subscription, "--max-entries", "1000", *marker)
            )
            out.extend(page["Records"])
            if not page["is_truncated"]:
                return out
            marker = ["--marker", page["next_marker"]]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    directory = tmp_path_factory.mktemp("cluster")
    python = python_without_ripple(directory)
    lacking = subprocess.run([str(python), "-c", "import ripple"], capture_output=True)
    assert lacking.returncode != 0, "the executors' Python must not have ripple"
    with (
        fresh_postgres_database(ADMIN_URL, "ripple_cluster") as url,
        standalone_cluster(directory / "spark", workers=2) as cluster,
    ):
        env = {
            "RIPPLE_DATA_DIR": str(directory / "data"),
            "RIPPLE_DATABASE_URL": url,
            "RIPPLE_SPARK_MASTER": cluster.master_url,
            "PYSPARK_PYTHON": str(python),
        }
        made = Deployment(cluster, directory, env, "", "")
        made.ripple("db", "upgrade")
        made.access, made.secret = credentials(made.ripple("user", "create", "alice"))
        yield made


def keyed(records: list[dict[str, Any]], bucket: str) -> list[tuple[str, str]]:
    return sorted(
        (r["eventName"], r["s3"]["object"]["key"])
        for r in records
        if r["s3"]["bucket"]["name"] == bucket
    )


def test_writes_through_the_gateway_reach_a_webhook_and_a_subscription_from_the_executors(
    deployment: Deployment,
) -> None:
    with receiver() as hook, deployment.up() as up:
        state = deployment.cluster.state()
        [app] = [a for a in state["activeapps"] if a["name"] == "ripple-pipeline"]
        assert app["cores"] == 2  # both one-core workers run its executors
        s3, sns = deployment.s3(up), deployment.sns(up)
        arn = sns.create_topic(Name="files", Attributes={"push-endpoint": hook.url})["TopicArn"]
        deployment.ripple("subscription", "create", "inbox", "--topic", arn)
        for bucket in ("files", "archive"):
            s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket="archive", VersioningConfiguration={"Status": "Enabled"})
        for bucket in ("files", "archive"):
            s3.put_bucket_notification_configuration(
                Bucket=bucket,
                NotificationConfiguration={
                    "TopicConfigurations": [
                        {"TopicArn": arn, "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]}
                    ]
                },
            )

        s3.put_object(Bucket="files", Key="a.txt", Body=b"a")
        s3.copy_object(Bucket="files", Key="b.txt", CopySource={"Bucket": "files", "Key": "a.txt"})
        upload = s3.create_multipart_upload(Bucket="files", Key="big.bin")["UploadId"]
        part = s3.upload_part(
            Bucket="files", Key="big.bin", UploadId=upload, PartNumber=1, Body=b"x" * 1024
        )
        s3.complete_multipart_upload(
            Bucket="files",
            Key="big.bin",
            UploadId=upload,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
        )
        s3.delete_objects(Bucket="files", Delete={"Objects": [{"Key": "a.txt"}, {"Key": "b.txt"}]})
        s3.put_object(Bucket="archive", Key="v.txt", Body=b"v1")
        s3.delete_object(Bucket="archive", Key="v.txt")

        expected_files = [
            ("ObjectCreated:CompleteMultipartUpload", "big.bin"),
            ("ObjectCreated:Copy", "b.txt"),
            ("ObjectCreated:Put", "a.txt"),
            ("ObjectRemoved:Delete", "a.txt"),
            ("ObjectRemoved:Delete", "b.txt"),
        ]
        expected_archive = [
            ("ObjectCreated:Put", "v.txt"),
            ("ObjectRemoved:DeleteMarkerCreated", "v.txt"),
        ]
        deployment.wait_for(up, lambda: len(hook.records()) >= 7, "7 events at the webhook")
        deployment.wait_for(
            up,
            lambda: len(deployment.pulled("inbox")) >= 7,
            "7 events in the subscription",
        )
        time.sleep(1)  # anything extra would have come with them
        pulled = deployment.pulled("inbox")
        assert up.interrupt() == 0, up.stderr[-3000:]

    for records in (hook.records(), pulled):
        assert keyed(records, "files") == expected_files
        assert keyed(records, "archive") == expected_archive
    assert len(hook.records()) == 7
    assert len(pulled) == 7


def write_keys(s3: Any, bucket: str, prefix: str, n: int) -> list[str]:
    keys = [f"{prefix}/{i:04d}" for i in range(n)]
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    return keys


def notified_bucket(deployment: Deployment, up: RippleProcess, name: str, hook: Receiver) -> Any:
    """A bucket whose every created object goes to a webhook topic of its own."""
    s3, sns = deployment.s3(up), deployment.sns(up)
    arn = sns.create_topic(Name=name, Attributes={"push-endpoint": hook.url})["TopicArn"]
    s3.create_bucket(Bucket=name)
    s3.put_bucket_notification_configuration(
        Bucket=name,
        NotificationConfiguration={
            "TopicConfigurations": [{"TopicArn": arn, "Events": ["s3:ObjectCreated:*"]}]
        },
    )
    return s3


def delivered_keys(hook: Receiver) -> Counter[str]:
    return Counter(r["s3"]["object"]["key"] for r in hook.records())


def test_a_worker_killed_mid_stream_loses_nothing(deployment: Deployment) -> None:
    try:
        with receiver() as hook, deployment.up() as up:
            s3 = notified_bucket(deployment, up, "survivors", hook)
            keys = write_keys(s3, "survivors", "before", 100)
            deployment.wait_for(up, lambda: len(hook.records()) >= 20, "events flow")
            deployment.cluster.kill_worker(deployment.cluster.workers[0])
            keys += write_keys(s3, "survivors", "after", 100)
            deployment.wait_for(
                up,
                lambda: set(delivered_keys(hook)) >= set(keys),
                "every event after the worker's death",
            )
            assert up.interrupt() == 0, up.stderr[-3000:]
    finally:  # the next tests get two workers again
        cluster = deployment.cluster
        cluster.workers = [w for w in cluster.workers if w.poll() is None]
        while len(cluster.workers) < 2:
            cluster.add_worker()
        cluster.wait_for_workers(2)
    duplicates = sum(delivered_keys(hook).values()) - len(keys)
    print(f"a worker killed mid-stream: {duplicates} duplicates")


def test_the_driver_killed_then_restarted_loses_nothing(deployment: Deployment) -> None:
    with receiver() as hook:
        with deployment.up() as first:
            s3 = notified_bucket(deployment, first, "restarts", hook)
            keys = write_keys(s3, "restarts", "first", 60)
            deployment.wait_for(first, lambda: len(hook.records()) >= 10, "events flow")
            first.kill()  # the gateway, the driver and its JVM, at once
        with deployment.up() as second:
            s3 = deployment.s3(second)
            keys += write_keys(s3, "restarts", "second", 20)
            deployment.wait_for(
                second,
                lambda: set(delivered_keys(hook)) >= set(keys),
                "every event after the restart",
            )
            assert second.interrupt() == 0, second.stderr[-3000:]


def test_a_webhook_down_for_20_s_loses_nothing(deployment: Deployment) -> None:
    with receiver() as hook, deployment.up() as up:
        s3 = notified_bucket(deployment, up, "outage", hook)
        hook.status = 503
        down_since = time.monotonic()
        keys = write_keys(s3, "outage", "k", 50)
        deployment.wait_for(up, lambda: len(hook.posts) >= 10, "refused attempts")
        time.sleep(max(0.0, 20 - (time.monotonic() - down_since)))
        hook.status = 200
        deployment.wait_for(
            up,
            lambda: (
                {
                    r["s3"]["object"]["key"]
                    for p in hook.posts
                    if p.status == 200
                    for r in p.json().get("Records", [])
                }
                >= set(keys)
            ),
            "every event once the webhook is back",
        )
        assert up.interrupt() == 0, up.stderr[-3000:]
