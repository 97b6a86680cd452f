"""`ripple up` serves S3 and runs the pipeline together: an object written with boto3
through the gateway becomes an S3 event in a pull subscription, carrying the request's
context (request id, principal, source IP, eTag)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ripple.metabase import Metabase
from ripple.metabase.schema import projects
from tests.gateway.conftest import wait_for
from tests.gateway.helpers import client
from tests.ripple_process import RippleProcess, credentials, ripple, table_rows

TOPIC = "projects/ripple-tests/topics/photos"


def test_up_serves_s3_and_delivers_its_events(tmp_path: Path) -> None:
    access, secret = credentials(ripple(tmp_path, "user", "create", "alice"))
    db = Metabase(f"sqlite:///{tmp_path / '.ripple' / 'metabase.db'}")
    try:
        with db.read() as conn:
            project_id = conn.execute(
                sa.select(projects.c.id).where(projects.c.name == "alice")
            ).scalar_one()
    finally:
        db.dispose()
    (tmp_path / "ripple.toml").write_text(
        f'[bucket-eventing]\nbuckets = "{project_id}:photos:{TOPIC}"\n'
        f'[topics."{TOPIC}"]\npush-endpoint = "none"\n',
        encoding="utf-8",
    )
    ripple(tmp_path, "subscription", "create", "inbox", "--topic", TOPIC)

    with RippleProcess(
        tmp_path, "up", RIPPLE_S3_ADDRESS="127.0.0.1:0", RIPPLE_METRICS_ADDRESS="127.0.0.1:0"
    ) as up:
        up.wait_for_output("pipeline running")
        url = table_rows(up.stdout)["S3 endpoint"]
        s3: Any = client(url, access, secret)
        s3.create_bucket(Bucket="photos")
        put = s3.put_object(Bucket="photos", Key="red flower.jpg", Body=b"petals" * 500)
        headers = put["ResponseMetadata"]["HTTPHeaders"]
        records: list[dict[str, Any]] = []

        def pulled() -> bool:
            page = json.loads(ripple(tmp_path, "subscription", "pull", "inbox"))
            records[:] = page["Records"]
            return bool(records)

        wait_for(pulled, timeout=60, what="the event in the pull subscription")
        # Spark's offset and commit logs go without Hadoop's checksum files (their writes
        # started processes each: ripple.pipeline.job.LOCAL_CHECKPOINT_CONF); a batch (a
        # lease, delivering for 5 s) is committed once it ends
        checkpoint = tmp_path / ".ripple" / "checkpoint"
        wait_for(
            lambda: bool(list(checkpoint.glob("commits/[0-9]*"))),
            timeout=60,
            what="a batch committed",
        )
        assert up.interrupt() == 0, up.stderr[-3000:]

    assert not list(checkpoint.rglob("*.crc"))
    assert len(records) == 1
    record = records[0]
    assert record["eventName"] == "ObjectCreated:Put"
    assert record["s3"]["bucket"]["name"] == "photos"
    assert record["s3"]["object"]["key"] == "red+flower.jpg"
    assert record["s3"]["object"]["size"] == 3000
    assert record["s3"]["object"]["eTag"] == put["ETag"].strip('"')
    assert record["responseElements"]["x-amz-request-id"] == headers["x-amz-request-id"]
    assert record["responseElements"]["x-amz-id-2"] == headers["x-amz-id-2"]
    assert record["requestParameters"]["sourceIPAddress"] == "127.0.0.1"
    listed = json.loads(ripple(tmp_path, "user", "list").splitlines()[0])
    assert record["userIdentity"]["principalId"] == listed["project_public_id"]
