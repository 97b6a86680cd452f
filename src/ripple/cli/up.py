"""`ripple up`: the main job on the embedded defaults: migrate, then serve S3 from gateway
processes of their own (`ripple.gateway.processes`) and run the pipeline in this one, until
Ctrl-C."""

from __future__ import annotations

import signal

import click
import sqlalchemy as sa
from rich.table import Table

from ripple.cli.common import migrate, open_metabase, settings_of
from ripple.cli.journal_upkeep import JournalUpkeep
from ripple.cli.lifecycle import LifecycleSchedule, free_data
from ripple.cli.pipeline import run_pipeline
from ripple.gateway.data import ObjectData
from ripple.gateway.processes import GatewayProcesses
from ripple.gateway.server import GatewayError, bind, check_plain_http
from ripple.metabase.schema import buckets, objects, projects
from ripple.notifications import Registry
from ripple.notifications.store import EventingStore
from ripple.notifications.watcher import ConfigWatcher

DEFAULT_METRICS_ADDRESS = "127.0.0.1:9464"


@click.command()
@click.pass_context
def up(ctx: click.Context) -> None:
    """Run ripple's main job on the embedded defaults, until Ctrl-C.

    Creates the data directory, migrates the metabase to the newest schema (migrations
    that already ran are skipped), prints where everything is, serves the S3 API on
    s3.address (RIPPLE_S3_ADDRESS, 127.0.0.1:9000 by default) from s3.workers gateway
    processes of their own (RIPPLE_S3_WORKERS, by default one per core) and runs the eventing
    pipeline in this one. Make S3 credentials with `ripple user create NAME`. Prometheus
    metrics are served on metrics.address (RIPPLE_METRICS_ADDRESS), 127.0.0.1:9464 by
    default. With s3.tls-cert and s3.tls-key the S3 API is HTTPS, with metrics.tls-cert and
    metrics.tls-key the metrics; SIGHUP to this process reloads the certificates.
    """
    settings = settings_of(ctx)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    # for the migration, the counts and the lifecycle runs (whose expirations in a bucket
    # with eventing write change records: the watcher keeps the registry current); the
    # gateway processes open theirs
    registry = Registry(settings.eventing_buckets)
    db = open_metabase(settings, registry)
    try:
        revision = migrate(db)
        with db.read() as conn:
            counts = {
                name: conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
                for name, table in (
                    ("projects", projects),
                    ("buckets", buckets),
                    ("objects", objects),
                )
            }
        workers = settings.gateway_workers(default=0)  # one per core unless set
        check_plain_http(settings, settings.s3_address)
        gateway = GatewayProcesses(settings, bind(settings.s3_address), workers)
        gateway.start()  # stops what it started if it cannot
        # a rotated certificate: `kill -HUP` this process, which passes it on to the gateway's
        signal.signal(signal.SIGHUP, lambda _signum, _frame: gateway.reload())
    except GatewayError as e:
        db.dispose()
        raise click.ClickException(str(e)) from e
    except BaseException:
        db.dispose()
        raise
    watcher = ConfigWatcher.for_registry(EventingStore(db), registry)
    schedule: LifecycleSchedule | None = None
    upkeep: JournalUpkeep | None = None
    try:
        watcher.start()
        table = Table(title="ripple", show_header=False, title_justify="left")
        table.add_row("data directory", str(settings.data_dir.resolve()))
        table.add_row("schema revision", str(revision))
        for name, count in counts.items():
            table.add_row(name, str(count))
        table.add_row("S3 endpoint", gateway.url)
        table.add_row("gateway processes", str(gateway.workers))
        interval = settings.lifecycle_interval
        table.add_row("lifecycle runs", f"every {interval} s" if interval else "off")
        # lifecycle rules applied now and every lifecycle.interval seconds (0: never)
        data = ObjectData(settings.data_dir / "objects")
        schedule = LifecycleSchedule(db, interval, removed=free_data(data))
        if interval:
            schedule.start()
        # the journal's record expiration and live inventories now and every journal.interval
        every = settings.journal_interval
        table.add_row("journal upkeep", f"every {every} s" if every else "off")
        upkeep = JournalUpkeep(
            db,
            settings.effective_journal_location,
            every,
            all_versions=settings.journal_inventory_all_versions,
        )
        if every:
            upkeep.start()
        run_pipeline(
            settings,
            metrics_address=settings.metrics_address or DEFAULT_METRICS_ADDRESS,
            table=table,
        )
    finally:
        if schedule is not None:
            schedule.stop()
        if upkeep is not None:
            upkeep.stop()
        gateway.stop()
        watcher.stop()
        db.dispose()
