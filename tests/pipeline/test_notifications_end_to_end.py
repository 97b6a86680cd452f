"""The whole way, through the APIs (Spark `local[2]`, SQLite and PostgreSQL): boto3's `sns`
client creates a topic whose push endpoint is a webhook on 127.0.0.1, boto3's `s3` client
puts a notification with a prefix filter and uploads through the gateway, and the running
pipeline delivers exactly the expected records; DeleteObjects of 3 keys yields 3 events; a
versioned bucket yields `ObjectRemoved:DeleteMarkerCreated`; a notification put while the
pipeline runs reaches it within 5 s (the figure is printed). A pull-only topic, notification
and subscription made through the pubsub REST API (`/_ripple/pubsub/`) get uploads too, pulled
in pages and acknowledged. A notification for `s3:ObjectTagging:*` gets tag changes; one
with an S3Tags rule only the uploads tagged so, with their tags when the topic asks.

The pipeline runs in a thread as `ripple pipeline run` wires it: its `RoutesAndTargets` follow
the API's store, checked at the start of every batch."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.gateway.conftest import Running, gateway, s3, services  # noqa: F401
from tests.gateway.helpers import PubSub, signed_put, with_tag_rules
from tests.pipeline.conftest import wait_for
from tests.pipeline.helpers import notify, pipeline
from tests.receiver import Receiver, receiver


@pytest.fixture
def hook() -> Iterator[Receiver]:
    with receiver() as r:
        yield r


def events(hook: Receiver, bucket: str) -> list[tuple[str, str]]:
    return [
        (r["eventName"], r["s3"]["object"]["key"])
        for r in hook.records()
        if r["s3"]["bucket"]["name"] == bucket
    ]


def test_topic_notification_upload_webhook(
    spark: SparkSession,
    gateway: Running,  # noqa: F811
    s3: Any,  # noqa: F811
    sns: Any,
    hook: Receiver,
    tmp_path: Path,
) -> None:
    db = gateway.services.db
    db.eventing = gateway.services.registry.is_eventing  # as `ripple serve` wires it
    arn = sns.create_topic(Name="photos", Attributes={"push-endpoint": hook.url})["TopicArn"]
    s3.create_bucket(Bucket="photos")
    notify(s3, "photos", arn, "jpegs", prefix="2026/")
    assert [p.json()["Event"] for p in hook.posts] == ["s3:TestEvent"]

    with pipeline(db, tmp_path / "checkpoint"):
        etags = {}
        for key in ("2026/a.jpg", "2026/b.jpg", "2026/c.jpg", "other/skipped.jpg"):
            etags[key] = s3.put_object(Bucket="photos", Key=key, Body=key.encode())["ETag"]
        wait_for(lambda: len(events(hook, "photos")) >= 3, what="3 created events")
        deleted = s3.delete_objects(
            Bucket="photos",
            Delete={"Objects": [{"Key": k} for k in ("2026/a.jpg", "2026/b.jpg", "2026/c.jpg")]},
        )
        assert len(deleted["Deleted"]) == 3
        wait_for(lambda: len(events(hook, "photos")) >= 6, what="3 removed events")

        # a notification put while the pipeline runs: measured to its first event
        s3.create_bucket(Bucket="archive")
        s3.put_bucket_versioning(Bucket="archive", VersioningConfiguration={"Status": "Enabled"})
        started = time.monotonic()
        notify(s3, "archive", arn, "archive")
        s3.put_object(Bucket="archive", Key="report.pdf", Body=b"v1")
        wait_for(lambda: len(events(hook, "archive")) >= 1, what="the new notification", timeout=5)
        print(f"configuration change to first event: {time.monotonic() - started:.2f} s")
        s3.delete_object(Bucket="archive", Key="report.pdf")
        wait_for(lambda: len(events(hook, "archive")) >= 2, what="the delete marker's event")

    assert sorted(events(hook, "photos")[:3]) == [
        ("ObjectCreated:Put", "2026/a.jpg"),
        ("ObjectCreated:Put", "2026/b.jpg"),
        ("ObjectCreated:Put", "2026/c.jpg"),
    ]
    assert sorted(events(hook, "photos")[3:]) == [
        ("ObjectRemoved:Delete", "2026/a.jpg"),
        ("ObjectRemoved:Delete", "2026/b.jpg"),
        ("ObjectRemoved:Delete", "2026/c.jpg"),
    ]
    assert events(hook, "archive") == [
        ("ObjectCreated:Put", "report.pdf"),
        ("ObjectRemoved:DeleteMarkerCreated", "report.pdf"),
    ]
    records = [r for r in hook.records() if r["s3"]["bucket"]["name"] == "photos"]
    for record in records[:3]:
        assert record["s3"]["configurationId"] == "jpegs"
        assert record["eventVersion"] == "2.1"
        key = record["s3"]["object"]["key"].replace("%2F", "/")
        assert f'"{record["s3"]["object"]["eTag"]}"' == etags[key]
        assert record["userIdentity"]["principalId"] == str(gateway.key.project_public_id)
    assert len(hook.records()) == 8  # nothing else: other/skipped.jpg was filtered out


def test_pull_subscription_through_the_rest_api(
    spark: SparkSession,
    gateway: Running,  # noqa: F811
    s3: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A pull-only topic, a notification and a subscription made through /_ripple/pubsub/;
    uploads reach the subscription through the running pipeline, and are pulled in pages of 2
    following next_marker and acknowledged until a pull answers nothing."""
    db = gateway.services.db
    db.eventing = gateway.services.registry.is_eventing  # as `ripple serve` wires it
    api = PubSub(gateway.url, gateway.key.access_key_id, gateway.secret)
    api.ok("PUT", "topics/t")
    s3.create_bucket(Bucket="photos")
    api.ok("PUT", "notifications/bucket/photos", {"topic": "t", "events": "OBJECT_CREATE"})
    api.ok("PUT", "subscriptions/sub", {"topic": "t"})
    keys = [f"2026/{i}.jpg" for i in range(5)]

    def pending() -> int:
        return len(api.ok("GET", "subscriptions/sub", {"events": None})["events"])

    with pipeline(db, tmp_path / "checkpoint"):
        for key in keys:
            s3.put_object(Bucket="photos", Key=key, Body=key.encode())
        wait_for(lambda: pending() >= 5, what="5 events in the subscription")

        pulled: list[tuple[str, str]] = []
        pages: list[int] = []
        marker = ""
        while True:
            params: dict[str, str | None] = {"events": None, "max-entries": "2"}
            if marker:
                params["marker"] = marker
            page = api.ok("GET", "subscriptions/sub", params)
            pages.append(len(page["events"]))
            for event in page["events"]:
                assert event["info"]["bucket"]["name"] == "photos"
                pulled.append((event["event"], event["info"]["key"]["name"]))
                api.ok("POST", "subscriptions/sub", {"ack": None, "event-id": event["id"]})
            marker = page["next_marker"]
            if not page["is_truncated"]:
                break
        final = api.ok("GET", "subscriptions/sub", {"events": None})

    assert pages == [2, 2, 1]
    assert sorted(pulled) == [("OBJECT_CREATE", key) for key in keys]
    assert final == {"next_marker": "", "is_truncated": False, "events": []}


