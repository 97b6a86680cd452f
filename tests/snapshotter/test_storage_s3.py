"""S3Storage against ripple's own S3 gateway on loopback: round trips with content types and
metadata, prefixes, listings over several requests, deletes, missing keys and buckets, a
wrong secret and a closed port, all as one-line StorageErrors."""

from __future__ import annotations

import hashlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ripple.metabase import Metabase
from ripple.snapshotter.settings import SnapshotterSettings
from ripple.snapshotter.storage import S3Storage, StorageError, open_storage
from ripple.snapshotter.storage.s3 import normalise_prefix
from tests.conftest import _empty, _metabase
from tests.gateway.conftest import Running, gateway, s3, services  # noqa: F401

BUCKET = "pages"


@pytest.fixture
def db(sqlite_url: str) -> Metabase:
    """The gateway's metabase on SQLite only: the storage is what is tested here."""
    return _empty(_metabase(sqlite_url))


@pytest.fixture
def bucket(s3: Any) -> str:  # noqa: F811
    s3.create_bucket(Bucket=BUCKET)
    return BUCKET


def make_storage(gateway: Running, bucket: str = BUCKET, **values: Any) -> S3Storage:  # noqa: F811
    values.setdefault("access_key", gateway.key.access_key_id)
    values.setdefault("secret_key", gateway.secret)
    return S3Storage(bucket, endpoint_url=gateway.url, **values)


@pytest.fixture
def storage(gateway: Running, bucket: str) -> Iterator[S3Storage]:  # noqa: F811
    storage = make_storage(gateway, bucket)
    yield storage
    storage.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [("", ""), ("/", ""), ("archive", "archive/"), ("/archive/", "archive/"), ("a/b//", "a/b/")],
)
def test_normalise_prefix(prefix: str, expected: str) -> None:
    assert normalise_prefix(prefix) == expected


def test_round_trip(storage: S3Storage, s3: Any) -> None:  # noqa: F811
    data = b"\x28\xb5\x2f\xfd page bytes"
    before = time.time()
    stored = storage.put(
        "w1/2024-05-01/17_1.pb.zst", data, "application/x-protobuf", {"writer": "w1"}
    )

    assert stored.key == "w1/2024-05-01/17_1.pb.zst"
    assert stored.size == len(data)
    assert stored.etag == hashlib.md5(data).hexdigest()
    assert stored.last_modified >= before
    assert storage.get("w1/2024-05-01/17_1.pb.zst") == data
    raw = s3.head_object(Bucket=BUCKET, Key="w1/2024-05-01/17_1.pb.zst")
    assert raw["ContentType"] == "application/x-protobuf"
    assert raw["Metadata"] == {"writer": "w1"}

    head = storage.head("w1/2024-05-01/17_1.pb.zst")
    assert head is not None
    assert (head.key, head.size, head.etag) == (stored.key, len(data), stored.etag)
    assert head.content_type == "application/x-protobuf"
    assert head.metadata == {"writer": "w1"}
    assert head.last_modified == pytest.approx(time.time(), abs=60)
    assert storage.backend == "s3"


def test_put_replaces(storage: S3Storage) -> None:
    storage.put("k.ndjson", b"old", "application/x-ndjson", {"v": "1"})
    storage.put("k.ndjson", b"new, longer", "application/x-ndjson", {"v": "2"})

    assert storage.get("k.ndjson") == b"new, longer"
    head = storage.head("k.ndjson")
    assert head is not None
    assert head.metadata == {"v": "2"}
    assert [o.key for o in storage.list()] == ["k.ndjson"]


KEYS = ["a-b", "a/b", "a/c/d.pb", "a/c/e.pb", "ab", "b", "a/c0"]


def test_list_in_key_order_over_several_requests(
    gateway: Running,  # noqa: F811
    bucket: str,
) -> None:
    client = gateway.client()
    requests: list[dict[str, Any]] = []
    client.meta.events.register(
        "before-call.s3.ListObjectsV2", lambda params, **_: requests.append(params)
    )
    storage = S3Storage(bucket, client=client, page_size=2)
    for n, key in enumerate(KEYS):
        storage.put(key, b"x" * n, "", {})

    listed = list(storage.list())

    assert [o.key for o in listed] == sorted(KEYS)
    assert {o.key: o.size for o in listed} == {key: n for n, key in enumerate(KEYS)}
    assert all(o.etag == hashlib.md5(b"x" * o.size).hexdigest() for o in listed)
    assert len(requests) == 4  # 7 keys, 2 a request
    assert [o.key for o in storage.list("a/")] == ["a/b", "a/c/d.pb", "a/c/e.pb", "a/c0"]
    assert [o.key for o in storage.list("a/c")] == ["a/c/d.pb", "a/c/e.pb", "a/c0"]
    assert list(storage.list("zz")) == []

    storage.close()  # a client it was given stays open
    assert client.list_objects_v2(Bucket=bucket)["KeyCount"] == len(KEYS)


