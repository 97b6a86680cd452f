"""What an access key may do: unrestricted, restricted to a bucket, to a prefix in it, and
with actions denied."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from ripple.identity import ACTIONS, AccessKey

PROJECT = uuid.UUID(int=1)
PUBLIC = uuid.UUID(int=2)


def access_key(**restrictions: Any) -> AccessKey:
    return AccessKey("RKAAAAAAAAAAAAAAAAAA", PROJECT, PUBLIC, "alice", **restrictions)


ANY = access_key()
PHOTOS = access_key(bucket="photos")
PHOTOS_2024 = access_key(bucket="photos", prefix="2024/")
READ_ONLY = access_key(denied=frozenset({"write", "delete"}))
NO_LIST_IN_PHOTOS = access_key(bucket="photos", denied=frozenset({"list"}))


@pytest.mark.parametrize(
    ("key", "action", "bucket", "object_key", "permitted"),
    [
        # unrestricted: everything, everywhere
        (ANY, "read", "photos", "a.jpg", True),
        (ANY, "write", "docs", "a.txt", True),
        (ANY, "delete", "docs", None, True),
        (ANY, "list", None, None, True),
        (ANY, "write", None, None, True),
        # restricted to a bucket
        (PHOTOS, "read", "photos", "a.jpg", True),
        (PHOTOS, "write", "photos", "a.jpg", True),
        (PHOTOS, "delete", "photos", None, True),  # DeleteBucket of its own bucket
        (PHOTOS, "list", "photos", None, True),
        (PHOTOS, "read", "docs", "a.txt", False),
        (PHOTOS, "write", "docs", None, False),  # CreateBucket of another bucket
        (PHOTOS, "list", "docs", "", False),
        (PHOTOS, "list", None, None, True),  # ListBuckets: the gateway shows only photos
        (PHOTOS, "write", None, None, False),
        (PHOTOS, "read", None, None, False),
        # restricted to a prefix in a bucket
        (PHOTOS_2024, "read", "photos", "2024/a.jpg", True),
        (PHOTOS_2024, "write", "photos", "2024/a.jpg", True),
        (PHOTOS_2024, "delete", "photos", "2024/a.jpg", True),
        (PHOTOS_2024, "read", "photos", "2023/a.jpg", False),
        (PHOTOS_2024, "write", "photos", "2024", False),  # not under "2024/"
        (PHOTOS_2024, "read", "docs", "2024/a.jpg", False),
        (PHOTOS_2024, "list", "photos", "2024/", True),
        (PHOTOS_2024, "list", "photos", "2024/06/", True),
        (PHOTOS_2024, "list", "photos", "2024", False),  # would show 2024x too
        (PHOTOS_2024, "list", "photos", "", False),
        (PHOTOS_2024, "list", "photos", None, False),  # the whole bucket
        (PHOTOS_2024, "read", "photos", None, True),  # HeadBucket, GetBucketVersioning
        (PHOTOS_2024, "write", "photos", None, False),  # PutBucketVersioning
        (PHOTOS_2024, "delete", "photos", None, False),  # DeleteBucket
        (PHOTOS_2024, "list", None, None, True),  # ListBuckets
        # denied actions, whatever the place
        (READ_ONLY, "read", "photos", "a.jpg", True),
        (READ_ONLY, "list", "photos", None, True),
        (READ_ONLY, "write", "photos", "a.jpg", False),
        (READ_ONLY, "delete", "photos", "a.jpg", False),
        (READ_ONLY, "write", None, None, False),
        (NO_LIST_IN_PHOTOS, "list", "photos", None, False),
        (NO_LIST_IN_PHOTOS, "list", None, None, False),
        (NO_LIST_IN_PHOTOS, "read", "photos", "a.jpg", True),
    ],
)
def test_permits(
    key: AccessKey, action: str, bucket: str | None, object_key: str | None, permitted: bool
) -> None:
    assert key.permits(action, bucket, object_key) is permitted


def test_every_action_denied() -> None:
    key = access_key(denied=frozenset(ACTIONS))
    for action in ACTIONS:
        assert not key.permits(action, "photos", "a.jpg")
        assert not key.permits(action)


def test_unknown_action_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown action 'admin'"):
        ANY.permits("admin", "photos")


def test_restrictions_are_checked_when_made() -> None:
    with pytest.raises(ValueError, match="unknown actions"):
        access_key(denied=frozenset({"admin"}))
    with pytest.raises(ValueError, match="needs a bucket"):
        access_key(prefix="2024/")


def test_keys_compare_by_value() -> None:
    assert access_key(bucket="photos") == PHOTOS
    assert hash(access_key(bucket="photos")) == hash(PHOTOS)
    assert PHOTOS != PHOTOS_2024
