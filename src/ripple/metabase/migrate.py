"""Schema migrations with Alembic: `ripple db upgrade` and the revision in force."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from ripple.metabase import schema
from ripple.metabase.db import Metabase

_SCRIPTS = "ripple.metabase:migrations"
_VERSIONS = Path(__file__).parent / "migrations" / "versions"


def _config(extra_versions: Sequence[str | Path] = ()) -> Config:
    config = Config()
    config.set_main_option("script_location", _SCRIPTS)
    if extra_versions:  # more revision directories, e.g. a test's later migration steps
        config.set_main_option("path_separator", "os")
        locations = [str(_VERSIONS), *(str(p) for p in extra_versions)]
        config.set_main_option("version_locations", os.pathsep.join(locations))
    return config


def upgrade(
    db: Metabase, revision: str = "head", *, extra_versions: Sequence[str | Path] = ()
) -> None:
    """Bring the schema to `revision` (default: the newest)."""
    config = _config(extra_versions)
    with db.write() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
    db.changestreams.reload()  # the migration may have changed a change stream


def current_revision(db: Metabase) -> str | None:
    with db.read() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str | None:
    return ScriptDirectory.from_config(_config()).get_current_head()


def all_metadata() -> sa.MetaData:
    """Every table the migrations create: the metabase's, the change stream's, the
    pipeline's, the pull subscriptions', the access keys' and the eventing configuration's
    (the migrations' schema check). Gathered here, not in `metabase.schema`: the other
    packages' schemas import that one, which imports none of them."""
    from ripple.changestream.schema import metadata as changestream_metadata
    from ripple.identity.schema import metadata as identity_metadata
    from ripple.notifications.schema import metadata as notifications_metadata
    from ripple.pipeline.schema import metadata as pipeline_metadata
    from ripple.subscriptions.schema import metadata as subscriptions_metadata

    merged = sa.MetaData()
    for source in (
        schema.metadata,
        changestream_metadata,
        pipeline_metadata,
        subscriptions_metadata,
        identity_metadata,
        notifications_metadata,
    ):
        for table in source.tables.values():
            table.to_metadata(merged)
    return merged
