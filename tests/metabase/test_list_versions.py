"""ListObjectVersions (`list_object_versions`): every version and delete marker, keys in byte
order and each key's versions newest first, `is_latest` on each key's newest row, `null`
versions where they belong, prefix and delimiter roll-up, and paging by key and version-ID
markers that gives the same sequence as one listing."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ripple.metabase import (
    BucketLocation,
    ListVersionsResult,
    Object,
    Versioning,
    delete_object,
    delete_object_version,
    list_object_versions,
    set_bucket_versioning,
)
from ripple.metabase.errors import BucketNotFound, InvalidArgument, InvalidVersionId
from tests.metabase.objects import begin_object
from tests.metabase.steps import World

# (key, version ID, is delete marker, is latest)
Entry = tuple[str, str, bool, bool]


def listed(result: ListVersionsResult) -> list[Entry]:
    return [
        (e.object.object_key, e.object.version_id, e.object.is_delete_marker, e.is_latest)
        for e in result.versions
    ]


def expect(key: str, rows: Iterable[Object]) -> list[Entry]:
    """The entries of one key's rows, given newest first: the first is the latest."""
    return [(key, row.version_id, row.is_delete_marker, i == 0) for i, row in enumerate(rows)]


def marker(world: World, bucket: BucketLocation, key: str) -> Object:
    result = delete_object(world.db, world.loc(bucket, key))
    assert result.marker is not None
    return result.marker


def page_through(
    world: World, bucket: BucketLocation, max_keys: int, **kwargs: str
) -> tuple[list[Entry], list[str], list[ListVersionsResult]]:
    """Every page from the start, following the next markers until not truncated."""
    entries: list[Entry] = []
    prefixes: list[str] = []
    pages: list[ListVersionsResult] = []
    key_marker = version_marker = ""
    for _ in range(200):
        page = list_object_versions(
            world.db,
            bucket,
            key_marker=key_marker,
            version_id_marker=version_marker,
            max_keys=max_keys,
            **kwargs,
        )
        pages.append(page)
        entries += listed(page)
        prefixes += page.common_prefixes
        if not page.is_truncated:
            assert (page.next_key_marker, page.next_version_id_marker) == ("", "")
            return entries, prefixes, pages
        assert len(page.versions) + len(page.common_prefixes) == max_keys
        key_marker, version_marker = page.next_key_marker, page.next_version_id_marker
    pytest.fail("paging did not end")


# --- what is listed, in which order ---------------------------------------------------------


def test_all_versions_and_markers_key_ascending_newest_first(world: World) -> None:
    bucket = world.bucket("versioned", Versioning.ENABLED)
    a1 = world.put(bucket, "a")
    b1 = world.put(bucket, "b")
    a2 = world.put(bucket, "a")
    am = marker(world, bucket, "a")
    c1 = world.put(bucket, "c")
    cm = marker(world, bucket, "c")
    c2 = world.put(bucket, "c")
    e1 = world.put(bucket, "é")
    z1 = world.put(bucket, "z")
    result = list_object_versions(world.db, bucket)
    assert listed(result) == [
        *expect("a", [am, a2, a1]),
        *expect("b", [b1]),
        *expect("c", [c2, cm, c1]),
        *expect("z", [z1]),
        *expect("é", [e1]),
    ]
    assert [e.object.stream_id for e in result.versions] == [
        o.stream_id for o in (am, a2, a1, b1, c2, cm, c1, z1, e1)
    ]
    assert result.common_prefixes == []
    assert (result.is_truncated, result.next_key_marker, result.next_version_id_marker) == (
        False,
        "",
        "",
    )


def test_only_markers_for_a_key_never_written(world: World) -> None:
    bucket = world.bucket("versioned", Versioning.ENABLED)
    m1 = marker(world, bucket, "ghost")
    m2 = marker(world, bucket, "ghost")
    assert listed(list_object_versions(world.db, bucket)) == expect("ghost", [m2, m1])


