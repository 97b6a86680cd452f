"""The pipeline as a service: settings in, a running job out, stopped by SIGINT or SIGTERM.

`Pipeline.from_settings` builds everything before Spark starts, so a wrong topic argument
or an unreachable metabase fails in a second with one line, not after a JVM has booted:
the registry of eventing buckets, the topics and their targets, the retry queue, the
checkpoint directory. `run` serves the Prometheus metrics (when an address is given) and
runs the job in the calling (main) thread until a signal asks it to stop; the batch in
flight completes and the checkpoint is left consistent.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from pyspark.sql.streaming.query import StreamingQuery

from ripple.config import Settings
from ripple.metabase import Metabase
from ripple.metabase.migrate import current_revision, head_revision
from ripple.notifications.registry import Registry
from ripple.notifications.store import EventingStore
from ripple.pipeline.assemble import RoutesAndTargets
from ripple.pipeline.job import JobSettings, is_hadoop_path, run, worker_setup
from ripple.pipeline.metrics_server import serve_metrics
from ripple.pipeline.session import is_local_master
from ripple.pipeline.tasks import WorkerSetup
from ripple.snapshotter import shared as shared_snapshotters
from ripple.subscriptions.store import SubscriptionStore
from ripple.targets.destinations import Destinations
from ripple.targets.guard import set_default_guard
from ripple.tls import Certificate, TlsError, plain_text_problem

__all__ = ["Pipeline", "PipelineError", "metrics_certificate", "parse_address"]

log = logging.getLogger(__name__)


class PipelineError(RuntimeError):
    """The pipeline cannot start; the message is one line saying what to do."""


def parse_address(address: str, what: str) -> tuple[str, int]:
    """`host:port` (`PipelineError` naming `what` if malformed)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise PipelineError(f"{what} {address!r} must be HOST:PORT, e.g. 127.0.0.1:9464")
    return host.strip("[]"), int(port)


@dataclass
class Pipeline:
    settings: Settings
    job: JobSettings
    metabase: Metabase
    registry: Registry
    destinations: Destinations  # as the configuration says at start (the workers build theirs)
    setup: WorkerSetup
    metrics_address: tuple[str, int] | None = None  # host, port (0: any free port)
    metrics_tls: Certificate | None = None  # HTTPS for the metrics; None: plain HTTP
    stop: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        checkpoint_dir: Path | None = None,
        metrics_address: str | None = None,
        max_records_per_batch: int = 50_000,
        trigger_interval: str = "0 seconds",
        lease_s: float = 5.0,
    ) -> Pipeline:
        metrics = metrics_tls = None
        if metrics_address is not None:
            metrics = parse_address(metrics_address, "the metrics address")
            metrics_tls = metrics_certificate(settings, metrics_address)
        try:  # before any target is built: they all ask it
            set_default_guard(settings.guard)
            shared_snapshotters.configure(settings.snapshotters)  # snapshot:// names these
        except ValueError as e:
            raise PipelineError(str(e)) from e
        sqlite = settings.effective_database_url.startswith("sqlite")
        if sqlite and not is_local_master(settings.spark_master):
            raise PipelineError(
                f"spark.master {settings.spark_master} runs the pipeline's tasks on executors "
                "that cannot open this machine's SQLite metabase: set RIPPLE_DATABASE_URL to a "
                "PostgreSQL database they can reach"
            )
        phase1 = settings.eventing_buckets
        registry = Registry()  # its routes are set with the targets, before any write
        metabase = Metabase(settings.effective_database_url, eventing=registry.is_eventing)
        try:
            revision, head = current_revision(metabase), head_revision()
            if revision != head:
                raise PipelineError(
                    f"the metabase at {metabase.url.render_as_string(hide_password=True)} is at "
                    f"schema revision {revision}, not {head}: run `ripple db upgrade` first"
                )
            routes_and_targets = RoutesAndTargets(
                settings.topics,
                phase1,
                registry,
                EventingStore(metabase),
                SubscriptionStore(metabase),
            )
            try:
                destinations = routes_and_targets.assemble()
            except ValueError as e:
                raise PipelineError(str(e)) from e
        except BaseException:
            metabase.dispose()
            raise
        job = JobSettings(
            database_url=metabase.url.render_as_string(hide_password=False),
            checkpoint_dir=checkpoint_dir
            or settings.spark_checkpoint
            or settings.data_dir / "checkpoint",
            master=settings.spark_master,
            events=settings.event_settings,
            max_records_per_batch=max_records_per_batch,
            trigger_interval=trigger_interval,
            lease_s=lease_s,
            driver_host=settings.spark_driver_host,
            journal_location=settings.effective_journal_location,
        )
        setup = worker_setup(
            job,
            topics=dict(settings.topics),
            static_routes=dict(phase1),
            guard=settings.guard,
            snapshotters=settings.snapshotters,
        )
        return cls(settings, job, metabase, registry, destinations, setup, metrics, metrics_tls)

    def serve_metrics(self) -> str | None:
        """Start the Prometheus endpoint; its URL (with the real port if 0 was asked)."""
        if self.metrics_address is None:
            return None
        host, port = self.metrics_address
        try:
            server = serve_metrics(host, port, self.metrics_tls)
        except OSError as e:
            raise PipelineError(
                f"cannot serve metrics on {host}:{port}: {e.strerror or e}; "
                "choose another port with --metrics-port or metrics.address"
            ) from e
        scheme = "http" if self.metrics_tls is None else "https"
        shown = f"[{host}]" if ":" in host else host
        return f"{scheme}://{shown}:{server.server_port}"

    def _stop_on_signals(self) -> None:
        """SIGINT and SIGTERM ask the job to stop after the batch in flight (installed once
        Spark has started, which sets its own SIGINT handler)."""

        def handler(signum: int, _frame: FrameType | None) -> None:
            log.warning("%s: stopping after the batch in flight", signal.Signals(signum).name)
            self.stop.set()

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, handler)
            signal.signal(signal.SIGTERM, handler)

    def run(self, on_started: Callable[[StreamingQuery], Any] | None = None) -> None:
        """Run until SIGINT/SIGTERM or `stop`; raises if the query fails."""
        if not is_hadoop_path(self.job.checkpoint_dir):
            Path(self.job.checkpoint_dir).mkdir(parents=True, exist_ok=True)

        def started(query: StreamingQuery) -> None:
            self._stop_on_signals()
            if on_started is not None:
                on_started(query)

        try:
            run(self.job, self.setup, self.stop, started)
        finally:
            self.metabase.dispose()


def metrics_certificate(settings: Settings, address: str) -> Certificate | None:
    """The certificate the metrics are served with on `address` (None: plain HTTP);
    `PipelineError` when it cannot be served, or when production mode forbids plain HTTP
    there (`ripple.tls.plain_text_problem`)."""
    try:
        files = settings.metrics_tls
        if files is not None:
            return Certificate(*files, settings=("metrics.tls-cert", "metrics.tls-key"))
    except (TlsError, ValueError) as e:
        raise PipelineError(str(e)) from e
    problem = plain_text_problem(
        "metrics.address",
        address,
        production=settings.mode == "production",
        allowed_by="metrics.allow-plain-http" if settings.metrics_allow_plain_http else "",
        remedy="set metrics.tls-cert and metrics.tls-key (RIPPLE_METRICS_TLS_CERT, "
        "RIPPLE_METRICS_TLS_KEY) to serve HTTPS, or metrics.allow-plain-http = true behind a "
        "proxy that terminates TLS",
    )
    if problem is not None:
        raise PipelineError(problem)
    return None
