"""The journal's upkeep: `ripple journal inventory BUCKET` (a journaled bucket's live
inventory now, a progress bar on the way) and `ripple journal expire` (the record
expiration of the journal table now); and the schedule that `ripple up` keeps, both every
`journal.interval` seconds on a thread. The parts themselves:
`ripple.notifications.inventory` and `ripple.notifications.journal_expiry`; docs/journal.md."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ripple.cli.common import errors
from ripple.cli.schedule import Schedule, Unschedulable
from ripple.metabase import BucketLocation, Metabase
from ripple.metabase.errors import BucketNotFound
from ripple.notifications.inventory import (
    Inventory,
    InventoryError,
    inventory_directory,
    write_inventory,
)
from ripple.notifications.journal import JournalStore, journal_expirations, journals
from ripple.notifications.journal_expiry import Pruned, prune_journal

__all__ = ["JournalUpkeep", "expire", "write_one"]

log = logging.getLogger("ripple.journal")


def write_one(db: Metabase, loc: BucketLocation, location: str, all_versions: bool) -> Inventory:
    """The command's work: the bucket's inventory, with a progress bar on stderr; its
    refusals as one-line `click.ClickException`s."""
    try:
        inventory_directory(location)
    except InventoryError as e:
        raise click.ClickException(str(e)) from e
    if JournalStore(db).get(loc.project_id, loc.bucket_name) is None:
        raise click.ClickException(
            f"bucket {loc.bucket_name} has no journal: `ripple journal enable "
            f"{loc.bucket_name}` first (an inventory is a journaled bucket's)"
        )
    with Progress(
        TextColumn("inventory of {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=errors,
        transient=True,
    ) as progress:
        task = progress.add_task(loc.bucket_name, total=None)
        try:
            inventory = write_inventory(
                db,
                loc,
                location,
                all_versions=all_versions,
                progress=lambda done, most: progress.update(task, completed=done, total=most),
            )
        except BucketNotFound as e:
            raise click.ClickException(f"no bucket named {loc.bucket_name!r}") from e
    if inventory is None:  # nothing cancels it here
        raise click.ClickException(f"the inventory of {loc.bucket_name} was cancelled")
    return inventory


def expire(db: Metabase, location: str) -> Pruned | None:
    """Drop the journal's partitions past their bucket's record expiration (today in UTC);
    None where the location is not local (nothing pruned)."""
    with db.read() as conn:
        expirations = journal_expirations(conn)
    return prune_journal(location, expirations, datetime.now(UTC).date())


class JournalUpkeep(Schedule):
    """The journal's record expiration, then every journaled bucket's inventory, now and
    then every `interval` seconds on a daemon thread, until `stop`, which ends a snapshot in
    progress at its next row group (the previous one stays)."""

    what = "journal upkeep"

    def __init__(
        self, db: Metabase, location: str, interval: float, *, all_versions: bool = False
    ) -> None:
        super().__init__(interval)
        self.db = db
        self.location = location
        self.all_versions = all_versions

    def run_once(self) -> list[Inventory]:
        """The record expiration, then every journaled bucket's inventory, one after
        another (a bucket deleted meanwhile is skipped); the inventories written."""
        pruned = expire(self.db, self.location)
        if pruned is None:
            raise Unschedulable(
                f"the journal's record expiration and live inventories need a local "
                f"journal.location, not {self.location}"
            )
        if pruned.unlisted or pruned.deleted:
            log.info(
                "journal record expiration: %d partitions out of the table's log, %d deleted",
                len(pruned.unlisted),
                len(pruned.deleted),
            )
        with self.db.read() as conn:
            buckets = sorted(journals(conn))
        written: list[Inventory] = []
        for project, name in buckets:
            if self.stopping():
                break
            started = time.monotonic()
            try:
                inventory = write_inventory(
                    self.db,
                    BucketLocation(project, name),
                    self.location,
                    all_versions=self.all_versions,
                    cancelled=self.stopping,
                )
            except BucketNotFound:  # deleted since: its journal went with it
                continue
            if inventory is not None:
                written.append(inventory)
                log.info(
                    "inventory of %s: %d rows at sequence number %s in %.1f s",
                    name,
                    inventory.rows,
                    inventory.sequence_number,
                    time.monotonic() - started,
                )
        return written
