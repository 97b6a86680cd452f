"""The newer event types through the gateway (boto3, SQLite and PostgreSQL), the change
records, the transform (`events_of_rows`) and routing (`route`), without Spark: renames (one
key and a whole prefix) as each topic's `rename-events` asks, `ObjectAcl:Put`,
`ObjectMetadata:Update` (legal hold, retention, a copy onto itself; opt-in by event type) and
`LifecycleExpiration:*` from a lifecycle rule run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from botocore.exceptions import ClientError

from ripple.changestream.schema import change_records
from ripple.events import EventSettings
from ripple.metabase.lifecycle_run import run_lifecycle
from ripple.notifications.registry import Registry
from ripple.notifications.store import EventingStore
from ripple.pipeline.route import route
from ripple.targets.base import Delivery
from tests.gateway.conftest import Running, gateway, s3, services  # noqa: F401
from tests.pipeline.helpers import seen
from tests.pipeline.reference import events_of_rows

STREAM = "bucket_eventing"
ALL_USERS = "http://acs.amazonaws.com/groups/global/AllUsers"


def routed(gateway: Running) -> dict[str, list[Delivery]]:  # noqa: F811
    """Every change record of the `bucket_eventing` stream so far (the pipeline's source
    reads only that stream), through the transform and routing; the bucket owner is the
    gateway user's project (its public id), as the pipeline's `Owners` finds it."""
    db = gateway.services.db
    registry = Registry()
    registry.replace_api(EventingStore(db).snapshot().routes())
    c = change_records.c
    with db.engine.connect() as conn:
        rows = [
            dict(r._mapping)
            for r in conn.execute(
                sa.select(change_records)
                .where(c.stream_name == STREAM)
                .order_by(c.commit_ns, c.partition, c.position)  # commit order, as a batch
            )
        ]
    owner = str(gateway.key.project_public_id)
    events = list(events_of_rows(rows, lambda _: owner, EventSettings()))
    return route(events, registry, batch_id=1).by_topic


def notify(client: Any, bucket: str, configurations: list[tuple[str, str, list[str]]]) -> None:
    """Put the bucket's notifications: (Id, topic ARN, event types) each."""
    client.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={
            "TopicConfigurations": [
                {"Id": id_, "TopicArn": arn, "Events": events}
                for id_, arn, events in configurations
            ]
        },
    )


def objects_of(deliveries: list[Delivery]) -> list[dict[str, Any]]:
    return [d.event["s3"]["object"] for d in deliveries]


@contextmanager
def prefix_mode(client: Any) -> Iterator[None]:
    """RenameObject requests of `client` carry `x-ripple-rename-prefix: true` in the block."""

    def add_header(request: Any, **_: Any) -> None:
        request.headers["x-ripple-rename-prefix"] = "true"

    client.meta.events.register("before-sign.s3.RenameObject", add_header)
    try:
        yield
    finally:
        client.meta.events.unregister("before-sign.s3.RenameObject", add_header)


# --- renames ----------------------------------------------------------------------------------

RENAME_EVENTS = ["s3:ObjectCreated:*", "s3:ObjectRemoved:*", "s3:ObjectRenamed:*"]


