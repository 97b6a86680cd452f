"""The metabase's fixtures: a `World` over the test's metabase, and a change stream that
keeps the system transactions lifecycle runs make."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ripple.changestream.ddl import create_change_stream, drop_change_stream
from ripple.metabase import Metabase
from ripple.metabase.schema import objects
from tests.changestream.conftest import Eventing
from tests.metabase.steps import World


@pytest.fixture
def world(db: Metabase) -> World:
    return World(db)


@pytest.fixture
def stream(world: World) -> Iterator[str]:
    """A change stream that keeps system transactions (no `exclude_ttl_deletes`), with
    eventing on for the `bucket` bucket; dropped afterwards."""
    Eventing(world.db).enable(world.project.id, "bucket")
    with world.db.write() as conn:
        create_change_stream(
            conn,
            "lifecycle",
            objects,
            ["status"],
            {"exclude_ttl_deletes": False, "allow_txn_exclusion": True},
            partitions=2,
        )
    world.db.changestreams.reload()
    yield "lifecycle"
    with world.db.write() as conn:
        drop_change_stream(conn, "lifecycle")
    world.db.changestreams.reload()
