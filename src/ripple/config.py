"""Configuration: `ripple.toml` (or `--config FILE`), overridden by `RIPPLE_*` variables.

The embedded defaults need neither: SQLite in the data directory, the S3 gateway on
127.0.0.1:9000, Spark `local[*]`. Every problem is reported as one `ConfigError` line
that names the key or variable and what it should be.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ripple.events import EventSettings
from ripple.events.record import DEFAULT_REGION
from ripple.metabase.db import normalize_url
from ripple.notifications.phase1 import EventingConfigError, parse_eventing_buckets
from ripple.notifications.topics import Topic, parse_topics
from ripple.numbers import NumberError, whole_number
from ripple.snapshotter.settings import SnapshotterSettings, parse_snapshotters
from ripple.targets.guard import DestinationGuard

DEFAULT_CONFIG_FILE = "ripple.toml"


class ConfigError(ValueError):
    """A configuration value is missing, unknown or malformed."""


@dataclass(frozen=True)
class Settings:
    data_dir: Path = Path(".ripple")
    database_url: str = ""  # empty: SQLite file `metabase.db` in the data directory
    s3_address: str = "127.0.0.1:9000"
    s3_domain: str = ""  # virtual-hosted-style requests: BUCKET.<domain>
    delete_rate: float = 100.0  # delete operations per second per project (token bucket)
    delete_burst: int = 200
    max_rename_keys: int = 1000  # keys one prefix rename may move
    # gateway processes on the S3 address (`ripple.gateway.processes`); 0: `gateway_workers`
    s3_workers: int = 0
    lifecycle_interval: int = 3600  # seconds between lifecycle runs in `ripple up`; 0: none
    region: str = ""  # empty: none configured; events and the gateway say `us-east-1`
    spark_master: str = "local[*]"
    # the address Spark's executors reach the pipeline's driver at (and it binds to)
    spark_driver_host: str = "127.0.0.1"
    # where the pipeline's streaming checkpoint lives: a local directory or any Hadoop path
    # (hdfs://, s3a://); empty: <data-dir>/checkpoint
    spark_checkpoint: str = ""
    bucket_eventing_buckets: str = ""
    mode: str = "dev"
    destinations_allow: str = ""
    metrics_address: str = ""
    event_source: str = "ripple:s3"
    arn_partition: str = "aws"
    # the topic API accepts credentials in a push endpoint over plain HTTP (not only HTTPS)
    topics_allow_secrets_in_cleartext: bool = False
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
        workers = int(self.s3_workers) or default
        return workers or min(usable_cores(), MAX_AUTOMATIC_WORKERS)

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
        return _parse_eventing_buckets(self.bucket_eventing_buckets)


# gateway processes `ripple up` runs when s3.workers is unset, on a machine of many cores
# (each keeps its own metabase connections: up to 32 on PostgreSQL)
MAX_AUTOMATIC_WORKERS = 8


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


# TOML key path -> (Settings field, environment variable)
_KEYS: dict[str, tuple[str, str]] = {
    "data-dir": ("data_dir", "RIPPLE_DATA_DIR"),
    "database.url": ("database_url", "RIPPLE_DATABASE_URL"),
    "s3.address": ("s3_address", "RIPPLE_S3_ADDRESS"),
    "s3.region": ("region", "RIPPLE_REGION"),
    "s3.domain": ("s3_domain", "RIPPLE_S3_DOMAIN"),
    "s3.delete-rate": ("delete_rate", "RIPPLE_S3_DELETE_RATE"),
    "s3.delete-burst": ("delete_burst", "RIPPLE_S3_DELETE_BURST"),
    "s3.max-rename-keys": ("max_rename_keys", "RIPPLE_S3_MAX_RENAME_KEYS"),
    "s3.workers": ("s3_workers", "RIPPLE_S3_WORKERS"),
    "lifecycle.interval": ("lifecycle_interval", "RIPPLE_LIFECYCLE_INTERVAL"),
    "spark.master": ("spark_master", "RIPPLE_SPARK_MASTER"),
    "spark.driver-host": ("spark_driver_host", "RIPPLE_SPARK_DRIVER_HOST"),
    "spark.checkpoint": ("spark_checkpoint", "RIPPLE_SPARK_CHECKPOINT"),
    "bucket-eventing.buckets": ("bucket_eventing_buckets", "RIPPLE_BUCKET_EVENTING_BUCKETS"),
    "mode": ("mode", "RIPPLE_MODE"),
    "destinations.allow": ("destinations_allow", "RIPPLE_DESTINATIONS_ALLOW"),
    "metrics.address": ("metrics_address", "RIPPLE_METRICS_ADDRESS"),
    "events.source": ("event_source", "RIPPLE_EVENT_SOURCE"),
    "events.arn-partition": ("arn_partition", "RIPPLE_ARN_PARTITION"),
    "topics.allow-secrets-in-cleartext": (
        "topics_allow_secrets_in_cleartext",
        "RIPPLE_TOPICS_ALLOW_SECRETS_IN_CLEARTEXT",
    ),
}
# keys whose value is true or false (a TOML boolean, or a string such as "true" or "0")
_FLAGS = {"topics.allow-secrets-in-cleartext"}


@dataclass(frozen=True)
class _Number:
    """What a numeric setting takes: a TOML number or a string of one, within bounds (so a
    huge value is a clear refusal, never an overflow where it is used)."""

    least: int
    most: int
    whole: bool = True  # False: fractions too (a TOML float, or "2.5")
    above: bool = False  # True: every value above `least`, not `least` itself
    note: str = ""

    def wanted(self) -> str:
        kind = "a whole number" if self.whole else "a number"
        bounds = f"above {self.least}, at most" if self.above else f"from {self.least} to"
        note = f" ({self.note})" if self.note else ""
        return f"{kind} {bounds} {self.most}{note}"


# keys whose value is a number: a TOML integer (or float, where fractions make sense), or
# a string of one (an environment variable)
_NUMBERS: dict[str, _Number] = {
    "s3.delete-rate": _Number(0, 1_000_000_000, whole=False, above=True, note="per second"),
    "s3.delete-burst": _Number(1, 1_000_000_000),
    "s3.max-rename-keys": _Number(1, 1_000_000),
    "s3.workers": _Number(0, 1024, note="gateway processes; 0: one per core for ripple up"),
    "lifecycle.interval": _Number(0, 31_536_000, note="seconds, a year at most; 0: no runs"),
}
_DECIMAL = re.compile(r"[0-9]{1,30}(?:\.[0-9]{0,30})?|\.[0-9]{1,30}")
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0", "")
_MODES = ("dev", "production")
ENVIRONMENT_VARIABLES = tuple(variable for _, variable in _KEYS.values())


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, f"{path}."))
        else:
            out[path] = value
    return out


def _from_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            raw = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except ValueError as exc:  # an integer of more digits than Python converts (4300)
        raise ConfigError(f"{path}: not valid TOML: an integer is too long to read") from exc
    values: dict[str, Any] = {}
    if "topics" in raw:
        tables = raw.pop("topics")
        if not isinstance(tables, Mapping):
            raise ConfigError(f'{path}: topics must be tables, e.g. [topics."NAME"]')
        # `[topics]` also holds settings for every topic: scalars, not tables
        tables = dict(tables)
        for key in [k for k, v in tables.items() if f"topics.{k}" in _KEYS]:
            if not isinstance(tables[key], Mapping):
                raw[f"topics.{key}"] = tables.pop(key)
        try:
            values["topics"] = parse_topics(tables)
        except ValueError as e:
            raise ConfigError(f"{path}: {e}") from e
    if "snapshotters" in raw:
        tables = raw.pop("snapshotters")
        if not isinstance(tables, Mapping):
            raise ConfigError(f"{path}: snapshotters must be tables, e.g. [snapshotters.NAME]")
        values["snapshotter_tables"] = dict(tables)
    for key, value in _flatten(raw).items():
        if key not in _KEYS:
            known = ", ".join([*sorted(_KEYS), 'topics."NAME".ARGUMENT', "snapshotters.NAME.KEY"])
            raise ConfigError(f"{path}: unknown key {key!r} (known keys: {known})")
        if isinstance(value, list) and key == "bucket-eventing.buckets":
            value = ",".join(str(v) for v in value)
        if isinstance(value, bool) and key in _FLAGS:
            value = "true" if value else "false"
        if key in _NUMBERS:
            value = _number(key, value, f"{path}: ")  # a TOML number, or a string of one
        elif not isinstance(value, str):
            raise ConfigError(f"{path}: {key} must be a string, got {type(value).__name__}")
        values[_KEYS[key][0]] = value
    return values


def _parse_eventing_buckets(value: str) -> dict[tuple[uuid.UUID, str], str]:
    try:
        return parse_eventing_buckets(value)
    except EventingConfigError as e:
        raise ConfigError(f"bucket-eventing.buckets (RIPPLE_BUCKET_EVENTING_BUCKETS): {e}") from e


def _number(key: str, value: object, where: str = "") -> int | float:
    """A numeric setting's value (`_NUMBERS`), or `ConfigError` saying what it takes."""
    spec = _NUMBERS[key]
    problem = f"{where}{key} ({_KEYS[key][1]}) must be {spec.wanted()}"
    number: int | float
    if isinstance(value, bool):  # a TOML true is no number, though Python counts it one
        raise ConfigError(f"{problem}, not a boolean ({str(value).lower()})")
    if isinstance(value, int | float):
        number = value
    elif isinstance(value, str):
        text = value.strip()
        if spec.whole:
            try:  # ASCII digits only, their count bounded before converting
                number = whole_number(text, key, least=spec.least, most=spec.most)
            except NumberError:
                raise ConfigError(f"{problem}, got {_shown(text)}") from None
        elif _DECIMAL.fullmatch(text):
            number = float(text)
        else:
            raise ConfigError(f"{problem}, got {_shown(text)}")
    else:
        raise ConfigError(f"{problem}, got a TOML {type(value).__name__}")
    if spec.whole and isinstance(number, float):
        raise ConfigError(f"{problem}, got {number!r}")
    low = number > spec.least if spec.above else number >= spec.least
    if not (low and number <= spec.most):  # false for NaN too
        raise ConfigError(f"{problem}, got {_shown(number)}")
    return number if spec.whole else float(number)