def test_a_prefix_is_added_and_stripped(
    gateway: Running,  # noqa: F811
    bucket: str,
    s3: Any,  # noqa: F811
) -> None:
    s3.put_object(Bucket=bucket, Key="other/1.pb", Body=b"not ours")
    s3.put_object(Bucket=bucket, Key="archive1.pb", Body=b"not ours")
    storage = make_storage(gateway, prefix="/archive", page_size=2)

    for key in ["w/1.pb", "w/2.pb", "v/1.pb"]:
        storage.put(key, key.encode(), "application/x-protobuf", {})

    raw = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    ours = ["archive/v/1.pb", "archive/w/1.pb", "archive/w/2.pb"]
    assert raw == [*ours, "archive1.pb", "other/1.pb"]
    assert [o.key for o in storage.list()] == ["v/1.pb", "w/1.pb", "w/2.pb"]
    assert [o.key for o in storage.list("w/")] == ["w/1.pb", "w/2.pb"]
    assert storage.get("w/2.pb") == b"w/2.pb"
    head = storage.head("v/1.pb")
    assert head is not None
    assert head.key == "v/1.pb"
    storage.delete("w/1.pb")
    assert [o.key for o in storage.list()] == ["v/1.pb", "w/2.pb"]
    storage.close()


def test_delete(storage: S3Storage) -> None:
    storage.put("w/1.pb", b"x", "", {})
    storage.put("w/2.pb", b"y", "", {})

    storage.delete("w/1.pb")
    storage.delete("w/1.pb")  # again: fine
    storage.delete("never/was.pb")

    assert storage.head("w/1.pb") is None
    assert [o.key for o in storage.list()] == ["w/2.pb"]


def test_a_missing_key(storage: S3Storage) -> None:
    with pytest.raises(StorageError) as caught:
        storage.get("w/none.pb")

    assert caught.value.missing
    assert str(caught.value).startswith("s3 storage bucket 'pages': get w/none.pb: NoSuchKey")
    assert storage.head("w/none.pb") is None


def test_an_empty_key_is_refused(storage: S3Storage) -> None:
    with pytest.raises(StorageError, match="put '': a key is not empty"):
        storage.put("", b"x", "", {})


def test_an_unknown_bucket(gateway: Running) -> None:  # noqa: F811
    storage = make_storage(gateway, "no-such-bucket")

    with pytest.raises(StorageError) as caught:
        storage.put("a/b.pb", b"x", "application/x-protobuf", {})
    assert str(caught.value).startswith(
        "s3 storage bucket 'no-such-bucket': put a/b.pb: NoSuchBucket"
    )
    assert not caught.value.missing

    for call in (lambda: storage.get("a/b.pb"), lambda: list(storage.list())):
        with pytest.raises(StorageError, match="NoSuchBucket") as caught:
            call()
        assert not caught.value.missing  # a missing bucket is not a missing key
    storage.close()


def test_a_wrong_secret_key(gateway: Running, bucket: str) -> None:  # noqa: F811
    storage = make_storage(gateway, secret_key="not-the-secret")

    with pytest.raises(StorageError) as caught:
        storage.put("a/b.pb", b"x", "", {})

    message = str(caught.value)
    assert message.startswith("s3 storage bucket 'pages': put a/b.pb: SignatureDoesNotMatch")
    assert "\n" not in message
    assert not caught.value.missing
    with pytest.raises(StorageError, match=r"head a/b\.pb: 403: Forbidden$"):
        storage.head("a/b.pb")  # refused, not None: a HEAD answer carries no error code


def test_a_closed_port_fails_quickly() -> None:
    port = closed_port()
    storage = S3Storage(
        BUCKET, endpoint_url=f"http://127.0.0.1:{port}", access_key="k", secret_key="s"
    )
    started = time.monotonic()

    with pytest.raises(StorageError) as caught:
        storage.put("a/b.pb", b"x", "", {})

    assert time.monotonic() - started < 10
    message = str(caught.value)
    assert message.startswith("s3 storage bucket 'pages': put a/b.pb: Could not connect")
    assert f"127.0.0.1:{port}" in message
    assert "\n" not in message
    with pytest.raises(StorageError, match="Could not connect"):
        list(storage.list())
    storage.close()


def test_open_storage_makes_the_s3_storage(
    gateway: Running,  # noqa: F811
    bucket: str,
    tmp_path: Path,
) -> None:
    settings = SnapshotterSettings.embedded(
        tmp_path,
        storage="s3",
        s3_endpoint=gateway.url,
        s3_bucket=bucket,
        s3_prefix="snap",
        s3_access_key=gateway.key.access_key_id,
        s3_secret_key=gateway.secret,
    )
    storage = open_storage(settings)

    assert isinstance(storage, S3Storage)
    storage.put("w/1.pb", b"x", "application/x-protobuf", {})
    assert gateway.client().get_object(Bucket=bucket, Key="snap/w/1.pb")["Body"].read() == b"x"
    storage.close()
