"""CopyObject onto itself with `x-amz-metadata-directive: REPLACE` (how S3 clients change an
object's metadata) emits `ObjectCreated:Copy`, as S3 does, carrying the new metadata: through
the gateway (boto3, SQLite and PostgreSQL), the change records, the transform and routing,
without Spark (issue 9, item 4's first part)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.gateway.conftest import Running, gateway, s3, services  # noqa: F401
from tests.pipeline.helpers import routed, seen


def test_copy_onto_itself_with_replace_is_an_object_created_copy(
    gateway: Running,  # noqa: F811
    s3: Any,  # noqa: F811
    sns: Any,
) -> None:
    gateway.services.db.eventing = gateway.services.registry.is_eventing
    topic = sns.create_topic(Name="mirror", Attributes={"include-metadata": "true"})["TopicArn"]
    s3.create_bucket(Bucket="photos")
    s3.put_bucket_notification_configuration(
        Bucket="photos",
        NotificationConfiguration={
            "TopicConfigurations": [
                {"TopicArn": topic, "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]}
            ]
        },
    )
    s3.put_object(Bucket="photos", Key="a.jpg", Body=b"pixels", Metadata={"camera": "x100v"})
    with pytest.raises(ClientError, match="InvalidRequest"):  # as S3: nothing would change
        s3.copy_object(Bucket="photos", Key="a.jpg", CopySource="photos/a.jpg")
    s3.copy_object(
        Bucket="photos",
        Key="a.jpg",
        CopySource="photos/a.jpg",
        MetadataDirective="REPLACE",
        Metadata={"camera": "a7iv", "edited": "yes"},
    )

    deliveries = routed(gateway)[topic]
    # the replaced version is not reported removed: S3 reports only the new object
    assert seen(deliveries) == [("ObjectCreated:Put", "a.jpg"), ("ObjectCreated:Copy", "a.jpg")]
    copied = deliveries[1].event["s3"]["object"]
    assert copied["metadata"] == [
        {"key": "x-amz-meta-camera", "val": "a7iv"},
        {"key": "x-amz-meta-edited", "val": "yes"},
    ]
    assert copied["size"] == len(b"pixels")
    assert s3.head_object(Bucket="photos", Key="a.jpg")["Metadata"] == {
        "camera": "a7iv",
        "edited": "yes",
    }
