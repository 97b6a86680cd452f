"""Users and their access keys in the metabase: create, list, revoke.

A user is a project that has access keys; its name is the project's name, unique among
users. Creating a user writes the project and its first key in one transaction. Secrets are
sealed with the data directory's master key before they are written; before sealing, the
master key is checked against a secret already stored, so a wrong data directory is an
error instead of keys that no gateway can open.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ripple.identity.errors import (
    BadInput,
    KeyExists,
    MasterKeyError,
    SealError,
    UnknownKey,
    UnknownUser,
    UserExists,
)
from ripple.identity.keys import (
    AccessKey,
    check_access_key_id,
    check_restriction,
    check_secret_key,
    check_user_name,
    denied_column,
    denied_of,
    new_access_key_id,
    new_secret_key,
)
from ripple.identity.schema import access_keys
from ripple.identity.sealing import MasterKey
from ripple.metabase.db import Metabase
from ripple.metabase.projects import Project
from ripple.metabase.schema import projects

# PostgreSQL advisory lock that serializes user creation, so two concurrent creations of
# one name cannot both succeed (SQLite writers are serialized anyway).
_CREATE_USER_LOCK = 0x72_6970_706C_6575  # "ripple u"


@dataclass(frozen=True)
class User:
    name: str
    project_id: uuid.UUID  # private: never shown
    project_public_id: uuid.UUID
    created_at: datetime
    active_keys: int


def create_user(
    db: Metabase,
    data_dir: Path,
    name: str,
    *,
    access_key_id: str | None = None,
    secret_key: str | None = None,
) -> tuple[Project, AccessKey, str]:
    """A new user: a project named `name` and its first, unrestricted access key. Returns
    the project, the key and its secret (given, or made here)."""
    check_user_name(name)
    if (access_key_id is None) != (secret_key is None):
        raise BadInput("give both the access key and the secret key, or neither")
    key_id = new_access_key_id() if access_key_id is None else check_access_key_id(access_key_id)
    secret = new_secret_key() if secret_key is None else check_secret_key(secret_key)
    with db.write() as conn:
        if db.dialect == "postgresql":
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_CREATE_USER_LOCK)))
        if _user_row(conn, name) is not None:
            raise UserExists(name)
        master = _master_key(conn, data_dir)
        project = Project(uuid.uuid4(), uuid.uuid4(), name, db.now())
        conn.execute(
            sa.insert(projects).values(
                id=project.id,
                public_id=project.public_id,
                name=project.name,
                created_at=project.created_at,
            )
        )
        key = AccessKey(key_id, project.id, project.public_id, name)
        _insert_key(conn, master, key, secret, project.created_at)
    return project, key, secret


def create_key(
    db: Metabase,
    data_dir: Path,
    user: str,
    *,
    bucket: str | None = None,
    prefix: str | None = None,
    denied: Iterable[str] = (),
    allow_bypass_governance: bool = False,
) -> tuple[AccessKey, str]:
    """Another access key for `user`, restricted as asked. Returns the key and its secret."""
    bucket, prefix, actions = check_restriction(bucket, prefix, denied)
    secret = new_secret_key()
    with db.write() as conn:
        row = _user_row(conn, user)
        if row is None:
            raise UnknownUser(user)
        master = _master_key(conn, data_dir)
        key = AccessKey(
            new_access_key_id(),
            row.id,
            row.public_id,
            row.name,
            bucket=bucket,
            prefix=prefix,
            denied=actions,
            allow_bypass_governance=allow_bypass_governance,
        )
        _insert_key(conn, master, key, secret, db.now())
    return key, secret


def list_users(db: Metabase) -> list[User]:
    """Every user, by name, with how many keys it has that are not revoked."""
    active = sa.func.sum(sa.case((access_keys.c.revoked_at.is_(None), 1), else_=0))
    query = (
        sa.select(
            projects.c.name,
            projects.c.id,
            projects.c.public_id,
            projects.c.created_at,
            active.label("active_keys"),
        )
        .join(access_keys, access_keys.c.project_id == projects.c.id)
        .group_by(projects.c.id, projects.c.name, projects.c.public_id, projects.c.created_at)
        .order_by(projects.c.name, projects.c.created_at)
    )
    with db.read() as conn:
        rows = conn.execute(query).all()
    return [User(r.name, r.id, r.public_id, r.created_at, int(r.active_keys)) for r in rows]


def list_keys(db: Metabase, user: str) -> list[AccessKey]:
    """The user's keys that are not revoked, oldest first."""
    with db.read() as conn:
        row = _user_row(conn, user)
        if row is None:
            raise UnknownUser(user)
        keys = conn.execute(
            sa.select(access_keys)
            .where(access_keys.c.project_id == row.id, access_keys.c.revoked_at.is_(None))
            .order_by(access_keys.c.created_at, access_keys.c.access_key_id)
        ).all()
    return [_access_key(k, row.public_id, row.name) for k in keys]


