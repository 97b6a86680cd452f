"""The standard S3 event record, so that an expected record is written as what differs from
it: eventVersion 2.1 of a PutObject of `red flower.jpg` (1024 bytes, the empty object's
eTag) into `photos`, owned by records.PUBLIC, committed at records.TS by the request of
records.PUT_TAG. Tests compare whole records with it, as they would a literal."""

from __future__ import annotations

import copy
from typing import Any

# what an event carries when no request made its change (no transaction tag): the system's
# name for the address, nothing else
NO_REQUEST: dict[str, Any] = {
    "userIdentity": {"principalId": ""},
    "requestParameters": {"sourceIPAddress": "ripple"},
    "responseElements": {"x-amz-request-id": "", "x-amz-id-2": ""},
}


def s3_record(
    *,
    bucket: str = "photos",
    owner: str = "1PublicProjectIdOfPhotos",
    obj: dict[str, Any] | None = None,
    **members: Any,
) -> dict[str, Any]:
    """The standard record, with `members` in place of the top-level members of their names
    (a member it does not have comes last, where an extension's goes), the bucket `bucket`
    of the project whose public id is `owner`, and `obj` as the whole of `s3.object`."""
    record: dict[str, Any] = {
        "eventVersion": "2.1",
        "eventSource": "ripple:s3",  # events.source unset (docs/events.md)
        "awsRegion": "us-east-1",  # s3.region unset: S3's name for none
        "eventTime": "2026-11-21T10:15:30.123Z",
        "eventName": "ObjectCreated:Put",
        "userIdentity": {"principalId": "AKIAUSER1"},
        "requestParameters": {"sourceIPAddress": "192.0.2.7"},
        "responseElements": {
            "x-amz-request-id": "C3D13FE58DE4C810",
            "x-amz-id-2": "FMyUVURIY8/IgAtTv8xRjskZQpcIZ9KG4V5Wp6S7S",
        },
        "s3": {
            "s3SchemaVersion": "1.0",
            "configurationId": "ObjectEvents",
            "bucket": {
                "name": bucket,
                "ownerIdentity": {"principalId": owner},
                "arn": f"arn:aws:s3:::{bucket}",
            },
            "object": obj
            if obj is not None
            else {
                "key": "red+flower.jpg",
                "size": 1024,
                "eTag": "d41d8cd98f00b204e9800998ecf8427e",
                "sequencer": "18EA07F04CD9E11500000000",
            },
        },
    }
    record.update(members)
    return copy.deepcopy(record)  # the caller's to change, sharing nothing with another
