"""Scenario steps for metabase tests, after Storj's `metabasetest`: set up a world, run an
operation, and verify the whole objects table afterwards (`Verify`), or that a refused
operation changed nothing (`unchanged`)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from ripple.metabase import (
    BucketLocation,
    Metabase,
    Object,
    ObjectLocation,
    Retention,
    RetentionMode,
    Status,
    Versioning,
    commit_object,
    create_bucket,
    create_project,
    set_bucket_versioning,
)
from ripple.metabase.errors import MetabaseError
from ripple.metabase.rows import object_from_row
from ripple.metabase.schema import objects
from tests.metabase.objects import begin_object, commit_inline_object

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class World:
    """A project in an empty metabase, with a clock the test moves."""

    def __init__(self, db: Metabase) -> None:
        self.db = db
        self.now = T0
        db.clock = lambda: self.now
        self.project = create_project(db, "test-project")

    def tick(self, delta: timedelta = timedelta(seconds=1)) -> datetime:
        self.now += delta
        return self.now

    def bucket(
        self,
        name: str = "bucket",
        versioning: Versioning = Versioning.UNVERSIONED,
        *,
        lock: bool = False,
    ) -> BucketLocation:
        loc = BucketLocation(self.project.id, name)
        create_bucket(self.db, loc, object_lock_enabled=lock)
        if versioning is Versioning.ENABLED and not lock:
            set_bucket_versioning(self.db, loc, enabled=True)
        elif versioning is Versioning.SUSPENDED:
            set_bucket_versioning(self.db, loc, enabled=True)
            set_bucket_versioning(self.db, loc, enabled=False)
        return loc

    def put(
        self,
        bucket: BucketLocation,
        key: str,
        data: bytes = b"hello",
        *,
        retention: Retention | None = None,
        legal_hold: bool = False,
    ) -> Object:
        """An object committed inline; the clock moves on one second."""
        self.tick()
        return commit_inline_object(
            self.db,
            ObjectLocation(bucket.project_id, bucket.bucket_name, key),
            data,
            etag=hashlib.md5(data).hexdigest(),
            retention=retention,
            legal_hold=legal_hold,
        ).object

    def upload(self, bucket: BucketLocation, key: str, size: int = 1024) -> Object:
        """An object begun and committed as a pending upload is."""
        self.tick()
        loc = ObjectLocation(bucket.project_id, bucket.bucket_name, key)
        pending = begin_object(self.db, loc)
        return commit_object(self.db, pending, size=size, etag="0" * 32).object

    def loc(self, bucket: BucketLocation, key: str) -> ObjectLocation:
        return ObjectLocation(bucket.project_id, bucket.bucket_name, key)

    def governance(self, days: int = 1) -> Retention:
        return Retention(RetentionMode.GOVERNANCE, self.now + timedelta(days=days))

    def compliance(self, days: int = 1) -> Retention:
        return Retention(RetentionMode.COMPLIANCE, self.now + timedelta(days=days))

    def rows(self) -> list[Object]:
        """Every row of the objects table: key ascending, version descending."""
        with self.db.read() as conn:
            result = conn.execute(
                sa.select(objects).order_by(
                    objects.c.bucket_name, objects.c.object_key, objects.c.version.desc()
                )
            )
            return [object_from_row(r) for r in result]


@dataclass(frozen=True)
class Row:
    """What `Verify` compares of a row: where it is, what it is, which version."""

    key: str
    status: Status
    version_id: str = ""  # "" matches any
    bucket: str = "bucket"


@dataclass
class Verify:
    rows: list[Row] = field(default_factory=list)

    def check(self, world: World) -> None:
        actual = world.rows()
        assert [(r.bucket_name, r.object_key, r.status) for r in actual] == [
            (r.bucket, r.key, r.status) for r in self.rows
        ]
        for want, got in zip(self.rows, actual, strict=True):
            if want.version_id:
                assert got.version_id == want.version_id, (want, got)


@contextmanager
def unchanged(world: World, error: type[MetabaseError], code: str = "") -> Iterator[None]:
    """The block raises `error` (with S3 code `code`) and leaves the objects table as it was."""
    before = world.rows()
    with pytest.raises(error) as info:
        yield
    if code:
        assert info.value.code == code
    assert world.rows() == before


@contextmanager
def statements(db: Metabase) -> Iterator[list[str]]:
    """The SQL statements sent to the database inside the block."""
    seen: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        seen.append(statement)

    sa.event.listen(db.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", record)
