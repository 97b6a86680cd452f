"""Projects: the tenant that owns buckets. The private id stays inside ripple; the public
id is what S3 events show as the bucket owner."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from ripple.metabase.db import Metabase
from ripple.metabase.errors import ProjectNotFound
from ripple.metabase.schema import projects


@dataclass(frozen=True)
class Project:
    id: uuid.UUID
    public_id: uuid.UUID
    name: str
    created_at: datetime


def create_project(db: Metabase, name: str, *, project_id: uuid.UUID | None = None) -> Project:
    project = Project(project_id or uuid.uuid4(), uuid.uuid4(), name, db.now())
    with db.write() as conn:
        conn.execute(
            sa.insert(projects).values(
                id=project.id,
                public_id=project.public_id,
                name=project.name,
                created_at=project.created_at,
            )
        )
    return project


def get_project(db: Metabase, project_id: uuid.UUID) -> Project:
    with db.read() as conn:
        row = conn.execute(sa.select(projects).where(projects.c.id == project_id)).first()
    if row is None:
        raise ProjectNotFound(f"project {project_id} does not exist")
    return Project(row.id, row.public_id, row.name, row.created_at)


def list_projects(db: Metabase) -> list[Project]:
    with db.read() as conn:
        rows = conn.execute(sa.select(projects).order_by(projects.c.created_at)).all()
    return [Project(r.id, r.public_id, r.name, r.created_at) for r in rows]


class ProjectOwners:
    """Private project id -> public id, as events need it for the bucket owner; cached,
    since a project's ids never change."""

    def __init__(self, db: Metabase) -> None:
        self.db = db
        self._public: dict[str, str] = {}

    def public_id(self, project_id: str) -> str:
        if project_id not in self._public:
            self._public[project_id] = str(get_project(self.db, uuid.UUID(project_id)).public_id)
        return self._public[project_id]
