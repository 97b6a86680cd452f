"""Alembic environment: runs on the connection `ripple.metabase.migrate` hands it."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from ripple.metabase.migrate import all_metadata

connection = context.config.attributes.get("connection")
if not isinstance(connection, Connection):
    raise RuntimeError("run migrations with `ripple db upgrade`, not the alembic command")

context.configure(
    connection=connection,
    target_metadata=all_metadata(),
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