def test_unversioned_bucket_lists_one_null_version_per_key(world: World) -> None:
    bucket = world.bucket()
    world.put(bucket, "a")
    a = world.put(bucket, "a")
    b = world.put(bucket, "b")
    assert listed(list_object_versions(world.db, bucket)) == [
        ("a", "null", False, True),
        ("b", "null", False, True),
    ]
    assert a.version_id == b.version_id == "null"


def test_null_versions_appear_in_their_position(world: World) -> None:
    bucket = world.bucket()
    n1 = world.put(bucket, "k")  # written while unversioned: the null version
    set_bucket_versioning(world.db, bucket, enabled=True)
    v2 = world.put(bucket, "k")
    v3 = world.put(bucket, "k")
    assert n1.version_id == "null"
    assert listed(list_object_versions(world.db, bucket)) == expect("k", [v3, v2, n1])

    set_bucket_versioning(world.db, bucket, enabled=False)
    n4 = world.put(bucket, "k")  # suspended: replaces the null version, becomes the latest
    assert listed(list_object_versions(world.db, bucket)) == expect("k", [n4, v3, v2])

    set_bucket_versioning(world.db, bucket, enabled=True)
    v5 = world.put(bucket, "k")  # the null version is now in the middle
    result = list_object_versions(world.db, bucket)
    assert listed(result) == expect("k", [v5, n4, v3, v2])
    assert result.versions[1].object.stream_id == n4.stream_id

    set_bucket_versioning(world.db, bucket, enabled=False)
    nm = marker(world, bucket, "k")  # suspended delete: a null marker replaces the null
    assert nm.version_id == "null"
    assert listed(list_object_versions(world.db, bucket)) == expect("k", [nm, v5, v3, v2])


def test_pending_uploads_are_not_listed(world: World) -> None:
    bucket = world.bucket("versioned", Versioning.ENABLED)
    a1 = world.put(bucket, "a")
    begin_object(world.db, world.loc(bucket, "a"))
    begin_object(world.db, world.loc(bucket, "b"))
    begin_object(world.db, world.loc(bucket, "c/d"))
    assert listed(list_object_versions(world.db, bucket)) == expect("a", [a1])
    result = list_object_versions(world.db, bucket, delimiter="/")
    assert (listed(result), result.common_prefixes) == (expect("a", [a1]), [])


def test_deleted_version_is_gone_and_is_latest_moves_down(world: World) -> None:
    bucket = world.bucket("versioned", Versioning.ENABLED)
    v1 = world.put(bucket, "k")
    v2 = world.put(bucket, "k")
    delete_object_version(world.db, world.loc(bucket, "k"), v2.version_id)
    assert listed(list_object_versions(world.db, bucket)) == expect("k", [v1])


# --- prefix and delimiter -------------------------------------------------------------------


def test_prefix_and_delimiter_roll_up_versions_and_markers(world: World) -> None:
    bucket = world.bucket("versioned", Versioning.ENABLED)
    a1 = world.put(bucket, "a")
    d1_1 = world.put(bucket, "d/1")
    d1_2 = world.put(bucket, "d/1")
    d2_1 = world.put(bucket, "d/2")
    d2_m = marker(world, bucket, "d/2")
    e_m = marker(world, bucket, "e/x")  # only a delete marker under e/
    de_1 = world.put(bucket, "d/e/1")
    f1 = world.put(bucket, "f")

    result = list_object_versions(world.db, bucket, delimiter="/")
    assert listed(result) == [*expect("a", [a1]), *expect("f", [f1])]
    assert result.common_prefixes == ["d/", "e/"]  # markers roll up too

    result = list_object_versions(world.db, bucket, prefix="d/")
    assert listed(result) == [
        *expect("d/1", [d1_2, d1_1]),
        *expect("d/2", [d2_m, d2_1]),
        *expect("d/e/1", [de_1]),
    ]
    assert result.common_prefixes == []

    result = list_object_versions(world.db, bucket, prefix="d/", delimiter="/")
    assert listed(result) == [*expect("d/1", [d1_2, d1_1]), *expect("d/2", [d2_m, d2_1])]
    assert result.common_prefixes == ["d/e/"]

    result = list_object_versions(world.db, bucket, prefix="e/", delimiter="/")
    assert listed(result) == expect("e/x", [e_m])

    result = list_object_versions(world.db, bucket, delimiter="/1")
    assert listed(result) == [
        *expect("a", [a1]),
        *expect("d/2", [d2_m, d2_1]),
        *expect("e/x", [e_m]),
        *expect("f", [f1]),
    ]
    assert result.common_prefixes == ["d/1", "d/e/1"]