def test_s3metadata_filter_end_to_end(
    spark: SparkSession,
    gateway: Running,  # noqa: F811
    s3: Any,  # noqa: F811
    sns: Any,
    hook: Receiver,
    tmp_path: Path,
) -> None:
    """A notification with an S3Metadata rule sends only the events of objects whose user
    metadata holds it: the PUT of a red object, and its DELETE (the removed row's metadata),
    not the blue one's."""
    db = gateway.services.db
    db.eventing = gateway.services.registry.is_eventing
    arn = sns.create_topic(Name="reds", Attributes={"push-endpoint": hook.url})["TopicArn"]
    s3.create_bucket(Bucket="paint")
    # boto3 has no S3Metadata in its model: the document goes over signed plain HTTP
    body = (
        b'<NotificationConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b"<TopicConfiguration><Id>reds</Id><Topic>" + arn.encode() + b"</Topic>"
        b"<Event>s3:ObjectCreated:*</Event><Event>s3:ObjectRemoved:*</Event>"
        b"<Filter><S3Metadata><FilterRule><Name>x-amz-meta-color</Name><Value>red</Value>"
        b"</FilterRule></S3Metadata></Filter></TopicConfiguration></NotificationConfiguration>"
    )
    response = signed_put(gateway, "/paint?notification", body)
    assert response.status_code == 200, response.text

    with pipeline(db, tmp_path / "checkpoint"):
        s3.put_object(Bucket="paint", Key="blue.txt", Body=b"b", Metadata={"color": "blue"})
        s3.put_object(Bucket="paint", Key="red.txt", Body=b"r", Metadata={"color": "red"})
        s3.delete_object(Bucket="paint", Key="blue.txt")
        s3.delete_object(Bucket="paint", Key="red.txt")
        wait_for(lambda: len(events(hook, "paint")) >= 2, what="the red object's events")
        # the marker: a last red event, so everything before it has been routed
        s3.put_object(Bucket="paint", Key="last.txt", Body=b"l", Metadata={"color": "red"})
        wait_for(lambda: len(events(hook, "paint")) >= 3, what="the last event")

    # a webhook batch goes out with requests in flight at once: arrival order may differ
    assert sorted(events(hook, "paint")) == [
        ("ObjectCreated:Put", "last.txt"),
        ("ObjectCreated:Put", "red.txt"),
        ("ObjectRemoved:Delete", "red.txt"),
    ]


