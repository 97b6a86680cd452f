"""`ripple journal enable | disable | status`: opt a bucket into the journal, or out of it,
from the command line, as `PUT` / `DELETE /bucket?journal` do over the S3 API; `inventory`
(a journaled bucket's live inventory now) and `expire` (the record expiration now), as
`ripple up` makes them every journal.interval (`ripple.cli.journal_upkeep`); and `query`,
Spark SQL over the journal and the inventories (`ripple.cli.journal_query`).
docs/journal.md."""

from __future__ import annotations

import getpass
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import click
import sqlalchemy as sa
from rich.table import Table

from ripple.cli.common import console, open_metabase, reason_of, safe_url, settings_of
from ripple.metabase import BucketLocation, Metabase
from ripple.metabase.buckets import bucket_owner
from ripple.notifications.errors import NotificationError
from ripple.notifications.journal import (
    MAX_EXPIRATION_DAYS,
    MIN_EXPIRATION_DAYS,
    Journal,
    JournalStore,
    journals,
)
from ripple.numbers import NumberError, whole_number

EPILOG = (
    "The pipeline writes every event of a journaled bucket, from the moment its journal is "
    "enabled, into the journal table under the journal.location setting. Running gateways "
    "see a change within a second, the pipeline at its next batch. See docs/journal.md."
)


@click.group(epilog=EPILOG)
def journal() -> None:
    """The bucket journal: every event of a bucket's objects kept in a table.

    A bucket opts in with `ripple journal enable BUCKET` (or `PUT /BUCKET?journal` through
    the gateway); `--expiration-days` says how long its rows are kept. `ripple up` drops
    the expired rows and writes the journaled buckets' live inventories every
    journal.interval seconds; `expire` and `inventory` do it now."""


@contextmanager
def _metabase(ctx: click.Context) -> Iterator[Metabase]:
    """The configured metabase; its refusals and database errors as one-line messages."""
    db = open_metabase(settings_of(ctx))
    try:
        yield db
    except NotificationError as e:
        raise click.ClickException(e.message) from e
    except sa.exc.DBAPIError as e:
        raise click.ClickException(
            f"cannot use the journal configurations in the metabase at {safe_url(db)}: "
            f"{reason_of(e)}. Is it running, and migrated (`ripple db upgrade`)?"
        ) from e
    finally:
        db.dispose()


def _project_of(db: Metabase, bucket: str) -> uuid.UUID:
    project = bucket_owner(db, bucket)
    if project is None:
        raise click.ClickException(f"no bucket named {bucket!r}")
    return project


def _principal() -> str:
    """Who made the change, as the eventing configuration's change log records it."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (a bare container)
        user = "unknown user"
    return f"ripple journal ({user})"


def _expiration_days(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return whole_number(
            text.strip(), "--expiration-days", least=MIN_EXPIRATION_DAYS, most=MAX_EXPIRATION_DAYS
        )
    except NumberError as e:
        raise click.ClickException(str(e)) from e


def _counted(count: int, noun: str) -> str:
    """`1 row`, `2 rows`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _since(journal: Journal) -> str:
    return journal.enabled_at.strftime("%Y-%m-%d %H:%M:%S UTC")


def _expiration(journal: Journal) -> str:
    days = journal.expiration_days
    return "none (rows kept)" if days is None else f"after {days} days"


@journal.command("enable", epilog=EPILOG)
@click.argument("bucket")
@click.option(
    "--expiration-days",
    "days_text",
    metavar="N",
    default=None,
    help=f"Keep journal rows N days ({MIN_EXPIRATION_DAYS} or more, as S3's journal "
    "tables): a day's rows are dropped once all are older (`ripple journal expire`, and "
    "`ripple up` every journal.interval). Without it the rows are kept.",
)
@click.pass_context
def journal_enable(ctx: click.Context, bucket: str, days_text: str | None) -> None:
    """Journal every event of BUCKET from now on (a journal already enabled keeps its start
    and takes the new record expiration)."""
    days = _expiration_days(days_text)
    with _metabase(ctx) as db:
        project = _project_of(db, bucket)
        enabled = JournalStore(db).put(project, bucket, days, _principal())
    console.print(
        f"journal of bucket {bucket} enabled since {_since(enabled)}; "
        f"record expiration: {_expiration(enabled)}",
        highlight=False,
    )


