"""ListObjects (`list_objects`): the latest version of each key in UTF-8 byte order, keys
whose latest version is a delete marker hidden, prefix and delimiter roll-up, start-after,
max-keys and truncation, and a property test that paging equals one listing equals a model."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ripple.metabase import (
    BucketLocation,
    ListObjectsResult,
    Object,
    Versioning,
    delete_object,
    list_objects,
)
from ripple.metabase.errors import BucketNotFound, InvalidArgument
from tests.metabase.objects import begin_object
from tests.metabase.steps import World


def keys(result: ListObjectsResult) -> list[str]:
    return [o.object_key for o in result.objects]


def put_all(world: World, bucket: BucketLocation, names: Iterable[str]) -> dict[str, Object]:
    return {name: world.put(bucket, name) for name in names}


def utf8(key: str) -> bytes:
    return key.encode("utf-8")


# --- ordering and visibility ----------------------------------------------------------------


def test_keys_listed_in_utf8_byte_order(world: World) -> None:
    bucket = world.bucket()
    created = put_all(
        world, bucket, ["z", "é", "b", "a", "B", "A", "~", "ab", "a/b", "😀", "\uffe0", "Z"]
    )
    result = list_objects(world.db, bucket)
    # bytes: A=41 B=42 Z=5a a=61 a/b=61 2f ab=61 62 b=62 z=7a ~=7e é=c3a9 ￠=efbfa0 😀=f09f...
    expected = ["A", "B", "Z", "a", "a/b", "ab", "b", "z", "~", "é", "\uffe0", "😀"]
    assert keys(result) == expected
    assert [o.stream_id for o in result.objects] == [created[k].stream_id for k in expected]
    assert result.common_prefixes == []
    assert result.is_truncated is False
    assert result.next_marker == ""


def test_uppercase_and_accented_keys_with_delimiter_and_prefix(world: World) -> None:
    bucket = world.bucket()
    put_all(world, bucket, ["é/1", "z/1", "E/1", "e/1", "éa", "ez"])
    result = list_objects(world.db, bucket, delimiter="/")
    assert keys(result) == ["ez", "éa"]
    assert result.common_prefixes == ["E/", "e/", "z/", "é/"]
    result = list_objects(world.db, bucket, prefix="é")
    assert keys(result) == ["é/1", "éa"]


def test_only_latest_version_of_each_key(world: World) -> None:
    bucket = world.bucket("versioned", Versioning.ENABLED)
    world.put(bucket, "a")
    world.put(bucket, "b")
    world.put(bucket, "a")
    a3 = world.put(bucket, "a")
    b2 = world.put(bucket, "b")
    c1 = world.put(bucket, "c")
    result = list_objects(world.db, bucket)
    assert keys(result) == ["a", "b", "c"]
    assert [o.stream_id for o in result.objects] == [a3.stream_id, b2.stream_id, c1.stream_id]
    assert [o.version_id for o in result.objects] == [a3.version_id, b2.version_id, c1.version_id]


def test_overwrite_in_unversioned_bucket_lists_the_new_object(world: World) -> None:
    bucket = world.bucket()
    world.put(bucket, "a", b"old")
    new = world.put(bucket, "a", b"new!")
    result = list_objects(world.db, bucket)
    assert [(o.object_key, o.stream_id, o.total_plain_size) for o in result.objects] == [
        ("a", new.stream_id, 4)
    ]


def test_delete_marker_hides_key_in_versioned_bucket(world: World) -> None:
    bucket = world.bucket("versioned", Versioning.ENABLED)
    put_all(world, bucket, ["a", "b", "c"])
    delete_object(world.db, world.loc(bucket, "b"))
    assert keys(list_objects(world.db, bucket)) == ["a", "c"]
    # written again after the marker: visible, as the newest version
    again = world.put(bucket, "b")
    result = list_objects(world.db, bucket)
    assert keys(result) == ["a", "b", "c"]
    assert result.objects[1].stream_id == again.stream_id


def test_null_delete_marker_hides_key_in_suspended_bucket(world: World) -> None:
    bucket = world.bucket("suspended", Versioning.SUSPENDED)
    put_all(world, bucket, ["a", "b"])
    delete_object(world.db, world.loc(bucket, "a"))
    assert keys(list_objects(world.db, bucket)) == ["b"]


def test_delete_marker_on_key_without_versions_lists_nothing(world: World) -> None:
    bucket = world.bucket("versioned", Versioning.ENABLED)
    delete_object(world.db, world.loc(bucket, "ghost"))
    result = list_objects(world.db, bucket, delimiter="/")
    assert result == ListObjectsResult([], [], False, "")


def test_common_prefix_with_only_hidden_keys_is_not_returned(world: World) -> None:
    bucket = world.bucket("versioned", Versioning.ENABLED)
    put_all(world, bucket, ["d/1", "d/2", "e/1", "e/2", "f", "g/h/1"])
    for key in ("d/1", "d/2", "e/2", "g/h/1"):
        delete_object(world.db, world.loc(bucket, key))
    result = list_objects(world.db, bucket, delimiter="/")
    assert keys(result) == ["f"]
    assert result.common_prefixes == ["e/"]  # e/1 still visible; d/ and g/ fully hidden
    result = list_objects(world.db, bucket, prefix="g/", delimiter="/")
    assert result == ListObjectsResult([], [], False, "")


def test_pending_uploads_are_invisible(world: World) -> None:
    bucket = world.bucket()
    committed = world.put(bucket, "a")
    begin_object(world.db, world.loc(bucket, "a"))  # a newer, pending version of "a"
    begin_object(world.db, world.loc(bucket, "p"))
    begin_object(world.db, world.loc(bucket, "q/x"))
    result = list_objects(world.db, bucket)
    assert [(o.object_key, o.stream_id) for o in result.objects] == [("a", committed.stream_id)]
    result = list_objects(world.db, bucket, delimiter="/")
    assert keys(result) == ["a"]
    assert result.common_prefixes == []


def test_other_buckets_are_not_listed(world: World) -> None:
    one = world.bucket("one")
    two = world.bucket("two")
    world.put(one, "a")
    world.put(two, "b")
    assert keys(list_objects(world.db, one)) == ["a"]
    assert keys(list_objects(world.db, two)) == ["b"]


# --- prefix and delimiter -------------------------------------------------------------------


def test_prefix(world: World) -> None:
    bucket = world.bucket()
    put_all(world, bucket, ["a", "ab", "ab/x", "abc", "ac", "b"])
    assert keys(list_objects(world.db, bucket, prefix="ab")) == ["ab", "ab/x", "abc"]
    assert keys(list_objects(world.db, bucket, prefix="ab/")) == ["ab/x"]
    assert keys(list_objects(world.db, bucket, prefix="a")) == ["a", "ab", "ab/x", "abc", "ac"]
    assert keys(list_objects(world.db, bucket, prefix="zz")) == []
    assert keys(list_objects(world.db, bucket, prefix="abcd")) == []


def test_delimiter_rolls_keys_up_into_common_prefixes(world: World) -> None:
    bucket = world.bucket()
    put_all(world, bucket, ["a", "b/1", "b/2", "b/c/3", "b0", "c/", "d", "e//f"])
    result = list_objects(world.db, bucket, delimiter="/")
    assert keys(result) == ["a", "b0", "d"]
    assert result.common_prefixes == ["b/", "c/", "e/"]
    assert result.is_truncated is False
    assert result.next_marker == ""


def test_prefix_ending_in_delimiter(world: World) -> None:
    bucket = world.bucket()
    put_all(world, bucket, ["b/", "b//x", "b/1", "b/2", "b/c/3", "b/c/4", "bz", "c/1"])
    result = list_objects(world.db, bucket, prefix="b/", delimiter="/")
    # "b/" itself has nothing after the prefix, so it is an object, not a common prefix
    assert keys(result) == ["b/", "b/1", "b/2"]
    assert result.common_prefixes == ["b//", "b/c/"]


def test_prefix_without_trailing_delimiter(world: World) -> None:
    bucket = world.bucket()
    put_all(world, bucket, ["photo", "photos/1", "photos/2", "photoshop", "photo/x"])
    result = list_objects(world.db, bucket, prefix="photo", delimiter="/")
    assert keys(result) == ["photo", "photoshop"]
    assert result.common_prefixes == ["photo/", "photos/"]


def test_multi_character_delimiter(world: World) -> None:
    bucket = world.bucket()
    put_all(world, bucket, ["a---b", "x--1", "x--2", "x-y", "y--z--w", "y--z--v", "y--q", "z"])
    result = list_objects(world.db, bucket, delimiter="--")
    assert keys(result) == ["x-y", "z"]
    # the first occurrence of the delimiter after the prefix ends the common prefix
    assert result.common_prefixes == ["a--", "x--", "y--"]
    result = list_objects(world.db, bucket, prefix="y--", delimiter="--")
    assert keys(result) == ["y--q"]
    assert result.common_prefixes == ["y--z--"]
    # the delimiter is searched for only after the prefix: "a-" + "--b" rolls up at "a---"
    result = list_objects(world.db, bucket, prefix="a-", delimiter="--")
    assert keys(result) == []
    assert result.common_prefixes == ["a---"]


# --- start-after, max-keys, truncation ------------------------------------------------------


def test_start_after(world: World) -> None:
    bucket = world.bucket()
    put_all(world, bucket, ["a", "b", "c", "d"])
    assert keys(list_objects(world.db, bucket, start_after="b")) == ["c", "d"]
    assert keys(list_objects(world.db, bucket, start_after="bb")) == ["c", "d"]  # not a key
    assert keys(list_objects(world.db, bucket, start_after="0")) == ["a", "b", "c", "d"]
    assert keys(list_objects(world.db, bucket, start_after="d")) == []
    assert keys(list_objects(world.db, bucket, start_after="é")) == []
    assert keys(list_objects(world.db, bucket, prefix="c", start_after="a")) == ["c"]


def test_max_keys_zero_returns_nothing(world: World) -> None:
    bucket = world.bucket()
    put_all(world, bucket, ["a", "b"])
    assert list_objects(world.db, bucket, max_keys=0) == ListObjectsResult([], [], False, "")


def test_max_keys_truncates_and_next_marker_resumes(world: World) -> None:
    bucket = world.bucket()
    put_all(world, bucket, ["a", "b", "c", "d", "e"])

    one = list_objects(world.db, bucket, max_keys=1)
    assert (keys(one), one.is_truncated, one.next_marker) == (["a"], True, "a")

    four = list_objects(world.db, bucket, max_keys=4)
    assert (keys(four), four.is_truncated, four.next_marker) == (["a", "b", "c", "d"], True, "d")
    rest = list_objects(world.db, bucket, max_keys=4, start_after=four.next_marker)
    assert (keys(rest), rest.is_truncated, rest.next_marker) == (["e"], False, "")

    exact = list_objects(world.db, bucket, max_keys=5)
    assert (keys(exact), exact.is_truncated, exact.next_marker) == (
        ["a", "b", "c", "d", "e"],
        False,
        "",
    )


def test_not_truncated_when_only_hidden_keys_remain(world: World) -> None:
    bucket = world.bucket("versioned", Versioning.ENABLED)
    put_all(world, bucket, ["a", "b", "c", "d/1"])
    delete_object(world.db, world.loc(bucket, "c"))
    delete_object(world.db, world.loc(bucket, "d/1"))
    result = list_objects(world.db, bucket, max_keys=2, delimiter="/")
    assert (keys(result), result.is_truncated, result.next_marker) == (["a", "b"], False, "")


def test_common_prefixes_count_towards_max_keys(world: World) -> None:
    bucket = world.bucket()
    put_all(world, bucket, ["a", "b/1", "b/2", "b0", "c"])
    page = list_objects(world.db, bucket, delimiter="/", max_keys=2)
    assert keys(page) == ["a"]
    assert page.common_prefixes == ["b/"]
    assert (page.is_truncated, page.next_marker) == (True, "b/")


def test_marker_equal_to_common_prefix_resumes_after_the_whole_prefix(world: World) -> None:
    bucket = world.bucket()
    put_all(world, bucket, ["a", "b/1", "b/2", "b/3/x", "b0", "c"])
    page = list_objects(world.db, bucket, delimiter="/", start_after="b/", max_keys=10)
    assert keys(page) == ["b0", "c"]
    assert page.common_prefixes == []
    # without the delimiter "b/" is only a position: every "b/..." key sorts after it
    page = list_objects(world.db, bucket, start_after="b/")
    assert keys(page) == ["b/1", "b/2", "b/3/x", "b0", "c"]
    # with a prefix ending in the delimiter, a nested common prefix as marker skips it whole
    page = list_objects(world.db, bucket, prefix="b/", delimiter="/", start_after="b/3/")
    assert keys(page) == []
    assert page.common_prefixes == []
    page = list_objects(world.db, bucket, prefix="b/", delimiter="/", start_after="b/1")
    assert keys(page) == ["b/2"]
    assert page.common_prefixes == ["b/3/"]


def test_max_keys_above_1000_is_clamped_to_1000(world: World) -> None:
    bucket = world.bucket()
    names = [f"k{i:04d}" for i in range(1001)]
    for name in names:
        world.put(bucket, name, b"")
    page = list_objects(world.db, bucket, max_keys=5000)
    assert keys(page) == names[:1000]
    assert (page.is_truncated, page.next_marker) == (True, "k0999")
    rest = list_objects(world.db, bucket, max_keys=5000, start_after=page.next_marker)
    assert (keys(rest), rest.is_truncated) == (["k1000"], False)
    # the default is 1000 too
    default = list_objects(world.db, bucket)
    assert (len(default.objects), default.is_truncated) == (1000, True)


# --- errors ---------------------------------------------------------------------------------


def test_unknown_bucket(world: World) -> None:
    with pytest.raises(BucketNotFound) as info:
        list_objects(world.db, BucketLocation(world.project.id, "missing"))
    assert info.value.code == "NoSuchBucket"


def test_negative_max_keys(world: World) -> None:
    bucket = world.bucket()
    with pytest.raises(InvalidArgument) as info:
        list_objects(world.db, bucket, max_keys=-1)
    assert info.value.code == "InvalidArgument"


# --- property: paging == one listing == model -----------------------------------------------


def model(visible: Iterable[str], prefix: str, delimiter: str) -> list[tuple[str, str]]:
    """S3 ListObjects over the visible keys: ("object"|"prefix", name) in byte order."""
    entries: set[tuple[str, str]] = set()
    for key in visible:
        if not key.startswith(prefix):
            continue
        rest = key[len(prefix) :]
        if delimiter and delimiter in rest:
            entries.add(("prefix", prefix + rest[: rest.index(delimiter) + len(delimiter)]))
        else:
            entries.add(("object", key))
    return sorted(entries, key=lambda e: utf8(e[1]))


def entries(result: ListObjectsResult) -> list[tuple[str, str]]:
    merged = [("object", o.object_key) for o in result.objects]
    merged += [("prefix", p) for p in result.common_prefixes]
    return sorted(merged, key=lambda e: utf8(e[1]))


_bucket_numbers = itertools.count()
_key = st.text(alphabet="ab/é", min_size=1, max_size=6)


@st.composite
def listing_cases(draw: st.DrawFn) -> tuple[dict[str, str], str, str, int]:
    """Keys with what happens to each, then a delimiter, a prefix and a page size. The
    prefix is often a prefix of a created key so that listings are rarely empty."""
    history = draw(
        st.dictionaries(_key, st.sampled_from(["put", "overwrite", "deleted"]), max_size=12)
    )
    starts = sorted({""} | {k[:i] for k in history for i in range(1, len(k) + 1)})
    prefix = draw(st.sampled_from(starts) | st.text(alphabet="ab/", max_size=3))
    delimiter = draw(st.sampled_from(["", "/"]))
    page_size = draw(st.integers(min_value=1, max_value=5))
    return history, prefix, delimiter, page_size


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=listing_cases())
def test_paging_equals_one_listing_equals_model(
    world: World, case: tuple[dict[str, str], str, str, int]
) -> None:
    history, prefix, delimiter, page_size = case
    bucket = world.bucket(f"prop-{next(_bucket_numbers)}", Versioning.ENABLED)
    latest: dict[str, Object] = {}
    for key, what in history.items():
        obj = world.put(bucket, key)
        if what == "overwrite":
            obj = world.put(bucket, key)
        if what == "deleted":
            delete_object(world.db, world.loc(bucket, key))
        else:
            latest[key] = obj
    expected = model(latest, prefix, delimiter)

    whole = list_objects(world.db, bucket, prefix=prefix, delimiter=delimiter)
    assert entries(whole) == expected
    assert (whole.is_truncated, whole.next_marker) == (False, "")
    assert [o.stream_id for o in whole.objects] == [
        latest[o.object_key].stream_id for o in whole.objects
    ]
    assert [o.object_key for o in whole.objects] == sorted(
        (o.object_key for o in whole.objects), key=utf8
    )
    assert whole.common_prefixes == sorted(whole.common_prefixes, key=utf8)

    paged: list[tuple[str, str]] = []
    marker = ""
    for _ in range(len(expected) + 1):
        page = list_objects(
            world.db,
            bucket,
            prefix=prefix,
            delimiter=delimiter,
            start_after=marker,
            max_keys=page_size,
        )
        got = entries(page)
        paged += got
        if not page.is_truncated:
            assert page.next_marker == ""
            assert len(got) <= page_size
            break
        assert len(got) == page_size
        assert page.next_marker == got[-1][1]
        marker = page.next_marker
    else:
        pytest.fail("paging did not end")
    assert paged == expected
