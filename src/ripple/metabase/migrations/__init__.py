"""The metabase's Alembic migration steps (`versions/`), run by `ripple.metabase.migrate`.

A step is frozen once written: it states the table shapes and the SQL it needs as of its own
revision, inline or in a module of `frozen/` (which is never edited either), and imports
nothing else of ripple's, whose schemas and code move on; so a fresh database goes through
exactly what an old one did. A schema change is a new step, never an edit to an old one; the
models follow it, and the migrations' schema check compares a migrated database with them.
"""
