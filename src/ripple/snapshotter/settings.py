"""A snapshotter's configuration: a `[snapshotters.NAME]` table of ripple.toml.

Every key is optional; the embedded default (name `default`) keeps pages, index, write-ahead
log and dead letters under `<data-dir>/snapshots/<name>/`. A wrong value is `ValueError`
with one line naming `snapshotters.NAME.KEY`.

Every key, its default and its meaning: docs/snapshotter.md, "Configuration".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, cast

from ripple.snapshotter.formats import COMPRESSIONS, FORMATS, Compression, Format
from ripple.snapshotter.keys import DEFAULT_TEMPLATE, KeyTemplate
from ripple.tls import plain_text_problem

__all__ = ["DEFAULT_NAME", "SnapshotterSettings", "parse_snapshotters", "plain_text_refusal"]

DEFAULT_NAME = "default"
STORAGES = ("filesystem", "s3")
INDEXES = ("sqlite", "redis", "postgresql")


@dataclass(frozen=True)
class SnapshotterSettings:
    name: str
    directory: Path  # <data-dir>/snapshots/<name>: the defaults of the paths below
    format: Format = "protobuf"
    compression: Compression = "zstd"
    key_template: KeyTemplate = field(default_factory=lambda: KeyTemplate(DEFAULT_TEMPLATE))
    tags: Mapping[str, str] = field(default_factory=dict)
    max_events: int = 1000
    max_size_bytes: int = 10 * 1024 * 1024
    max_age_seconds: float = 300.0
    max_buffered_bytes: int = 256 * 1024 * 1024
    max_pending_bytes: int = 1024 * 1024 * 1024
    storage: str = "filesystem"
    path: Path | None = None
    s3_endpoint: str = ""
    s3_bucket: str = ""
    s3_prefix: str = ""
    s3_region: str = "us-east-1"
    s3_access_key: str = field(default="", repr=False)
    s3_secret_key: str = field(default="", repr=False)
    index: str = "sqlite"
    index_url: str = ""
    index_ttl_days: int = 90
    wal_dir: Path | None = None
    wal_segment_bytes: int = 64 * 1024 * 1024
    max_retries: int = 10
    retry_base_seconds: float = 1.0
    retry_max_seconds: float = 300.0
    dead_letter_dir: Path | None = None
    address: str = "127.0.0.1:50051"
    health_address: str = "127.0.0.1:9102"
    page_writers: int = 2
    # TLS of `ripple snapshot serve` (its gRPC API and health) and of the clients of it
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    allow_plain_text: bool = False
    tls_ca: Path | None = None
    tls_client_cert: Path | None = None
    tls_client_key: Path | None = None

    @classmethod
    def embedded(
        cls, data_dir: Path, name: str = DEFAULT_NAME, **values: Any
    ) -> SnapshotterSettings:
        """The settings of snapshotter `name` under `data_dir`, with `values` (field names)."""
        return cls(name=name, directory=Path(data_dir) / "snapshots" / name, **values)

    def setting(self, key: str) -> str:
        """How errors name `key` of this snapshotter: `snapshotters.NAME.KEY`."""
        return f"snapshotters.{self.name}.{key}"

    @property
    def tls(self) -> tuple[Path, Path] | None:
        """The certificate and key the server listens with, or None for plain text."""
        return (self.tls_cert, self.tls_key) if self.tls_cert and self.tls_key else None

    @property
    def client_tls(self) -> bool:
        """Whether a client of this snapshotter connects over TLS: its server has a
        certificate, or the client is given a CA or a certificate of its own."""
        return bool(self.tls_cert or self.tls_ca or self.tls_client_cert)

    @property
    def pages_path(self) -> Path:
        return self.path or self.directory / "pages"

    @property
    def index_location(self) -> str:
        return self.index_url or str(self.directory / "index.db")

    @property
    def wal_path(self) -> Path:
        return self.wal_dir or self.directory / "wal"

    @property
    def dead_letter_path(self) -> Path:
        return self.dead_letter_dir or self.directory / "dead-letter"


_INTS = {"max-events", "max-size-bytes", "max-buffered-bytes", "max-pending-bytes",
         "index-ttl-days", "wal-segment-bytes", "max-retries", "page-writers"}  # fmt: skip
_FLOATS = {"max-age-seconds", "retry-base-seconds", "retry-max-seconds"}
_PATHS = {"path", "wal-dir", "dead-letter-dir", "tls-cert", "tls-key", "tls-client-ca", "tls-ca",
          "tls-client-cert", "tls-client-key"}  # fmt: skip
_FLAGS = {"allow-plain-text"}
_NONNEGATIVE = {"index-ttl-days", "max-retries"}


def parse_snapshotter(name: str, table: Mapping[str, Any], data_dir: Path) -> SnapshotterSettings:
    """One `[snapshotters.NAME]` table, checked (`ValueError` naming the key at fault)."""
    where = f"snapshotters.{name}"
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"{where}: a snapshotter name is letters, digits, '-' and '_'")
    known = {f.name.replace("_", "-") for f in fields(SnapshotterSettings)} - {"name", "directory"}
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in known:
            raise ValueError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(known))})")
        attr = key.replace("-", "_")
        if key == "tags":
            if not isinstance(value, Mapping) or not all(
                isinstance(v, str) for v in value.values()
            ):
                raise ValueError(f'{where}.tags must be a table of strings, e.g. {{env = "prod"}}')
            values[attr] = dict(value)
        elif key in _INTS:
            values[attr] = _number(where, key, value, int)
        elif key in _FLOATS:
            values[attr] = _number(where, key, value, float)
        elif key in _FLAGS:
            if not isinstance(value, bool):
                raise ValueError(f"{where}.{key} must be true or false, got {value!r}")
            values[attr] = value
        elif not isinstance(value, str):
            raise ValueError(f"{where}.{key} must be a string, got {type(value).__name__}")
        elif key in _PATHS:
            values[attr] = Path(value) if value or not key.startswith("tls-") else None
        elif key == "key-template":
            try:
                values[attr] = KeyTemplate(value)
            except ValueError as e:
                raise ValueError(f"{where}.{key}: {e}") from None
        else:
            values[attr] = value
    _choice(where, "format", values.get("format", "protobuf"), FORMATS)
    _choice(where, "compression", values.get("compression", "zstd"), COMPRESSIONS)
    _choice(where, "storage", values.get("storage", "filesystem"), STORAGES)
    _choice(where, "index", values.get("index", "sqlite"), INDEXES)
    settings = SnapshotterSettings.embedded(data_dir, name, **values)
    if settings.storage == "s3" and not settings.s3_bucket:
        raise ValueError(f'{where}: storage = "s3" needs s3-bucket')
    index_url = settings.index_url
    if settings.index == "redis" and not index_url.startswith(("redis://", "rediss://")):
        raise ValueError(f'{where}: index = "redis" needs index-url = "redis://HOST:PORT/DB"')
    if settings.index == "postgresql" and not index_url.startswith(("postgresql", "postgres://")):
        raise ValueError(
            f'{where}: index = "postgresql" needs index-url = "postgresql://USER@HOST/DATABASE"'
        )
    _pair(where, ("tls-cert", settings.tls_cert), ("tls-key", settings.tls_key))
    _pair(
        where,
        ("tls-client-cert", settings.tls_client_cert),
        ("tls-client-key", settings.tls_client_key),
    )
    if settings.tls_client_ca and not settings.tls_cert:
        raise ValueError(
            f"{where}.tls-client-ca is set but tls-cert is not: client certificates are "
            "asked for only over TLS (set tls-cert and tls-key)"
        )
    return settings


def _pair(where: str, cert: tuple[str, Path | None], key: tuple[str, Path | None]) -> None:
    """A certificate and its key are both set, or neither."""
    if bool(cert[1]) != bool(key[1]):
        given, missing = (cert[0], key[0]) if cert[1] else (key[0], cert[0])
        raise ValueError(
            f"{where}.{given} is set but {where}.{missing} is not: TLS needs both "
            f"({cert[0]} and {key[0]})"
        )


def _number(where: str, key: str, value: Any, kind: type[int] | type[float]) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{where}.{key} must be a number, got {type(value).__name__}")
    try:
        number = kind(value)
    except (ValueError, OverflowError):  # int(inf) overflows
        raise ValueError(f"{where}.{key} must be a number, got {value!r}") from None
    if number != number:  # NaN passes every comparison below
        raise ValueError(f"{where}.{key} must be a number, got {value!r}")
    if kind is int and isinstance(value, float) and number != value:  # int() truncates 1.5
        raise ValueError(f"{where}.{key} must be a whole number, got {value!r}")
    if number < 0 or (number == 0 and key not in _NONNEGATIVE):
        least = "0 or more" if key in _NONNEGATIVE else "more than 0"
        raise ValueError(f"{where}.{key} must be {least}, got {value!r}")
    return number


def _choice(where: str, key: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{where}.{key} is {value!r}; use one of {', '.join(allowed)}")


def plain_text_refusal(
    settings: SnapshotterSettings, *, production: bool, address: str, health_address: str
) -> str | None:
    """Why `ripple snapshot serve` may not listen on `address` (gRPC) and `health_address`
    without TLS: production mode and one of them off loopback, unless `allow-plain-text`
    says a proxy in front terminates TLS (logged). None: it may."""
    if settings.tls is not None:
        return None
    for key, listening in (("address", address), ("health-address", health_address)):
        problem = plain_text_problem(
            settings.setting(key),
            listening,
            production=production,
            allowed_by=settings.setting("allow-plain-text") if settings.allow_plain_text else "",
            remedy=f"set {settings.setting('tls-cert')} and tls-key to serve TLS, or "
            f"{settings.setting('allow-plain-text')} = true behind a proxy that terminates TLS",
        )
        if problem is not None:
            return problem
    return None


def parse_snapshotters(raw: Mapping[str, Any], data_dir: Path) -> dict[str, SnapshotterSettings]:
    """Every `[snapshotters.NAME]` table, plus the embedded `default` if not configured."""
    parsed: dict[str, SnapshotterSettings] = {}
    for name, table in raw.items():
        if not isinstance(table, Mapping):
            raise ValueError(
                f'snapshotters.{name} must be a table, e.g. [snapshotters.{name}] format = "ndjson"'
            )
        parsed[name] = parse_snapshotter(name, cast(Mapping[str, Any], table), data_dir)
    parsed.setdefault(DEFAULT_NAME, SnapshotterSettings.embedded(data_dir))
    return parsed