# --- markers and paging ---------------------------------------------------------------------


def test_key_marker_skips_every_version_of_that_key(world: World) -> None:
    bucket = world.bucket("versioned", Versioning.ENABLED)
    world.put(bucket, "a")
    world.put(bucket, "a")
    b1 = world.put(bucket, "b")
    c1 = world.put(bucket, "c/1")
    c2 = world.put(bucket, "c/2")
    d1 = world.put(bucket, "d")
    result = list_object_versions(world.db, bucket, key_marker="a")
    assert listed(result) == [
        *expect("b", [b1]),
        *expect("c/1", [c1]),
        *expect("c/2", [c2]),
        *expect("d", [d1]),
    ]
    # a key marker that is a common prefix skips the whole prefix
    result = list_object_versions(world.db, bucket, key_marker="c/", delimiter="/")
    assert (listed(result), result.common_prefixes) == (expect("d", [d1]), [])


def test_version_id_marker_resumes_inside_a_key(world: World) -> None:
    bucket = world.bucket("versioned", Versioning.ENABLED)
    a1 = world.put(bucket, "a")
    a2 = world.put(bucket, "a")
    a3 = world.put(bucket, "a")
    b1 = world.put(bucket, "b")
    result = list_object_versions(world.db, bucket, key_marker="a", version_id_marker=a3.version_id)
    assert listed(result) == [
        ("a", a2.version_id, False, False),
        ("a", a1.version_id, False, False),
        *expect("b", [b1]),
    ]
    result = list_object_versions(world.db, bucket, key_marker="a", version_id_marker=a1.version_id)
    assert listed(result) == expect("b", [b1])


def test_page_boundary_inside_a_key_keeps_is_latest(world: World) -> None:
    bucket = world.bucket("versioned", Versioning.ENABLED)
    a1 = world.put(bucket, "a")
    a2 = world.put(bucket, "a")
    am = marker(world, bucket, "a")
    b1 = world.put(bucket, "b")
    b2 = world.put(bucket, "b")

    first = list_object_versions(world.db, bucket, max_keys=2)
    assert listed(first) == expect("a", [am, a2])
    assert (first.is_truncated, first.next_key_marker, first.next_version_id_marker) == (
        True,
        "a",
        a2.version_id,
    )
    second = list_object_versions(
        world.db,
        bucket,
        max_keys=2,
        key_marker=first.next_key_marker,
        version_id_marker=first.next_version_id_marker,
    )
    assert listed(second) == [("a", a1.version_id, False, False), *expect("b", [b2])]
    assert (second.is_truncated, second.next_key_marker, second.next_version_id_marker) == (
        True,
        "b",
        b2.version_id,
    )
    third = list_object_versions(
        world.db,
        bucket,
        max_keys=2,
        key_marker=second.next_key_marker,
        version_id_marker=second.next_version_id_marker,
    )
    assert listed(third) == [("b", b1.version_id, False, False)]
    assert (third.is_truncated, third.next_key_marker, third.next_version_id_marker) == (
        False,
        "",
        "",
    )