def test_renames_as_each_topic_asks(
    gateway: Running,  # noqa: F811
    s3: Any,  # noqa: F811
    sns: Any,
) -> None:
    gateway.services.db.eventing = gateway.services.registry.is_eventing
    explicit = sns.create_topic(Name="as-s3", Attributes={"rename-events": "s3"})["TopicArn"]
    default = sns.create_topic(Name="default")["TopicArn"]
    single = sns.create_topic(Name="single", Attributes={"rename-events": "single"})["TopicArn"]
    s3.create_bucket(Bucket="photos")
    notify(
        s3,
        "photos",
        [
            ("s3", explicit, RENAME_EVENTS),
            ("d", default, RENAME_EVENTS),
            ("one", single, RENAME_EVENTS),
        ],
    )
    s3.put_object(Bucket="photos", Key="red flower.jpg", Body=b"red")
    s3.put_object(Bucket="photos", Key="logs/2026/a", Body=b"a")
    s3.put_object(Bucket="photos", Key="logs/2026/b c", Body=b"bc")
    s3.put_object(Bucket="photos", Key="logs/2027/z", Body=b"z")  # not under the prefix
    etag = s3.head_object(Bucket="photos", Key="red flower.jpg")["ETag"].strip('"')

    s3.rename_object(Bucket="photos", Key="blue/flower ü.jpg", RenameSource="photos/red flower.jpg")
    with prefix_mode(s3):
        s3.rename_object(Bucket="photos", Key="archive/2026/", RenameSource="photos/logs/2026/")

    by_topic = routed(gateway)
    created = [
        ("ObjectCreated:Put", "red flower.jpg"),
        ("ObjectCreated:Put", "logs/2026/a"),
        ("ObjectCreated:Put", "logs/2026/b c"),
        ("ObjectCreated:Put", "logs/2027/z"),
    ]
    for topic in (explicit, default):
        assert seen(by_topic[topic])[:4] == created
        renamed = seen(by_topic[topic])[4:]
        assert renamed[:2] == [
            ("ObjectRemoved:Delete", "red flower.jpg"),
            ("ObjectCreated:Put", "blue/flower ü.jpg"),
        ]
        # the prefix rename: removed + created per key, in any order among its keys
        assert sorted(renamed[2:]) == [
            ("ObjectCreated:Put", "archive/2026/a"),
            ("ObjectCreated:Put", "archive/2026/b c"),
            ("ObjectRemoved:Delete", "logs/2026/a"),
            ("ObjectRemoved:Delete", "logs/2026/b c"),
        ]
        for event in (d.event for d in by_topic[topic]):
            assert "renameFromKey" not in event["s3"]["object"]
            assert not event["eventName"].startswith("ObjectRenamed:")

    assert seen(by_topic[single]) == [
        *created,
        ("ObjectRenamed:Rename", "blue/flower ü.jpg"),
        ("ObjectRenamed:Rename", "archive/2026/"),
    ]
    key_rename, prefix_rename = by_topic[single][4:]
    assert key_rename.event["eventVersion"] == "2.3"
    assert key_rename.event["s3"]["configurationId"] == "one"
    moved = key_rename.event["s3"]["object"]
    assert moved["key"] == "blue/flower+%C3%BC.jpg"
    assert moved["renameFromKey"] == "red+flower.jpg"
    assert (moved["size"], moved["eTag"]) == (3, etag)
    whole = prefix_rename.event["s3"]["object"]
    assert (whole["key"], whole["renameFromKey"]) == ("archive/2026/", "logs/2026/")
    # a prefix, not an object: size 0 and no eTag (consumers that need both take it)
    assert (whole["size"], whole["eTag"]) == (0, "")
    assert "versionId" not in whole


def test_a_rename_events_value_that_is_neither_is_refused(
    gateway: Running,  # noqa: F811
    sns: Any,
) -> None:
    with pytest.raises(ClientError) as caught:
        sns.create_topic(Name="odd", Attributes={"rename-events": "bogus"})
    error = caught.value.response["Error"]
    assert error["Code"] == "InvalidParameter"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert "rename-events" in error["Message"]
    assert "bogus" in error["Message"]
    assert sns.list_topics()["Topics"] == []  # nothing stored


# --- ACL ----------------------------------------------------------------------------------


def test_put_object_acl_is_an_object_acl_put_with_the_grants(
    gateway: Running,  # noqa: F811
    s3: Any,  # noqa: F811
    sns: Any,
) -> None:
    gateway.services.db.eventing = gateway.services.registry.is_eventing
    acl = sns.create_topic(Name="acl")["TopicArn"]
    created = sns.create_topic(Name="created")["TopicArn"]
    s3.create_bucket(Bucket="photos")
    notify(
        s3,
        "photos",
        [("acl", acl, ["s3:ObjectAcl:*"]), ("created", created, ["s3:ObjectCreated:*"])],
    )
    s3.put_object(Bucket="photos", Key="a b.jpg", Body=b"pixels")
    s3.put_object_acl(Bucket="photos", Key="a b.jpg", ACL="public-read")
    s3.put_object_acl(Bucket="photos", Key="a b.jpg", ACL="public-read")  # no change: no event

    by_topic = routed(gateway)
    assert seen(by_topic[acl]) == [("ObjectAcl:Put", "a b.jpg")]
    assert seen(by_topic[created]) == [("ObjectCreated:Put", "a b.jpg")]
    [event] = (d.event for d in by_topic[acl])
    assert event["eventVersion"] == "2.3"
    obj = event["s3"]["object"]
    assert obj["key"] == "a+b.jpg"
    owner = str(gateway.key.project_public_id)
    assert sorted(obj["grants"], key=str) == sorted(
        [
            {"grantee": {"type": "CanonicalUser", "id": owner}, "permission": "FULL_CONTROL"},
            {"grantee": {"type": "Group", "uri": ALL_USERS}, "permission": "READ"},
        ],
        key=str,
    )