@journal.command("disable", epilog=EPILOG)
@click.argument("bucket")
@click.pass_context
def journal_disable(ctx: click.Context, bucket: str) -> None:
    """Stop journaling BUCKET's events (the rows already written stay)."""
    with _metabase(ctx) as db:
        project = _project_of(db, bucket)
        disabled = JournalStore(db).delete(project, bucket, _principal())
    if disabled:
        console.print(f"journal of bucket {bucket} disabled", highlight=False)
    else:
        console.print(f"bucket {bucket} had no journal", highlight=False)


@journal.command("status", epilog=EPILOG)
@click.argument("bucket", required=False)
@click.pass_context
def journal_status(ctx: click.Context, bucket: str | None) -> None:
    """Show the journaled buckets (or BUCKET): since when, and their record expiration."""
    with _metabase(ctx) as db:
        if bucket is None:
            with db.read() as conn:
                found = sorted(
                    ((name, j) for (_, name), j in journals(conn).items()),
                    key=lambda found: found[0],
                )
        else:
            one = JournalStore(db).get(_project_of(db, bucket), bucket)
            found = [] if one is None else [(bucket, one)]
    if not found:
        what = "no bucket has a journal" if bucket is None else f"bucket {bucket} has no journal"
        console.print(what, highlight=False)
        return
    table = Table(title="journaled buckets", title_justify="left")
    for column in ("bucket", "enabled since", "record expiration"):
        table.add_column(column, overflow="fold")
    for name, configuration in found:
        table.add_row(name, _since(configuration), _expiration(configuration))
    console.print(table)


@journal.command("inventory", epilog=EPILOG)
@click.argument("bucket")
@click.option(
    "--all-versions",
    is_flag=True,
    help="Every version and delete marker (`is_latest` tells the latest), not only each "
    "key's latest version.",
)
@click.pass_context
def journal_inventory(ctx: click.Context, bucket: str, all_versions: bool) -> None:
    """Write BUCKET's live inventory now: the state of every object, one Parquet file at
    <journal.location>/inventory/bucket=BUCKET/, replacing the previous one atomically.

    The snapshot is consistent with the journal's sequence number it prints: the journal's
    rows of the bucket up to it are in the inventory, the later ones are not. `ripple up`
    writes every journaled bucket's inventory every journal.interval seconds."""
    from ripple.cli.journal_upkeep import write_one

    settings = settings_of(ctx)
    with _metabase(ctx) as db:
        loc = BucketLocation(_project_of(db, bucket), bucket)
        inventory = write_one(db, loc, settings.effective_journal_location, all_versions)
    rows = _counted(inventory.rows, "row")
    what = "every version and delete marker" if all_versions else "the latest versions"
    console.print(
        f"inventory of bucket {bucket}: {rows} ({what}) at journal sequence number "
        f"{inventory.sequence_number}, in {inventory.path}",
        highlight=False,
        soft_wrap=True,
    )


@journal.command("expire", epilog=EPILOG)
@click.pass_context
def journal_expire(ctx: click.Context) -> None:
    """Drop the journal rows past their bucket's record expiration now.

    A day's rows of a bucket (a partition of the journal table) go once all are older than
    the bucket's --expiration-days: first out of the table's log, so Spark readers no
    longer see them, then, at the next run, off the disk (a query already reading them
    keeps them until then). The journal's query may run meanwhile."""
    from ripple.cli.journal_upkeep import expire

    location = settings_of(ctx).effective_journal_location
    with _metabase(ctx) as db:
        pruned = expire(db, location)
    if pruned is None:
        raise click.ClickException(
            f"the journal at {location} is not in a local directory: its record expiration "
            "is not applied here"
        )
    unlisted = _counted(len(pruned.unlisted), "partition")
    console.print(
        f"record expiration: {unlisted} out of the journal table's log, "
        f"{len(pruned.deleted)} deleted from {location}",
        highlight=False,
        soft_wrap=True,
    )


@journal.command("query", epilog=EPILOG)
@click.argument("sql")
@click.option(
    "--limit",
    type=click.IntRange(1, 1_000_000),
    default=100,
    show_default=True,
    help="Most rows to print.",
)
@click.pass_context
def journal_query(ctx: click.Context, sql: str, limit: int) -> None:
    """Run a Spark SQL query over the journal and print its rows.

    The journal is the view `journal` (its columns: docs/journal.md), read from
    journal.location as any Spark reader reads it, and the live inventories the view
    `inventory`; Spark runs on spark.master. For example:

        ripple journal query "SELECT key, record_timestamp FROM journal
        WHERE record_type = 'DELETE' AND requester = 'alice'"
    """
    from ripple.cli.journal_query import run_query  # Spark only for this command

    run_query(settings_of(ctx), sql, limit)