def test_paging_resumes_from_a_null_version_marker(world: World) -> None:
    bucket = world.bucket()
    world.put(bucket, "k")
    set_bucket_versioning(world.db, bucket, enabled=True)
    v2 = world.put(bucket, "k")
    set_bucket_versioning(world.db, bucket, enabled=False)
    n3 = world.put(bucket, "k")  # replaces the first null version
    set_bucket_versioning(world.db, bucket, enabled=True)
    v4 = world.put(bucket, "k")
    z1 = world.put(bucket, "z")
    whole = expect("k", [v4, n3, v2]) + expect("z", [z1])
    assert listed(list_object_versions(world.db, bucket)) == whole

    first = list_object_versions(world.db, bucket, max_keys=2)
    assert listed(first) == whole[:2]
    assert (first.next_key_marker, first.next_version_id_marker) == ("k", "null")
    second = list_object_versions(
        world.db, bucket, key_marker="k", version_id_marker="null", max_keys=2
    )
    assert listed(second) == whole[2:]
    assert second.is_truncated is False


@pytest.mark.parametrize("max_keys", [1, 2, 3, 4, 5, 7, 14, 15, 16])
def test_paging_yields_the_unpaged_sequence(world: World, max_keys: int) -> None:
    bucket = world.bucket()
    world.put(bucket, "n/old")  # null version, below the versioned ones
    set_bucket_versioning(world.db, bucket, enabled=True)
    world.put(bucket, "n/old")
    for key in ("a", "a", "a", "b/1", "b/2", "b/2", "c", "é", "é"):
        world.put(bucket, key)
    marker(world, bucket, "a")
    marker(world, bucket, "b/1")
    marker(world, bucket, "d")
    world.put(bucket, "c")

    whole = list_object_versions(world.db, bucket)
    assert len(whole.versions) == 15
    entries, prefixes, pages = page_through(world, bucket, max_keys)
    assert entries == listed(whole)
    assert prefixes == []
    # a page that ends exactly at the last entry is not truncated: no empty last page
    assert len(pages) == -(-15 // max_keys)

    whole = list_object_versions(world.db, bucket, delimiter="/")
    assert whole.common_prefixes == ["b/", "n/"]
    entries, prefixes, _ = page_through(world, bucket, max_keys, delimiter="/")
    assert entries == listed(whole)
    assert prefixes == whole.common_prefixes


def test_max_keys_zero_returns_nothing(world: World) -> None:
    bucket = world.bucket("versioned", Versioning.ENABLED)
    world.put(bucket, "a")
    assert list_object_versions(world.db, bucket, max_keys=0) == ListVersionsResult(
        [], [], False, "", ""
    )


# --- errors ---------------------------------------------------------------------------------


def test_version_id_marker_without_key_marker(world: World) -> None:
    bucket = world.bucket("versioned", Versioning.ENABLED)
    v1 = world.put(bucket, "a")
    for version_id in (v1.version_id, "null"):
        with pytest.raises(InvalidArgument) as info:
            list_object_versions(world.db, bucket, version_id_marker=version_id)
        assert type(info.value) is InvalidArgument
        assert info.value.code == "InvalidArgument"
        assert "key marker" in info.value.message


@pytest.mark.parametrize(
    "version_id",
    ["zz", "abcd", "0" * 32, "g" * 32, "Null", "ff" * 8 + "00" * 8, "00" * 17],
)
def test_malformed_version_id_marker(world: World, version_id: str) -> None:
    bucket = world.bucket("versioned", Versioning.ENABLED)
    world.put(bucket, "a")
    with pytest.raises(InvalidVersionId) as info:
        list_object_versions(world.db, bucket, key_marker="a", version_id_marker=version_id)
    assert info.value.code == "InvalidArgument"


def test_unknown_bucket(world: World) -> None:
    with pytest.raises(BucketNotFound):
        list_object_versions(world.db, BucketLocation(world.project.id, "missing"))


def test_negative_max_keys(world: World) -> None:
    bucket = world.bucket()
    with pytest.raises(InvalidArgument):
        list_object_versions(world.db, bucket, max_keys=-1)


# --- property: paging == one listing == model -----------------------------------------------


_bucket_numbers = itertools.count()
_key = st.text(alphabet="ab/", min_size=1, max_size=4)
_ops = st.lists(st.sampled_from(["put", "del"]), min_size=1, max_size=3)
History = dict[str, tuple[bool, list[str]]]


@st.composite
def version_cases(draw: st.DrawFn) -> tuple[History, str, str, int]:
    """Keys, each with or without a null version written before versioning was enabled and
    then puts and deletes; a delimiter, a prefix (often one of a key's) and a page size."""
    history = draw(st.dictionaries(_key, st.tuples(st.booleans(), _ops), max_size=6))
    starts = sorted({""} | {k[:i] for k in history for i in range(1, len(k) + 1)})
    prefix = draw(st.sampled_from(starts) | st.text(alphabet="ab/", max_size=2))
    delimiter = draw(st.sampled_from(["", "/"]))
    page_size = draw(st.integers(min_value=1, max_value=4))
    return history, prefix, delimiter, page_size


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(case=version_cases())
def test_version_paging_equals_one_listing_equals_model(
    world: World, case: tuple[History, str, str, int]
) -> None:
    history, prefix, delimiter, page_size = case
    bucket = world.bucket(f"prop-{next(_bucket_numbers)}")
    rows: dict[str, list[Object]] = {key: [] for key in history}  # oldest first
    for key, (null_first, _) in history.items():
        if null_first:
            rows[key].append(world.put(bucket, key))
    set_bucket_versioning(world.db, bucket, enabled=True)
    for key, (_, ops) in history.items():
        for op in ops:
            rows[key].append(world.put(bucket, key) if op == "put" else marker(world, bucket, key))

    # model: keys in byte order; a key under a common prefix contributes the prefix once
    expected: list[tuple[str, object]] = []
    for key in sorted(rows, key=lambda k: k.encode("utf-8")):
        if not key.startswith(prefix):
            continue
        rest = key[len(prefix) :]
        if delimiter and delimiter in rest:
            common = prefix + rest[: rest.index(delimiter) + len(delimiter)]
            if ("prefix", common) not in expected:
                expected.append(("prefix", common))
        else:
            expected += [("version", e) for e in expect(key, reversed(rows[key]))]
    expected_versions = [e for kind, e in expected if kind == "version"]
    expected_prefixes = [p for kind, p in expected if kind == "prefix"]

    whole = list_object_versions(world.db, bucket, prefix=prefix, delimiter=delimiter)
    assert listed(whole) == expected_versions
    assert whole.common_prefixes == expected_prefixes
    assert whole.is_truncated is False

    entries, prefixes, pages = page_through(
        world, bucket, page_size, prefix=prefix, delimiter=delimiter
    )
    assert entries == expected_versions
    assert prefixes == expected_prefixes
    total = len(expected)
    assert len(pages) == max(1, -(-total // page_size))


def test_resumes_after_a_marker_version_deleted_between_pages(world: World) -> None:
    """The version ID names a position even when its version is gone: paging must not skip
    the versions below it."""
    bucket = world.bucket("resume-deleted", Versioning.ENABLED)
    versions = [world.put(bucket, "k") for _ in range(5)]
    page = list_object_versions(world.db, bucket, max_keys=2)
    assert [e.object.version_id for e in page.versions] == [
        versions[4].version_id,
        versions[3].version_id,
    ]
    delete_object_version(world.db, world.loc(bucket, "k"), page.next_version_id_marker)
    rest = list_object_versions(
        world.db,
        bucket,
        key_marker=page.next_key_marker,
        version_id_marker=page.next_version_id_marker,
    )
    assert [e.object.version_id for e in rest.versions] == [
        v.version_id for v in reversed(versions[:3])
    ]
    assert not any(e.is_latest for e in rest.versions)