# --- object lock and metadata ---------------------------------------------------------------


def test_legal_hold_and_retention_are_metadata_updates_for_those_who_ask(
    gateway: Running,  # noqa: F811
    s3: Any,  # noqa: F811
    sns: Any,
) -> None:
    gateway.services.db.eventing = gateway.services.registry.is_eventing
    family = sns.create_topic(Name="family")["TopicArn"]
    exact = sns.create_topic(Name="exact")["TopicArn"]
    created = sns.create_topic(Name="created")["TopicArn"]
    s3.create_bucket(Bucket="vault", ObjectLockEnabledForBucket=True)
    notify(
        s3,
        "vault",
        [
            ("family", family, ["s3:ObjectMetadata:*"]),
            ("exact", exact, ["s3:ObjectMetadata:Update"]),
            ("created", created, ["s3:ObjectCreated:*"]),
        ],
    )
    version = s3.put_object(Bucket="vault", Key="k", Body=b"data")["VersionId"]
    s3.put_object_legal_hold(Bucket="vault", Key="k", LegalHold={"Status": "ON"})
    until = datetime.now(UTC) + timedelta(days=1)
    until = until.replace(microsecond=until.microsecond // 1000 * 1000)
    s3.put_object_retention(
        Bucket="vault", Key="k", Retention={"Mode": "GOVERNANCE", "RetainUntilDate": until}
    )

    by_topic = routed(gateway)
    updates = [("ObjectMetadata:Update", "k"), ("ObjectMetadata:Update", "k")]
    assert seen(by_topic[family]) == updates
    assert seen(by_topic[exact]) == updates
    assert seen(by_topic[created]) == [("ObjectCreated:Put", "k")]  # opt-in: not these
    hold, retention = objects_of(by_topic[family])
    assert hold["metadataUpdate"]["changed"] == ["legalHold"]
    assert hold["metadataUpdate"]["legalHold"] == "ON"
    assert retention["metadataUpdate"]["changed"] == ["retention"]
    assert retention["metadataUpdate"]["retention"]["mode"] == "GOVERNANCE"
    assert retention["metadataUpdate"]["retention"]["retainUntilDate"] == (
        until.strftime("%Y-%m-%dT%H:%M:%S.") + f"{until.microsecond // 1000:03d}Z"
    )
    for delivery in by_topic[family]:
        assert delivery.event["eventVersion"] == "2.3"
        assert delivery.event["s3"]["object"]["versionId"] == version
    assert objects_of(by_topic[exact]) == objects_of(by_topic[family])


def test_copy_onto_itself_with_replace_is_a_copy_and_a_metadata_update(
    gateway: Running,  # noqa: F811
    s3: Any,  # noqa: F811
    sns: Any,
) -> None:
    gateway.services.db.eventing = gateway.services.registry.is_eventing
    both = sns.create_topic(Name="both")["TopicArn"]
    created = sns.create_topic(Name="created")["TopicArn"]
    s3.create_bucket(Bucket="photos")
    notify(
        s3,
        "photos",
        [
            ("both", both, ["s3:ObjectCreated:*", "s3:ObjectMetadata:*"]),
            ("created", created, ["s3:ObjectCreated:*"]),
        ],
    )
    s3.put_object(Bucket="photos", Key="a.jpg", Body=b"pixels", Metadata={"camera": "x100v"})
    s3.copy_object(
        Bucket="photos",
        Key="a.jpg",
        CopySource="photos/a.jpg",
        MetadataDirective="REPLACE",
        Metadata={"camera": "a7iv"},
    )

    by_topic = routed(gateway)
    assert seen(by_topic[both]) == [
        ("ObjectCreated:Put", "a.jpg"),
        ("ObjectCreated:Copy", "a.jpg"),
        ("ObjectMetadata:Update", "a.jpg"),
    ]
    assert seen(by_topic[created]) == [
        ("ObjectCreated:Put", "a.jpg"),
        ("ObjectCreated:Copy", "a.jpg"),
    ]
    update = by_topic[both][2].event
    assert update["eventVersion"] == "2.3"
    assert "userMetadata" in update["s3"]["object"]["metadataUpdate"]["changed"]
    assert update["s3"]["object"]["metadataUpdate"]["userMetadata"] == {"camera": "a7iv"}


# --- lifecycle ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("versioned", "name"),
    [
        (False, "LifecycleExpiration:Delete"),
        (True, "LifecycleExpiration:DeleteMarkerCreated"),
    ],
)
def test_a_lifecycle_expiration_is_a_lifecycle_event(
    gateway: Running,  # noqa: F811
    s3: Any,  # noqa: F811
    sns: Any,
    versioned: bool,
    name: str,
) -> None:
    db = gateway.services.db
    db.eventing = gateway.services.registry.is_eventing
    lifecycle = sns.create_topic(Name="lifecycle")["TopicArn"]
    removed = sns.create_topic(Name="removed")["TopicArn"]
    s3.create_bucket(Bucket="logs")
    if versioned:
        s3.put_bucket_versioning(Bucket="logs", VersioningConfiguration={"Status": "Enabled"})
    notify(
        s3,
        "logs",
        [
            ("lifecycle", lifecycle, ["s3:LifecycleExpiration:*"]),
            ("removed", removed, ["s3:ObjectRemoved:*"]),
        ],
    )
    s3.put_object(Bucket="logs", Key="tmp/old log", Body=b"x")
    s3.put_object(Bucket="logs", Key="keep/b", Body=b"b")
    s3.put_bucket_lifecycle_configuration(
        Bucket="logs",
        LifecycleConfiguration={
            "Rules": [
                {
                    "ID": "expire-tmp",
                    "Status": "Enabled",
                    "Filter": {"Prefix": "tmp/"},
                    "Expiration": {"Days": 1},
                }
            ]
        },
    )
    later = datetime.now(UTC) + timedelta(days=3)
    db.clock = lambda: later
    result = run_lifecycle(db, now=later)
    assert result.changed == 1

    by_topic = routed(gateway)
    assert seen(by_topic[lifecycle]) == [(name, "tmp/old log")]
    assert removed not in by_topic  # a lifecycle expiration is not an ObjectRemoved event
    [event] = (d.event for d in by_topic[lifecycle])
    assert event["eventVersion"] == "2.3"
    assert event["lifecycleEventData"]["expirationEventData"]["ruleId"] == "expire-tmp"
    assert event["eventTime"].startswith(later.date().isoformat())
    obj = event["s3"]["object"]
    assert obj["key"] == "tmp/old+log"
    if versioned:
        [marker] = s3.list_object_versions(Bucket="logs", Prefix="tmp/")["DeleteMarkers"]
        assert obj["versionId"] == marker["VersionId"]
    else:
        assert "versionId" not in obj


