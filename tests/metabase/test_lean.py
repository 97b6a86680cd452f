"""Statements run on the DB-API cursor (`ripple.metabase.lean`): the same values as through
SQLAlchemy, its errors, and its statement events."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from sqlalchemy import exc

from ripple.metabase import Metabase
from ripple.metabase.lean import Lean
from ripple.metabase.schema import projects
from tests.metabase.steps import statements

_INSERT = Lean(sa.insert(projects))
_BY_ID = Lean(sa.select(projects).where(projects.c.id == sa.bindparam("id")).limit(1))


def test_values_go_and_come_back_as_sqlalchemy_converts_them(db: Metabase) -> None:
    row = {
        "id": uuid.uuid4(),
        "public_id": uuid.uuid4(),
        "name": "p",
        "created_at": datetime(2026, 11, 27, 12, 30, 1, 123456, tzinfo=UTC),
    }
    with db.write() as conn:
        assert _INSERT.run(conn, row) == 1
    with db.read() as conn:
        assert _BY_ID.rows(conn, {"id": row["id"]}) == [row]
        through_sqlalchemy = conn.execute(sa.select(projects).where(projects.c.id == row["id"]))
        assert [dict(r._mapping) for r in through_sqlalchemy] == [row]
        assert _BY_ID.rows(conn, {"id": uuid.uuid4()}) == []


def test_a_driver_error_is_sqlalchemys(db: Metabase) -> None:
    row = {"id": uuid.uuid4(), "public_id": uuid.uuid4(), "name": "p", "created_at": db.now()}
    with db.write() as conn:
        _INSERT.run(conn, row)
    with pytest.raises(exc.IntegrityError), db.write() as conn:
        _INSERT.run(conn, row)


def test_statement_listeners_see_it(db: Metabase) -> None:
    with statements(db) as sent, db.read() as conn:
        _BY_ID.rows(conn, {"id": uuid.uuid4()})
    assert any(s.lstrip().upper().startswith("SELECT") and "projects" in s for s in sent), sent
