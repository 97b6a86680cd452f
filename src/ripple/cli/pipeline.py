"""`ripple pipeline run`: the eventing job (change stream → S3 events → destinations)."""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from types import FrameType

import click
import sqlalchemy as sa
from rich.table import Table

from ripple.cli.common import console, errors, reason_of, settings_of
from ripple.config import Settings
from ripple.pipeline.job import checkpoint_root
from ripple.pipeline.service import Pipeline, PipelineError
from ripple.tls import Certificate

__all__ = ["pipeline", "run_pipeline"]


def run_pipeline(
    settings: Settings,
    *,
    metrics_address: str | None,
    checkpoint_dir: Path | None = None,
    max_records_per_batch: int = 50_000,
    trigger_interval: str = "0 seconds",
    lease_s: float = 5.0,
    table: Table | None = None,
) -> None:
    """Build the pipeline, print where everything is, run it until Ctrl-C or SIGTERM."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for chatty in ("py4j", "alembic"):  # a line per batch callback, per migration step
        logging.getLogger(chatty).setLevel(logging.WARNING)
    try:
        service = Pipeline.from_settings(
            settings,
            checkpoint_dir=checkpoint_dir,
            metrics_address=metrics_address,
            max_records_per_batch=max_records_per_batch,
            trigger_interval=trigger_interval,
            lease_s=lease_s,
        )
    except PipelineError as e:
        raise click.ClickException(str(e)) from e
    except sa.exc.OperationalError as e:
        reason = reason_of(e)
        raise click.ClickException(
            f"cannot reach the metabase: {reason}. Check RIPPLE_DATABASE_URL and that the "
            "database server is running."
        ) from e
    try:
        metrics = service.serve_metrics()
    except PipelineError as e:
        service.metabase.dispose()
        raise click.ClickException(str(e)) from e
    if service.metrics_tls is not None:
        reload_on_hangup(service.metrics_tls)
    table = table or Table(title="ripple pipeline", show_header=False, title_justify="left")
    table.add_row("metabase", service.metabase.url.render_as_string(hide_password=True))
    table.add_row("spark master", service.job.master)
    table.add_row("checkpoint", checkpoint_root(service.job))
    table.add_row("metrics", f"{metrics}/metrics" if metrics else "off")
    buckets = service.registry.buckets()
    table.add_row("eventing buckets", str(len(buckets)))
    for topic, targets in service.destinations.targets.items():
        table.add_row(f"topic {topic}", ", ".join(type(t).__name__ for t in targets))
    console.print(table)

    def started(_query: object) -> None:
        console.print("[green]pipeline running[/green]; Ctrl-C stops it", highlight=False)
        sys.stdout.flush()

    try:
        service.run(on_started=started)
    except KeyboardInterrupt:  # before the job's own handler was installed
        errors.print("interrupted while starting")
        sys.exit(130)
    except RuntimeError as e:
        raise click.ClickException(str(e)) from e
    console.print("pipeline stopped", highlight=False)


@click.group()
def pipeline() -> None:
    """The eventing pipeline on Spark: change records → S3 events → destinations."""


@pipeline.command("run")
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve Prometheus metrics on 127.0.0.1:PORT/metrics (0: any free port). "
    "Default: metrics.address (RIPPLE_METRICS_ADDRESS), or no metrics.",
)
@click.option(
    "--checkpoint",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Spark checkpoint directory. Default: DATA_DIR/checkpoint.",
)
@click.option(
    "--max-records-per-batch",
    type=click.IntRange(1),
    default=50_000,
    show_default=True,
    help="Most change records in one micro-batch, so a backlog drains in bounded batches.",
)
@click.option(
    "--trigger-interval",
    default="0 seconds",
    show_default=True,
    help="Time between micro-batch starts (0: the next starts when one ends).",
)
@click.option(
    "--lease-seconds",
    type=click.FloatRange(0, 3600),
    default=5.0,
    show_default=True,
    help="A trickle of changes is delivered by one task that follows the stream this long "
    "(milliseconds after each commit); 0: a micro-batch per handful of changes (~0.3 s each).",
)
@click.pass_context
def pipeline_run(
    ctx: click.Context,
    metrics_port: int | None,
    checkpoint: Path | None,
    max_records_per_batch: int,
    trigger_interval: str,
    lease_seconds: float,
) -> None:
    """Run the eventing job until Ctrl-C (or SIGTERM).

    Reads the change stream from the last checkpoint, turns change records into S3 event
    messages, and delivers each to the destinations of its bucket: the topics of the
    bucket-eventing list and their push endpoints ([topics."NAME"] in ripple.toml), and
    the topics' pull subscriptions. Delivery is at least once: after a crash the job
    resumes from its checkpoint and may deliver the last batch again (same event ids).
    Spark's master is spark.master (RIPPLE_SPARK_MASTER), local[*] by default. With
    metrics.tls-cert and metrics.tls-key the metrics are served over HTTPS; SIGHUP reloads
    the certificate.
    """
    settings = settings_of(ctx)
    address = settings.metrics_address or None
    if metrics_port is not None:
        address = f"127.0.0.1:{metrics_port}"
    run_pipeline(
        settings,
        metrics_address=address,
        checkpoint_dir=checkpoint,
        max_records_per_batch=max_records_per_batch,
        trigger_interval=trigger_interval,
        lease_s=lease_seconds,
    )


def reload_on_hangup(certificate: Certificate) -> None:
    """SIGHUP reloads `certificate`, then does what it did before (`ripple up`: reload the
    gateway's)."""
    before = signal.getsignal(signal.SIGHUP)

    def hangup(signum: int, frame: FrameType | None) -> None:
        certificate.reload()
        if callable(before):
            before(signum, frame)

    signal.signal(signal.SIGHUP, hangup)
