"""`Settings`: every setting, typed. Each field is a row of the settings table (`SETTINGS`):
its key in ripple.toml, its `RIPPLE_*` variable, its parser, its default and a line of help.
A new setting is one field here; loading, validation and the table of
docs/configuration.md follow from it."""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ripple.config.parsers import (
    AllowList,
    Choice,
    DatabaseURL,
    Directory,
    EventingList,
    Flag,
    Matching,
    Number,
    Text,
    WholeNumber,
)
from ripple.config.table import ConfigError, Setting, rows_of, setting
from ripple.events import EventSettings
from ripple.events.record import DEFAULT_REGION
from ripple.notifications.phase1 import EventingConfigError, parse_eventing_buckets
from ripple.notifications.topics import Topic
from ripple.snapshotter.settings import SnapshotterSettings, parse_snapshotters
from ripple.targets.guard import MODES, DestinationGuard

__all__ = [
    "ENVIRONMENT_VARIABLES",
    "MAX_AUTOMATIC_WORKERS",
    "SETTINGS",
    "Settings",
    "usable_cores",
]

# gateway processes `ripple up` runs when s3.workers is unset, on a machine of many cores
# (each keeps its own metabase connections: up to 32 on PostgreSQL)
MAX_AUTOMATIC_WORKERS = 8


