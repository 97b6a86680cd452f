"""ListObjects (v1), ListObjectsV2 and ListObjectVersions through boto3 against a live
gateway: prefixes, delimiters and every way of paging, compared with listings computed here;
`encoding-type=url` round trips of awkward keys; owners; refusals."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest
from botocore.exceptions import ClientError

from ripple.identity import create_key
from tests.gateway.conftest import Running
from tests.gateway.helpers import seed
from tests.gateway.wire import error_code, raw_request

# 25 keys: nested "dirs", a key that is also a prefix, empty segments, non-ASCII
# fmt: off
KEYS = [
    "a.txt", "b/1", "b/2", "b/c/1", "b/c/2", "b/c/d/1", "b/d", "c/1", "c/2", "c/3", "d", "dd/x",
    "e/f/g/h", "e/f/i", "photos/2024/jan/1.jpg", "photos/2024/jan/2.jpg", "photos/2024/feb/1.jpg",
    "photos/2025/mar/1.jpg", "photos/index.html", "z", "z/", "z//", "zz-1", "zz-2", "é/accent",
]
# fmt: on
AWKWARD = [
    "a b.txt",
    "a+b.txt",
    "100%.csv",
    "%41",
    "한글/x.txt",
    "run books/x y.txt",
    "tab\there",
    "tilde~star*",
    " leading and trailing ",
    "q?a=b&c#d",
    "cr\rlf",
    "line\nbreak",
]


def expected(keys: list[str], prefix: str = "", delimiter: str = "") -> list[str]:
    """Keys and common prefixes (in key order) S3 lists for `prefix` and `delimiter`."""
    entries: list[str] = []
    for key in sorted(keys, key=lambda k: k.encode()):
        if not key.startswith(prefix):
            continue
        at = key.find(delimiter, len(prefix)) if delimiter else -1
        entry = key if at < 0 else key[: at + len(delimiter)]
        if entry not in entries:
            entries.append(entry)
    return entries


def filled(s3: Any, bucket: str, keys: list[str]) -> str:
    s3.create_bucket(Bucket=bucket)
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=key.encode())
    return bucket


def seeded(gateway: Running, s3: Any, bucket: str, keys: list[str]) -> str:
    """A bucket holding `keys`, written through the metabase (quicker than PutObject)."""
    s3.create_bucket(Bucket=bucket)
    seed(gateway, bucket, keys)
    return bucket


def page_entries(page: dict[str, Any]) -> list[str]:
    keys = [c["Key"] for c in page.get("Contents", [])]
    prefixes = [p["Prefix"] for p in page.get("CommonPrefixes", [])]
    return sorted(keys + prefixes, key=lambda k: k.encode())


CASES = [("", ""), ("", "/"), ("b/", "/"), ("b/", ""), ("photos/", "/"), ("photos/2024/", "/")]
CASES += [("z", "/"), ("e/f/", "/"), ("nothing", "/"), ("", "c"), ("b", "/")]


@pytest.mark.parametrize(("prefix", "delimiter"), CASES)
def test_v1_and_v2_list_what_s3_would(
    gateway: Running, s3: Any, prefix: str, delimiter: str
) -> None:
    bucket = seeded(gateway, s3, "listing", KEYS)
    want = expected(KEYS, prefix, delimiter)
    v1 = s3.list_objects(Bucket=bucket, Prefix=prefix, Delimiter=delimiter)
    v2 = s3.list_objects_v2(Bucket=bucket, Prefix=prefix, Delimiter=delimiter)
    assert page_entries(v1) == want
    assert page_entries(v2) == want
    assert v2["KeyCount"] == len(want)
    assert v1["IsTruncated"] is False
    assert v2["IsTruncated"] is False
    assert v1["Prefix"] == prefix
    assert v2["Prefix"] == prefix
    assert v1.get("Delimiter", "") == delimiter


@pytest.mark.parametrize(("prefix", "delimiter"), [("", ""), ("", "/"), ("photos/", "/")])
@pytest.mark.parametrize("max_keys", [1, 3, 7])
def test_pages_of_every_size_add_up(
    gateway: Running, s3: Any, prefix: str, delimiter: str, max_keys: int
) -> None:
    bucket = seeded(gateway, s3, "paging", KEYS)
    want = expected(KEYS, prefix, delimiter)
    # v1 by hand: NextMarker with a delimiter, the last key without one
    got: list[str] = []
    marker = ""
    for _ in range(len(KEYS) + 1):
        page = s3.list_objects(
            Bucket=bucket, Prefix=prefix, Delimiter=delimiter, MaxKeys=max_keys, Marker=marker
        )
        entries = page_entries(page)
        assert len(entries) <= max_keys
        got += entries
        if not page["IsTruncated"]:
            break
        if delimiter:
            assert page["NextMarker"] == entries[-1]
        else:
            assert "NextMarker" not in page
        marker = entries[-1]
    assert got == want
    # v2 by hand, following the continuation token
    got = []
    token: str | None = None
    for _ in range(len(KEYS) + 1):
        args: dict[str, str] = {"ContinuationToken": token} if token else {}
        page = s3.list_objects_v2(
            Bucket=bucket, Prefix=prefix, Delimiter=delimiter, MaxKeys=max_keys, **args
        )
        assert page["KeyCount"] == len(page_entries(page)) <= max_keys
        if token:
            assert page["ContinuationToken"] == token
        got += page_entries(page)
        if not page["IsTruncated"]:
            assert "NextContinuationToken" not in page
            break
        token = page["NextContinuationToken"]
    assert got == want
    # and boto3's paginators
    for operation in ("list_objects", "list_objects_v2"):
        pages = s3.get_paginator(operation).paginate(
            Bucket=bucket,
            Prefix=prefix,
            Delimiter=delimiter,
            PaginationConfig={"PageSize": max_keys},
        )
        assert [e for page in pages for e in page_entries(page)] == want


def test_start_after_and_marker_skip_past_a_common_prefix(s3: Any) -> None:
    bucket = filled(s3, "resume", KEYS)
    after_b = [e for e in expected(KEYS, "", "/") if e.encode() > b"b/"]
    v2 = s3.list_objects_v2(Bucket=bucket, Delimiter="/", StartAfter="b/")
    assert page_entries(v2) == after_b
    assert v2["StartAfter"] == "b/"
    v1 = s3.list_objects(Bucket=bucket, Delimiter="/", Marker="b/")
    assert page_entries(v1) == after_b
    assert v1["Marker"] == "b/"
    no_delimiter = s3.list_objects_v2(Bucket=bucket, StartAfter="photos/")
    assert page_entries(no_delimiter) == [k for k in expected(KEYS) if k.encode() > b"photos/"]


def test_entries_carry_size_etag_time_class_and_owner_where_s3_does(
    gateway: Running, s3: Any
) -> None:
    s3.create_bucket(Bucket="entries")
    put = s3.put_object(Bucket="entries", Key="k", Body=b"12345")
    owner = {"ID": str(gateway.key.project_public_id), "DisplayName": gateway.key.user}
    (v1,) = s3.list_objects(Bucket="entries")["Contents"]
    assert v1["Key"] == "k"
    assert v1["Size"] == 5
    assert v1["ETag"] == put["ETag"]
    assert v1["StorageClass"] == "STANDARD"
    assert v1["Owner"] == owner
    assert v1["LastModified"].tzinfo is not None
    (v2,) = s3.list_objects_v2(Bucket="entries")["Contents"]
    assert "Owner" not in v2
    assert v2["ETag"] == put["ETag"]
    (fetched,) = s3.list_objects_v2(Bucket="entries", FetchOwner=True)["Contents"]
    assert fetched["Owner"] == owner


def test_url_encoding_round_trips_awkward_keys(gateway: Running, s3: Any) -> None:
    bucket = filled(s3, "awkward", AWKWARD)
    everything = AWKWARD
    want = sorted(everything, key=lambda k: k.encode())
    # boto3 asks for encoding-type=url and decodes what comes back
    v1 = s3.list_objects(Bucket=bucket)
    v2 = s3.list_objects_v2(Bucket=bucket)
    versions = s3.list_object_versions(Bucket=bucket)
    assert [c["Key"] for c in v1["Contents"]] == want
    assert [c["Key"] for c in v2["Contents"]] == want
    assert [v["Key"] for v in versions["Versions"]] == want
    for key in AWKWARD:  # every listed key names its object
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == key.encode()
    # common prefixes, prefixes and markers holding a space round-trip too
    rolled = s3.list_objects_v2(Bucket=bucket, Delimiter="/", Prefix="run books/", StartAfter="r")
    assert [c["Key"] for c in rolled["Contents"]] == ["run books/x y.txt"]
    assert rolled["Prefix"] == "run books/"
    assert rolled["StartAfter"] == "r"
    top = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in top["CommonPrefixes"]] == ["run books/", "한글/"]
    paged = s3.get_paginator("list_objects").paginate(
        Bucket=bucket, Delimiter=" ", PaginationConfig={"PageSize": 2}
    )
    entries = [e for page in paged for e in page_entries(page)]
    assert entries == expected(everything, "", " ")
    newline = s3.list_objects_v2(Bucket=bucket, Prefix="line", Delimiter="\n")
    assert [p["Prefix"] for p in newline["CommonPrefixes"]] == ["line\n"]
    assert newline["Delimiter"] == "\n"


def test_url_encoding_on_the_wire(gateway: Running, s3: Any) -> None:
    filled(s3, "wire", ["a b", "a+b", "100%", "한", "x/y z"])
    seed(gateway, "wire", ["n\nl"])
    # asked for explicitly, boto3 hands back the encoded values untouched
    page = s3.list_objects_v2(Bucket="wire", EncodingType="url", Delimiter="/")
    assert page["EncodingType"] == "url"
    assert [c["Key"] for c in page["Contents"]] == [
        "100%25",
        "a%20b",
        "a%2Bb",
        "n%0Al",
        "%ED%95%9C",
    ]
    assert [p["Prefix"] for p in page["CommonPrefixes"]] == ["x/"]
    plain = s3.list_objects_v2(Bucket="wire", Prefix="a ", EncodingType="url")
    assert plain["Prefix"] == "a%20"
    v1 = s3.list_objects(Bucket="wire", Marker="a b", EncodingType="url")
    assert v1["Marker"] == "a%20b"


def test_list_objects_v1_answers_its_prefix_as_sent(gateway: Running, s3: Any) -> None:
    """S3 encodes ListObjects' keys, common prefixes, markers and delimiter, not its
    Prefix; boto3 asks for encoding-type=url and decodes only those."""
    filled(s3, "vone", ["a b/1", "a b/2", "c"])
    listed = s3.list_objects(Bucket="vone", Prefix="a b/", Delimiter="/")
    assert listed["Prefix"] == "a b/"
    assert [c["Key"] for c in listed["Contents"]] == ["a b/1", "a b/2"]
    newline = s3.list_objects(Bucket="vone", Prefix="\n")
    assert newline["Prefix"] == "\n"
    assert "Contents" not in newline
    raw = raw_request(gateway, "GET", "/vone", {"prefix": "a b/", "encoding-type": "url"})
    namespace = {"s3": "http://s3.amazonaws.com/doc/2006-03-01/"}
    root = ET.fromstring(raw.content)
    assert root.findtext("s3:Prefix", namespaces=namespace) == "a b/"
    assert root.findtext("s3:Contents/s3:Key", namespaces=namespace) == "a%20b/1"
    # V2 and ListObjectVersions encode it, and boto3 decodes it there
    assert s3.list_objects_v2(Bucket="vone", Prefix="\n")["Prefix"] == "\n"
    assert s3.list_object_versions(Bucket="vone", Prefix="a b/")["Prefix"] == "a b/"


def test_an_empty_continuation_token_starts_from_the_beginning(s3: Any) -> None:
    filled(s3, "tokens", ["a", "b", "c"])
    listed = s3.list_objects_v2(Bucket="tokens", ContinuationToken="")
    assert listed["ContinuationToken"] == ""
    assert [c["Key"] for c in listed["Contents"]] == ["a", "b", "c"]
    after = s3.list_objects_v2(Bucket="tokens", ContinuationToken="", StartAfter="a")
    assert [c["Key"] for c in after["Contents"]] == ["b", "c"]


def test_encoding_type_and_max_keys_are_checked(gateway: Running, s3: Any) -> None:
    s3.create_bucket(Bucket="checked")
    bad_counts = ["ten", "-1", "+5", "5x", "1_000", "\u0661\u0662", "²", "9" * 5000, str(2**31)]
    for params in [{"max-keys": bad} for bad in bad_counts] + [{"encoding-type": "base64"}]:
        response = raw_request(gateway, "GET", "/checked", params)
        assert response.status_code == 400, params
        assert error_code(response) == "InvalidArgument"
    wrong_type = raw_request(gateway, "GET", "/checked", {"list-type": "3"})
    assert error_code(wrong_type) == "InvalidArgument"
    clamped = raw_request(gateway, "GET", "/checked", {"list-type": "2", "max-keys": "5000"})
    assert clamped.status_code == 200
    namespace = {"s3": "http://s3.amazonaws.com/doc/2006-03-01/"}
    assert ET.fromstring(clamped.content).findtext("s3:MaxKeys", namespaces=namespace) == "1000"
    assert s3.list_objects_v2(Bucket="checked", MaxKeys=0)["KeyCount"] == 0


@pytest.mark.parametrize("token", ["not base64!", "AA", "ZZZZ", "Ag", "A" * 5000])
def test_a_bad_continuation_token_is_invalid_argument(s3: Any, token: str) -> None:
    filled(s3, "tokens", ["a", "b"])
    with pytest.raises(ClientError) as caught:
        s3.list_objects_v2(Bucket="tokens", ContinuationToken=token)
    assert caught.value.response["Error"]["Code"] == "InvalidArgument"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_listing_a_missing_bucket_is_no_such_bucket(s3: Any) -> None:
    for call in (s3.list_objects, s3.list_objects_v2, s3.list_object_versions):
        with pytest.raises(ClientError) as caught:
            call(Bucket="missing")
        assert caught.value.response["Error"]["Code"] == "NoSuchBucket"


def test_versions_after_overwrite_and_delete(s3: Any) -> None:
    s3.create_bucket(Bucket="history")
    s3.put_bucket_versioning(Bucket="history", VersioningConfiguration={"Status": "Enabled"})
    first = s3.put_object(Bucket="history", Key="k", Body=b"one")
    second = s3.put_object(Bucket="history", Key="k", Body=b"second")
    marker = s3.delete_object(Bucket="history", Key="k")
    other = s3.put_object(Bucket="history", Key="other", Body=b"o")
    listing = s3.list_object_versions(Bucket="history")
    assert listing["IsTruncated"] is False
    versions = [(v["Key"], v["VersionId"], v["IsLatest"], v["Size"]) for v in listing["Versions"]]
    assert versions == [
        ("k", second["VersionId"], False, 6),
        ("k", first["VersionId"], False, 3),
        ("other", other["VersionId"], True, 1),
    ]
    assert listing["Versions"][0]["ETag"] == second["ETag"]
    assert listing["Versions"][0]["StorageClass"] == "STANDARD"
    (deleted,) = listing["DeleteMarkers"]
    assert marker["DeleteMarker"] is True
    assert (deleted["Key"], deleted["VersionId"], deleted["IsLatest"]) == (
        "k",
        marker["VersionId"],
        True,
    )
    assert deleted["Owner"]["DisplayName"] == "alice"
    # the latest version of k is a delete marker: plain listings leave k out
    assert [c["Key"] for c in s3.list_objects_v2(Bucket="history")["Contents"]] == ["other"]


def test_versions_page_through_key_and_version_markers(s3: Any) -> None:
    s3.create_bucket(Bucket="pages")
    s3.put_bucket_versioning(Bucket="pages", VersioningConfiguration={"Status": "Enabled"})
    made: list[tuple[str, str]] = []
    for key in ("a", "b/1", "b/2", "c"):
        for n in range(3):
            made.append((key, s3.put_object(Bucket="pages", Key=key, Body=b"x" * n)["VersionId"]))
    made.append(("c", s3.delete_object(Bucket="pages", Key="c")["VersionId"]))
    newest_first = sorted(made, key=lambda kv: (kv[0], -made.index(kv)))

    def entries(page: dict[str, Any]) -> list[tuple[str, str]]:
        found = [*page.get("Versions", []), *page.get("DeleteMarkers", [])]
        return sorted(
            ((v["Key"], v["VersionId"]) for v in found), key=lambda kv: newest_first.index(kv)
        )

    whole = s3.list_object_versions(Bucket="pages")
    assert entries(whole) == newest_first
    paged = s3.get_paginator("list_object_versions").paginate(
        Bucket="pages", PaginationConfig={"PageSize": 2}
    )
    pages = list(paged)
    assert len(pages) == 7
    assert [e for page in pages for e in entries(page)] == newest_first
    first = s3.list_object_versions(Bucket="pages", MaxKeys=4)
    assert first["IsTruncated"] is True
    assert (first["NextKeyMarker"], first["NextVersionIdMarker"]) == newest_first[3]
    rest = s3.list_object_versions(
        Bucket="pages",
        KeyMarker=first["NextKeyMarker"],
        VersionIdMarker=first["NextVersionIdMarker"],
    )
    assert entries(rest) == newest_first[4:]
    assert rest["KeyMarker"] == "b/1"
    # the newest version of b/1 was on the first page: nothing after it is latest
    assert [v["IsLatest"] for v in rest["Versions"] if v["Key"] == "b/1"] == [False, False]
    rolled = s3.list_object_versions(Bucket="pages", Delimiter="/", MaxKeys=4)
    assert [p["Prefix"] for p in rolled["CommonPrefixes"]] == ["b/"]
    assert rolled["NextKeyMarker"] == "b/"
    assert "NextVersionIdMarker" not in rolled
    after = s3.list_object_versions(Bucket="pages", Delimiter="/", KeyMarker="b/")
    assert {v["Key"] for v in after["Versions"]} == {"c"}


def test_null_versions_are_listed_as_null(s3: Any) -> None:
    s3.create_bucket(Bucket="plain")
    s3.put_object(Bucket="plain", Key="k", Body=b"v")
    (version,) = s3.list_object_versions(Bucket="plain")["Versions"]
    assert (version["Key"], version["VersionId"], version["IsLatest"]) == ("k", "null", True)
    with pytest.raises(ClientError) as caught:
        s3.list_object_versions(Bucket="plain", KeyMarker="k", VersionIdMarker="bogus")
    assert caught.value.response["Error"]["Code"] == "InvalidArgument"


def test_a_prefix_restricted_key_lists_only_under_its_prefix(gateway: Running, s3: Any) -> None:
    filled(s3, "shared", KEYS)
    key, secret = create_key(
        gateway.services.db, gateway.data_dir, "alice", bucket="shared", prefix="photos/"
    )
    restricted = gateway.client(key.access_key_id, secret)
    for prefix in ("", "b/", "photo"):
        with pytest.raises(ClientError) as caught:
            restricted.list_objects_v2(Bucket="shared", Prefix=prefix)
        assert caught.value.response["Error"]["Code"] == "AccessDenied"
    page = restricted.list_objects_v2(Bucket="shared", Prefix="photos/2024/", Delimiter="/")
    assert page_entries(page) == expected(KEYS, "photos/2024/", "/")
    versions = restricted.list_object_versions(Bucket="shared", Prefix="photos/")
    assert len(versions["Versions"]) == len(expected(KEYS, "photos/"))


def test_a_key_denied_list_cannot_list(gateway: Running, s3: Any) -> None:
    filled(s3, "denied", ["a"])
    key, secret = create_key(gateway.services.db, gateway.data_dir, "alice", denied=("list",))
    denied = gateway.client(key.access_key_id, secret)
    for call in (denied.list_objects, denied.list_objects_v2, denied.list_object_versions):
        with pytest.raises(ClientError) as caught:
            call(Bucket="denied")
        assert caught.value.response["Error"]["Code"] == "AccessDenied"


def test_a_carriage_return_in_a_key_survives_a_listing_without_url_encoding(
    gateway: Running, s3: Any
) -> None:
    """Written raw, XML's end-of-line handling would hand the key back with LF for CR; S3
    writes `&#13;`, which every parser reads back as CR."""
    seeded(gateway, s3, "crlf", ["cr\rlf", "two\r\nlines", "plain"])
    for params in ({"list-type": "2"}, {}, {"versions": ""}):
        listed = raw_request(gateway, "GET", "/crlf", params)
        assert listed.status_code == 200
        root = ET.fromstring(listed.content)
        keys = [k.text for k in root.iter("{http://s3.amazonaws.com/doc/2006-03-01/}Key")]
        assert keys == ["cr\rlf", "plain", "two\r\nlines"], params