def test_an_anonymous_write_names_anonymous_as_its_principal(
    gateway: Running,  # noqa: F811
    s3: Any,  # noqa: F811
    sns: Any,
) -> None:
    """An unsigned PutObject into a bucket whose ACL lets everyone write: its event's
    principal is `Anonymous`, as S3 names it; the signed owner's is its public id."""
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config

    gateway.services.db.eventing = gateway.services.registry.is_eventing
    arn = sns.create_topic(Name="open")["TopicArn"]
    s3.create_bucket(Bucket="dropbox", ACL="public-read-write")
    notify(s3, "dropbox", [("n", arn, ["s3:ObjectCreated:*"])])
    anonymous = boto3.client(
        "s3",
        endpoint_url=gateway.url,
        region_name="us-east-1",
        config=Config(signature_version=UNSIGNED, s3={"addressing_style": "path"}),
    )
    anonymous.put_object(Bucket="dropbox", Key="from-anyone", Body=b"x")
    s3.put_object(Bucket="dropbox", Key="from-owner", Body=b"y")
    principals = {
        d.attributes["key"]: d.event["userIdentity"]["principalId"] for d in routed(gateway)[arn]
    }
    assert principals == {
        "from-anyone": "Anonymous",
        "from-owner": str(gateway.key.project_public_id),
    }