@dataclass(frozen=True)
class Settings:
    """Every setting, typed; each field a row of the settings table (module docstring)."""

    data_dir: Path = setting(
        "data-dir",
        "RIPPLE_DATA_DIR",
        Directory(),
        Path(".ripple"),
        "where the SQLite metabase, object data and checkpoints live",
    )
    database_url: str = setting(
        "database.url",
        "RIPPLE_DATABASE_URL",
        DatabaseURL(),
        "",
        "the metabase's database: SQLite, or PostgreSQL through psycopg 3",
        default_is="SQLite file `metabase.db` in the data directory",
    )
    s3_address: str = setting(
        "s3.address",
        "RIPPLE_S3_ADDRESS",
        Text(),
        "127.0.0.1:9000",
        "where the S3 gateway listens (`HOST:PORT`)",
    )
    region: str = setting(
        "s3.region",
        "RIPPLE_REGION",
        Text(),
        "",
        "the region the gateway answers (`GetBucketLocation`, SigV4) and events name "
        "(`awsRegion`); when none is set, both say `us-east-1`, as S3 does, and requests "
        "signed for any region are accepted",
        default_is="`us-east-1`",
    )
    s3_domain: str = setting(
        "s3.domain",
        "RIPPLE_S3_DOMAIN",
        Text(),
        "",
        "virtual-hosted-style addressing: requests to `BUCKET.<domain>` address that bucket",
    )
    s3_tls_cert: str = setting(
        "s3.tls-cert",
        "RIPPLE_S3_TLS_CERT",
        Text(),
        "",
        "serve S3 over HTTPS with this PEM certificate, its chain after it (with "
        "`s3.tls-key`); reloaded on SIGHUP",
        default_is="none: plain HTTP",
    )
    s3_allow_plain_http: bool = setting(
        "s3.allow-plain-http",
        "RIPPLE_S3_ALLOW_PLAIN_HTTP",
        Flag(),
        False,
        "in `production`, serve plain HTTP off loopback all the same: behind a proxy or load "
        "balancer that terminates TLS (logged at start)",
    )
    s3_tls_key: str = setting(
        "s3.tls-key",
        "RIPPLE_S3_TLS_KEY",
        Text(),
        "",
        "the PEM private key of `s3.tls-cert`",
        default_is="none: plain HTTP",
    )
    delete_rate: float = setting(
        "s3.delete-rate",
        "RIPPLE_S3_DELETE_RATE",
        Number(0, 1_000_000_000, above=True, note="per second"),
        100.0,
        "delete operations per second per project (DeleteObject, DeleteObjects: one each)",
    )
    delete_burst: int = setting(
        "s3.delete-burst",
        "RIPPLE_S3_DELETE_BURST",
        WholeNumber(1, 1_000_000_000),
        200,
        "deletes a project may make at once before the rate applies (503 `SlowDown` after)",
    )
    max_rename_keys: int = setting(
        "s3.max-rename-keys",
        "RIPPLE_S3_MAX_RENAME_KEYS",
        WholeNumber(1, 1_000_000),
        1000,
        "the most keys one prefix rename (RenameObject with `x-ripple-rename-prefix: true`) "
        "may move, all in one metabase transaction; more is refused with `InvalidRequest`, "
        "nothing moved",
    )
    s3_workers: int = setting(
        "s3.workers",
        "RIPPLE_S3_WORKERS",
        WholeNumber(0, 1024, note="gateway processes; 0: one per core for ripple up"),
        0,
        "gateway processes serving the S3 address (`ripple up`, and `ripple serve` unless "
        "`--workers` says otherwise); each its own process beside the pipeline's, never "
        "inside its driver; one that dies is replaced. More than 1 spreads S3 requests over "
        "the cores; the processes share the delete rate limit, rename tokens and "
        "configuration as several gateways do ([deploy.md](deploy.md))",
        default_is="one per core for `ripple up` (the cores its CPU affinity and a "
        f"container's CPU limit allow, at most {MAX_AUTOMATIC_WORKERS}), 1 for `ripple serve`",
    )
    lifecycle_interval: int = setting(
        "lifecycle.interval",
        "RIPPLE_LIFECYCLE_INTERVAL",
        WholeNumber(0, 31_536_000, note="seconds, a year at most; 0: no runs"),
        3600,
        "seconds between the lifecycle runs `ripple up` makes (one at start, then one per "
        "interval); `0`: none, run `ripple lifecycle run` yourself "
        "([lifecycle.md](lifecycle.md))",
    )
    spark_master: str = setting(
        "spark.master",
        "RIPPLE_SPARK_MASTER",
        Text(),
        "local[*]",
        "the Spark master of the event pipeline: `local[N]`, or a cluster's "
        "(`spark://HOST:7077`, `k8s://…`, `yarn`), which needs a PostgreSQL metabase "
        "([deploy-spark.md](deploy-spark.md))",
    )
    spark_driver_host: str = setting(
        "spark.driver-host",
        "RIPPLE_SPARK_DRIVER_HOST",
        Text(),
        "127.0.0.1",
        "the address the pipeline's Spark driver binds to and its executors reach it at; on "
        "a cluster, an address of this machine the executors can reach",
    )
    spark_checkpoint: str = setting(
        "spark.checkpoint",
        "RIPPLE_SPARK_CHECKPOINT",
        Text(),
        "",
        "the pipeline's streaming checkpoint: a local directory or any Hadoop path "
        "(`hdfs://…`, `s3a://…`) that every start of the driver sees",
        default_is="`<data-dir>/checkpoint`",
    )
    journal_location: str = setting(
        "journal.location",
        "RIPPLE_JOURNAL_LOCATION",
        Text(),
        "",
        "where the pipeline writes the journal of journaled buckets (`<location>/journal`, "
        "Parquet): a local directory or any Hadoop path ([journal.md](journal.md))",
        default_is="`<data-dir>/journal`",
    )
    journal_interval: int = setting(
        "journal.interval",
        "RIPPLE_JOURNAL_INTERVAL",
        WholeNumber(0, 31_536_000, note="seconds, a year at most; 0: none"),
        3600,
        "seconds between the journal's upkeep runs `ripple up` makes (one at start, then one "
        "per interval): the record expiration of the journal table, and the live inventory "
        "of every journaled bucket; `0`: none, run `ripple journal expire` and `ripple "
        "journal inventory` yourself ([journal.md](journal.md))",
    )
    journal_inventory_all_versions: bool = setting(
        "journal.inventory-all-versions",
        "RIPPLE_JOURNAL_INVENTORY_ALL_VERSIONS",
        Flag(),
        False,
        "the live inventories `ripple up` writes hold every version and delete marker, not "
        "only the latest versions",
    )
    bucket_eventing_buckets: str = setting(
        "bucket-eventing.buckets",
        "RIPPLE_BUCKET_EVENTING_BUCKETS",
        EventingList(),
        "",
        "phase-1 eventing list: the buckets with eventing and the Google Pub/Sub topic of "
        "each (below); in the file, a TOML list of tuples is accepted too",
        default_is="no bucket",
    )
    mode: str = setting(
        "mode",
        "RIPPLE_MODE",
        Choice(MODES),
        "dev",
        "in `production` the destination guard refuses push endpoints on loopback, private, "
        "link-local and cloud metadata addresses, and the S3 gateway, the metrics endpoint "
        "and the snapshotters refuse to serve plain text off loopback",
    )
    destinations_allow: str = setting(
        "destinations.allow",
        "RIPPLE_DESTINATIONS_ALLOW",
        AllowList(),
        "",
        "what the destination guard lets through in production: CIDRs (`10.0.0.0/8`, "
        "`::1/128`), host patterns (`hooks.example.com`, `*.example.com`), the Google Cloud "
        "projects API topics may publish to (`pubsub:projects/P`) and local sockets a "
        "Pub/Sub `endpoint` may name (`unix:/run/emulator.sock`)",
    )
    metrics_address: str = setting(
        "metrics.address",
        "RIPPLE_METRICS_ADDRESS",
        Text(),
        "",
        "where Prometheus metrics are served (`HOST:PORT`)",
        default_is="none (`ripple up`: `127.0.0.1:9464`)",
    )
    metrics_tls_cert: str = setting(
        "metrics.tls-cert",
        "RIPPLE_METRICS_TLS_CERT",
        Text(),
        "",
        "serve the pipeline's metrics over HTTPS with this PEM certificate, its chain after "
        "it (with `metrics.tls-key`); reloaded on SIGHUP",
        default_is="none: plain HTTP",
    )
    metrics_tls_key: str = setting(
        "metrics.tls-key",
        "RIPPLE_METRICS_TLS_KEY",
        Text(),
        "",
        "the PEM private key of `metrics.tls-cert`",
        default_is="none: plain HTTP",
    )
    metrics_allow_plain_http: bool = setting(
        "metrics.allow-plain-http",
        "RIPPLE_METRICS_ALLOW_PLAIN_HTTP",
        Flag(),
        False,
        "in `production`, serve the metrics over plain HTTP off loopback all the same: "
        "behind a proxy that terminates TLS, or a private scrape network (logged at start)",
    )
    event_source: str = setting(
        "events.source",
        "RIPPLE_EVENT_SOURCE",
        Matching(r"\S+", "a name without spaces, not empty"),
        "ripple:s3",
        "`eventSource` of every event message; `aws:s3` makes typed AWS consumers (AWS Lambda "
        "Powertools' `S3Model`) accept ripple's events, and names the system "
        "`s3.amazonaws.com` where S3 names itself "
        "([events.md](events.md#typed-aws-consumers-eventssource--awss3))",
    )
    arn_partition: str = setting(
        "events.arn-partition",
        "RIPPLE_ARN_PARTITION",
        Matching(r"[a-z0-9-]+", "lower-case letters, digits and hyphens (aws, aws-cn, …)"),
        "aws",
        "the partition of bucket ARNs in events, `arn:<partition>:s3:::<bucket>`",
    )
    topics_allow_secrets_in_cleartext: bool = setting(
        "topics.allow-secrets-in-cleartext",
        "RIPPLE_TOPICS_ALLOW_SECRETS_IN_CLEARTEXT",
        Flag(),
        False,
        "the topic API accepts credentials in a push endpoint over plain HTTP (not only "
        "HTTPS), and targets may send credentials over a connection without TLS (Kafka's "
        "SASL on a plain-text listener)",
    )
    # `[topics."<name>"]` tables of the file (no environment variable): see notifications.topics
    topics: Mapping[str, Topic] = field(default_factory=dict)
    # `[snapshotters.NAME]` tables of the file, as written (see `snapshotters`)
    snapshotter_tables: Mapping[str, Any] = field(default_factory=dict)

    @property
    def snapshotters(self) -> dict[str, SnapshotterSettings]:
        """Every configured snapshotter, plus the embedded `default` under the data directory
        (`load_settings` already checked them)."""
        try:
            return parse_snapshotters(self.snapshotter_tables, self.data_dir)
        except ValueError as e:
            raise ConfigError(str(e)) from e

    def snapshotter(self, name: str) -> SnapshotterSettings:
        """Snapshotter `name`; `ConfigError` listing the known ones if there is none."""
        known = self.snapshotters
        if name not in known:
            raise ConfigError(
                f"no snapshotter {name!r}; configured: {', '.join(sorted(known))} "
                f"(add a [snapshotters.{name}] table to ripple.toml)"
            )
        return known[name]

    @property
    def effective_database_url(self) -> str:
        """The database URL in force: the configured one, or SQLite in the data directory."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'metabase.db').as_posix()}"

    def gateway_workers(self, *, default: int) -> int:
        """Gateway processes to run: `s3.workers`, or when it is 0 (unset) `default`, where
        0 means one per core this process may use (`usable_cores`), at most
        `MAX_AUTOMATIC_WORKERS`."""
        workers = self.s3_workers or default
        return workers or min(usable_cores(), MAX_AUTOMATIC_WORKERS)

    @property
    def s3_tls(self) -> tuple[Path, Path] | None:
        """The certificate and key files the gateway serves HTTPS with, or None for plain
        HTTP; `ConfigError` when only one of the two is set."""
        return _tls_files(self.s3_tls_cert, self.s3_tls_key, "s3")

    @property
    def metrics_tls(self) -> tuple[Path, Path] | None:
        """The certificate and key files the pipeline's metrics are served over HTTPS with,
        or None for plain HTTP; `ConfigError` when only one of the two is set."""
        return _tls_files(self.metrics_tls_cert, self.metrics_tls_key, "metrics")

    @property
    def effective_journal_location(self) -> str:
        """`journal.location`, or `<data-dir>/journal` (absolute)."""
        return self.journal_location or str((self.data_dir / "journal").resolve())

    @property
    def effective_region(self) -> str:
        """The region in force: the configured one, or `us-east-1`, as S3 says for none."""
        return self.region or DEFAULT_REGION

    @property
    def guard(self) -> DestinationGuard:
        """The destination guard `mode`, `destinations.allow` and
        `topics.allow-secrets-in-cleartext` ask for (`load_settings` already checked them;
        `ConfigError` naming the entry otherwise)."""
        try:
            return DestinationGuard(
                self.destinations_allow,
                self.mode,
                secrets_in_cleartext=self.topics_allow_secrets_in_cleartext,
            )
        except ValueError as e:
            raise ConfigError(str(e)) from e

    @property
    def event_settings(self) -> EventSettings:
        """What event messages say that no change record does: source, region, partition."""
        return EventSettings(
            event_source=self.event_source,
            region=self.effective_region,
            arn_partition=self.arn_partition,
        )

    @property
    def eventing_buckets(self) -> dict[tuple[uuid.UUID, str], str]:
        """The phase-1 eventing list parsed: `{(project id, bucket name): Pub/Sub topic}`.

        Raises `ConfigError` if `bucket_eventing_buckets` is malformed (`load_settings`
        already checked it).
        """
        try:
            return parse_eventing_buckets(self.bucket_eventing_buckets)
        except EventingConfigError as e:
            raise ConfigError(f"{_row('bucket_eventing_buckets').name}: {e}") from e


SETTINGS: tuple[Setting[Any], ...] = rows_of(Settings)
ENVIRONMENT_VARIABLES = tuple(row.variable for row in SETTINGS)


def _row(attribute: str) -> Setting[Any]:
    return next(row for row in SETTINGS if row.attribute == attribute)


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity, bounded by a cgroup v2 CPU
    quota (a container's CPU limit), at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this system (macOS)
        cores = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def _tls_files(cert: str, key: str, section: str) -> tuple[Path, Path] | None:
    """`section`.tls-cert and .tls-key as paths, None when neither is set; `ConfigError`
    naming both settings and their variables when only one is."""
    if bool(cert) != bool(key):
        names = (f"{section}.tls-cert", f"{section}.tls-key")
        given, missing = names if cert else names[::-1]
        prefix = f"RIPPLE_{section.upper()}_TLS"
        raise ConfigError(
            f"{given} is set but {missing} is not: HTTPS needs both ({prefix}_CERT, {prefix}_KEY)"
        )
    return (Path(cert), Path(key)) if cert else None