def test_tagging_events_end_to_end(
    spark: SparkSession,
    gateway: Running,  # noqa: F811
    s3: Any,  # noqa: F811
    sns: Any,
    hook: Receiver,
    tmp_path: Path,
) -> None:
    """A notification for `s3:ObjectTagging:*` gets PutObjectTagging and DeleteObjectTagging
    through the gateway as `ObjectTagging:Put` / `ObjectTagging:Delete` (version 2.3, with the
    version's id, size and eTag); not the PutObject, and nothing for an unchanged tag set."""
    db = gateway.services.db
    db.eventing = gateway.services.registry.is_eventing
    arn = sns.create_topic(Name="tags", Attributes={"push-endpoint": hook.url})["TopicArn"]
    s3.create_bucket(Bucket="tagged")
    s3.put_bucket_versioning(Bucket="tagged", VersioningConfiguration={"Status": "Enabled"})
    s3.put_bucket_notification_configuration(
        Bucket="tagged",
        NotificationConfiguration={
            "TopicConfigurations": [
                {"Id": "tags", "TopicArn": arn, "Events": ["s3:ObjectTagging:*"]}
            ]
        },
    )
    tags = {"TagSet": [{"Key": "colour", "Value": "red"}]}

    with pipeline(db, tmp_path / "checkpoint"):
        put = s3.put_object(Bucket="tagged", Key="a b.jpg", Body=b"hello")
        s3.put_object_tagging(Bucket="tagged", Key="a b.jpg", Tagging=tags)
        s3.put_object_tagging(Bucket="tagged", Key="a b.jpg", Tagging=tags)  # unchanged
        s3.delete_object_tagging(Bucket="tagged", Key="a b.jpg")
        # the marker: a last event, so everything before it has been routed
        s3.put_object(Bucket="tagged", Key="last", Body=b"l", Tagging="k=v")
        s3.put_object_tagging(Bucket="tagged", Key="last", Tagging=tags)
        wait_for(lambda: len(events(hook, "tagged")) >= 3, what="the tagging events")

    # a webhook batch goes out with requests in flight at once: arrival order may differ
    assert sorted(events(hook, "tagged")) == [
        ("ObjectTagging:Delete", "a+b.jpg"),
        ("ObjectTagging:Put", "a+b.jpg"),
        ("ObjectTagging:Put", "last"),
    ]
    by_name = {
        r["eventName"]: r
        for r in hook.records()
        if r["s3"]["bucket"]["name"] == "tagged" and r["s3"]["object"]["key"] == "a+b.jpg"
    }
    first, removed = by_name["ObjectTagging:Put"], by_name["ObjectTagging:Delete"]
    assert first["s3"]["object"]["sequencer"] < removed["s3"]["object"]["sequencer"]
    assert first["eventVersion"] == "2.3"
    assert first["s3"]["configurationId"] == "tags"
    assert first["s3"]["object"]["versionId"] == put["VersionId"]
    assert first["s3"]["object"]["size"] == 5
    assert f'"{first["s3"]["object"]["eTag"]}"' == put["ETag"]
    assert first["userIdentity"]["principalId"] == str(gateway.key.project_public_id)