def _shown(value: object) -> str:
    """A value as an error message shows it: short, whatever its size."""
    if isinstance(value, int) and abs(value) >= 10**30:
        return "a number of more than 30 digits"
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def _masked(url: str) -> str:
    """The URL with any password hidden, for error messages."""
    try:
        return sa.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return url


def load_settings(
    config_file: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Read settings: defaults, then the TOML file, then `RIPPLE_*` environment variables.

    `config_file=None` reads `ripple.toml` in the working directory if there is one; a
    named file that does not exist is an error.
    """
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        values.update(_from_file(path))
    elif Path(DEFAULT_CONFIG_FILE).is_file():
        values.update(_from_file(Path(DEFAULT_CONFIG_FILE)))
    for field_name, variable in _KEYS.values():
        if variable in env:
            values[field_name] = env[variable]

    known = {f.name for f in fields(Settings)}
    assert known >= set(values)
    typed: dict[str, Any] = {k: v.strip() if isinstance(v, str) else v for k, v in values.items()}
    if "data_dir" in typed:
        if not typed["data_dir"]:
            raise ConfigError("data-dir (RIPPLE_DATA_DIR) must not be empty")
        typed["data_dir"] = Path(typed["data_dir"])
    for key in _NUMBERS:
        name = _KEYS[key][0]
        if name in typed:
            typed[name] = _number(key, typed[name])
    for key in _FLAGS:
        name, variable = _KEYS[key]
        if name in typed:
            text = str(typed[name]).lower()
            if text not in _TRUE + _FALSE:
                raise ConfigError(f"{key} ({variable}) must be true or false, got {typed[name]!r}")
            typed[name] = text in _TRUE
    settings = Settings(**typed)
    if settings.mode not in _MODES:
        raise ConfigError(f"mode must be one of {', '.join(_MODES)}, got {settings.mode!r}")
    if settings.database_url:
        try:
            normalize_url(settings.database_url)
        except ValueError as e:
            raise ConfigError(
                f"database.url (RIPPLE_DATABASE_URL) {_masked(settings.database_url)!r}: {e}; "
                "use sqlite:///PATH or postgresql://USER@HOST:PORT/DATABASE"
            ) from e
    _parse_eventing_buckets(settings.bucket_eventing_buckets)
    settings.guard  # noqa: B018 - checks destinations.allow
    settings.snapshotters  # noqa: B018 - checks every [snapshotters.NAME] table
    if not settings.event_source or any(c.isspace() for c in settings.event_source):
        raise ConfigError("events.source (RIPPLE_EVENT_SOURCE) must be non-empty, without spaces")
    if not re.fullmatch(r"[a-z0-9-]+", settings.arn_partition):
        raise ConfigError(
            "events.arn-partition (RIPPLE_ARN_PARTITION) must be lower-case letters, digits "
            f"and hyphens (aws, aws-cn, …), got {settings.arn_partition!r}"
        )
    return settings
