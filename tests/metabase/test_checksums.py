"""Additional checksums in the metabase (migration 0015): what a put, a multipart upload's
begin and commit, and a copy keep in `objects.checksum`."""

from __future__ import annotations

import uuid

from ripple.metabase import Checksum, commit_object, copy_object, get_object
from ripple.metabase.put_object import put_object
from ripple.metabase.uploads import begin_upload, completed_upload, get_upload
from tests.metabase.steps import World

SHA256 = Checksum("SHA256", "FULL_OBJECT", "arcu6553sHVAiX4MjW0j7I7vD4w6R+Gz9Ok0Q9lTa+0=")


def test_a_put_keeps_its_checksum(world: World) -> None:
    bucket = world.bucket()
    loc = world.loc(bucket, "k")
    put = put_object(
        world.db, loc, stream_id=uuid.uuid4(), size=1, etag="e", inline_data=b"A", checksum=SHA256
    )
    assert put.object.checksum == SHA256
    assert get_object(world.db, loc).checksum == SHA256
    other = world.loc(bucket, "none")
    put_object(world.db, other, stream_id=uuid.uuid4(), size=1, etag="e", inline_data=b"A")
    assert get_object(world.db, other).checksum is None


def test_an_upload_declares_its_algorithm_and_the_commit_stores_the_value(world: World) -> None:
    bucket = world.bucket()
    loc = world.loc(bucket, "mp")
    declared = Checksum("CRC32", "COMPOSITE")
    pending = begin_upload(world.db, loc, checksum=declared)
    assert get_upload(world.db, loc, pending.stream_id).checksum == declared
    final = Checksum("CRC32", "COMPOSITE", "AAAAAA==", ("AAAAAQ==", "AAAAAg=="))
    world.tick()
    commit_object(world.db, pending, size=2, etag="x-2", part_sizes=[1, 1], checksum=final)
    stored = get_object(world.db, loc)
    assert stored.checksum == final
    assert completed_upload(world.db, loc, pending.stream_id).checksum == final


def test_a_commit_without_a_checksum_keeps_none_of_the_declaration(world: World) -> None:
    loc = world.loc(world.bucket(), "mp")
    pending = begin_upload(world.db, loc, checksum=Checksum("SHA1", "COMPOSITE"))
    world.tick()
    commit_object(world.db, pending, size=0, etag="x-1")
    assert get_object(world.db, loc).checksum is None


def test_a_copy_keeps_the_sources_checksum_unless_given_another(world: World) -> None:
    bucket = world.bucket()
    source = world.loc(bucket, "src")
    put_object(
        world.db,
        source,
        stream_id=uuid.uuid4(),
        size=1,
        etag="e",
        inline_data=b"A",
        checksum=SHA256,
    )
    world.tick()
    kept = copy_object(world.db, source, world.loc(bucket, "kept"))
    assert kept.object.checksum == SHA256
    other = Checksum("CRC32", "FULL_OBJECT", "AAAAAA==")
    world.tick()
    changed = copy_object(world.db, source, world.loc(bucket, "changed"), checksum=other)
    assert get_object(world.db, changed.object.location).checksum == other