def test_s3tags_rule_end_to_end(
    spark: SparkSession,
    gateway: Running,  # noqa: F811
    s3: Any,  # noqa: F811
    sns: Any,
    hook: Receiver,
    tmp_path: Path,
) -> None:
    """A notification with an S3Tags rule gets only the uploads tagged so, and a topic with
    `include-tags` gets the tags in each event as `s3.object.tags`."""
    db = gateway.services.db
    db.eventing = gateway.services.registry.is_eventing
    attributes = {"push-endpoint": hook.url, "include-tags": "true"}
    arn = sns.create_topic(Name="prod", Attributes=attributes)["TopicArn"]
    s3.create_bucket(Bucket="stage")
    with_tag_rules(s3, [("env", "prod")])  # boto3 has no S3Tags: added to its document
    notify(s3, "stage", arn, "prod", prefix="up/")

    with pipeline(db, tmp_path / "checkpoint"):
        s3.put_object(Bucket="stage", Key="up/dev.txt", Body=b"d", Tagging="env=dev")
        s3.put_object(Bucket="stage", Key="up/none.txt", Body=b"n")
        s3.put_object(Bucket="stage", Key="up/prod.txt", Body=b"p", Tagging="env=prod&b=2")
        s3.put_object(Bucket="stage", Key="up/case.txt", Body=b"c", Tagging="env=Prod")
        # the marker: a last tagged upload, so everything before it has been routed
        s3.put_object(Bucket="stage", Key="up/last.txt", Body=b"l", Tagging="env=prod")
        wait_for(lambda: len(events(hook, "stage")) >= 2, what="the tagged uploads' events")

    assert sorted(events(hook, "stage")) == [
        ("ObjectCreated:Put", "up/last.txt"),
        ("ObjectCreated:Put", "up/prod.txt"),
    ]
    tags = {
        r["s3"]["object"]["key"]: r["s3"]["object"]["tags"]
        for r in hook.records()
        if r["s3"]["bucket"]["name"] == "stage"
    }
    assert tags == {
        "up/prod.txt": [{"key": "b", "val": "2"}, {"key": "env", "val": "prod"}],
        "up/last.txt": [{"key": "env", "val": "prod"}],
    }


def test_renames_acls_and_bucket_events_end_to_end(
    spark: SparkSession,
    gateway: Running,  # noqa: F811
    s3: Any,  # noqa: F811
    sns: Any,
    hook: Receiver,
    tmp_path: Path,
) -> None:
    """Through the running pipeline: a topic with `rename-events=single` gets a RenameObject
    as one `ObjectRenamed:Rename`, and a changed ACL as `ObjectAcl:Put`; a topic with
    `project-events` gets the project's CreateBucket and DeleteBucket as `BucketCreated:Put`
    and `BucketRemoved:Delete` (the job's second query, over `project_eventing`)."""
    db = gateway.services.db
    db.eventing = gateway.services.registry.is_eventing
    files = sns.create_topic(
        Name="files", Attributes={"push-endpoint": hook.url, "rename-events": "single"}
    )["TopicArn"]
    sns.create_topic(
        Name="project",
        Attributes={
            "push-endpoint": hook.url,
            "project-events": "s3:BucketCreated:*,s3:BucketRemoved:*",
        },
    )
    s3.create_bucket(Bucket="files")
    events_wanted = ["s3:ObjectCreated:*", "s3:ObjectRenamed:*", "s3:ObjectAcl:*"]
    s3.put_bucket_notification_configuration(
        Bucket="files",
        NotificationConfiguration={
            "TopicConfigurations": [{"Id": "files", "TopicArn": files, "Events": events_wanted}]
        },
    )

    def names() -> list[tuple[str, str, str]]:
        return [
            (r["eventName"], r["s3"]["bucket"]["name"], r["s3"]["object"]["key"])
            for r in hook.records()
        ]

    with pipeline(db, tmp_path / "checkpoint"):
        s3.put_object(Bucket="files", Key="a.txt", Body=b"hello")
        s3.rename_object(Bucket="files", Key="b.txt", RenameSource="files/a.txt")
        s3.put_object_acl(Bucket="files", Key="b.txt", ACL="public-read")
        s3.create_bucket(Bucket="scratch")
        s3.delete_bucket(Bucket="scratch")
        wait_for(lambda: len(names()) >= 6, what="the object and bucket events")

    assert sorted(names()) == [
        ("BucketCreated:Put", "files", ""),  # made after the topic: recorded, then sent
        ("BucketCreated:Put", "scratch", ""),
        ("BucketRemoved:Delete", "scratch", ""),
        ("ObjectAcl:Put", "files", "b.txt"),
        ("ObjectCreated:Put", "files", "a.txt"),
        ("ObjectRenamed:Rename", "files", "b.txt"),
    ]
    by_name = {r["eventName"]: r for r in hook.records()}
    assert by_name["ObjectRenamed:Rename"]["s3"]["object"]["renameFromKey"] == "a.txt"
    assert by_name["BucketRemoved:Delete"]["s3"]["configurationId"] == "ProjectEvents"
    owner = str(gateway.key.project_public_id)
    assert by_name["BucketCreated:Put"]["userIdentity"]["principalId"] == owner