def revoke_key(db: Metabase, access_key_id: str) -> None:
    """Revoke the key (again: nothing changes). Gateways stop accepting it once their
    cache of it expires (`Keyring` ttl)."""
    with db.write() as conn:
        exists = conn.execute(
            sa.select(access_keys.c.revoked_at).where(access_keys.c.access_key_id == access_key_id)
        ).first()
        if exists is None:
            raise UnknownKey(access_key_id)
        conn.execute(
            sa.update(access_keys)
            .where(
                access_keys.c.access_key_id == access_key_id,
                access_keys.c.revoked_at.is_(None),
            )
            .values(revoked_at=db.now())
        )


def load_key(conn: Connection, access_key_id: str) -> tuple[AccessKey, bytes] | None:
    """The key, not revoked, and its sealed secret; None if there is none."""
    row = conn.execute(
        sa.select(access_keys, projects.c.public_id, projects.c.name)
        .join(projects, projects.c.id == access_keys.c.project_id)
        .where(access_keys.c.access_key_id == access_key_id, access_keys.c.revoked_at.is_(None))
    ).first()
    if row is None:
        return None
    return _access_key(row, row.public_id, row.name), bytes(row.sealed_secret)


def _user_row(conn: Connection, name: str) -> Any:
    """The project of the user `name` (a project with access keys), or None."""
    has_keys = sa.exists().where(access_keys.c.project_id == projects.c.id)
    return conn.execute(
        sa.select(projects)
        .where(projects.c.name == name, has_keys)
        .order_by(projects.c.created_at)
        .limit(1)
    ).first()


def _master_key(conn: Connection, data_dir: Path) -> MasterKey:
    """The master key to seal a new secret with: created if no key exists yet, else the one
    that opens the stored secrets."""
    sample = conn.execute(
        sa.select(access_keys.c.access_key_id, access_keys.c.sealed_secret)
        .where(access_keys.c.revoked_at.is_(None))
        .limit(1)
    ).first()
    stored = sample is not None or (
        conn.execute(sa.select(access_keys.c.access_key_id).limit(1)).first() is not None
    )
    master = MasterKey.load(data_dir, create=not stored)
    if sample is not None:
        try:
            master.open(sample.access_key_id, bytes(sample.sealed_secret))
        except SealError:
            raise MasterKeyError(
                f"master key {master.path} does not open the secrets already in the "
                "metabase: is data-dir (RIPPLE_DATA_DIR) the one they were created with?"
            ) from None
    return master


def _insert_key(
    conn: Connection, master: MasterKey, key: AccessKey, secret: str, now: datetime
) -> None:
    """Insert the key with its sealed secret; `KeyExists` (the transaction is then rolled
    back) if the id is taken."""
    try:
        conn.execute(
            sa.insert(access_keys).values(
                access_key_id=key.access_key_id,
                project_id=key.project_id,
                sealed_secret=master.seal(key.access_key_id, secret),
                bucket=key.bucket,
                prefix=key.prefix,
                denied=denied_column(key.denied),
                allow_bypass_governance=key.allow_bypass_governance,
                created_at=now,
            )
        )
    except sa.exc.IntegrityError:
        raise KeyExists(key.access_key_id) from None


def _access_key(row: Any, public_id: uuid.UUID, user: str) -> AccessKey:
    return AccessKey(
        row.access_key_id,
        row.project_id,
        public_id,
        user,
        bucket=row.bucket,
        prefix=row.prefix,
        denied=denied_of(row.denied),
        allow_bypass_governance=bool(row.allow_bypass_governance),
    )
