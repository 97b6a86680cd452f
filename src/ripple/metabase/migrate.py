"""Schema migrations with Alembic: `ripple db upgrade` and the revision in force."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from ripple.metabase.db import Metabase

_SCRIPTS = "ripple.metabase:migrations"


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", _SCRIPTS)
    return config


def upgrade(db: Metabase, revision: str = "head") -> None:
    """Bring the schema to `revision` (default: the newest)."""
    config = _config()
    with db.write() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


def current_revision(db: Metabase) -> str | None:
    with db.read() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str | None:
    return ScriptDirectory.from_config(_config()).get_current_head()
