"""`[snapshotters.NAME]` tables: defaults, every key, and the errors that name the key."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from ripple.snapshotter.keys import DEFAULT_TEMPLATE, KeyTemplate
from ripple.snapshotter.proto import PageMetadata
from ripple.snapshotter.settings import (
    DEFAULT_NAME,
    SnapshotterSettings,
    parse_snapshotter,
    parse_snapshotters,
    plain_text_refusal,
)


def parse(table: dict, name: str = "archive", data_dir: Path = Path("/data")):
    return parse_snapshotter(name, table, data_dir)


def test_default_snapshotter_is_always_present(tmp_path: Path) -> None:
    for raw in ({}, {"archive": {"format": "ndjson"}}):
        parsed = parse_snapshotters(raw, tmp_path)
        assert DEFAULT_NAME in parsed
        default = parsed[DEFAULT_NAME]
        assert default.name == "default"
        home = tmp_path / "snapshots" / "default"
        assert default.directory == home
        assert default.pages_path == home / "pages"
        assert default.index_location == str(home / "index.db")
        assert default.wal_path == home / "wal"
        assert default.dead_letter_path == home / "dead-letter"
    assert sorted(parse_snapshotters({"archive": {}}, tmp_path)) == ["archive", "default"]


def test_configured_default_replaces_the_embedded_one(tmp_path: Path) -> None:
    parsed = parse_snapshotters({"default": {"compression": "gzip"}}, tmp_path)
    assert list(parsed) == ["default"]
    assert parsed["default"].compression == "gzip"
    assert parsed["default"].directory == tmp_path / "snapshots" / "default"


def test_defaults_of_an_empty_table(tmp_path: Path) -> None:
    s = parse({}, data_dir=tmp_path)
    home = tmp_path / "snapshots" / "archive"
    assert s.name == "archive"
    assert s.directory == home
    assert (s.format, s.compression) == ("protobuf", "zstd")
    assert s.key_template == KeyTemplate(DEFAULT_TEMPLATE)
    assert dict(s.tags) == {}
    assert (s.max_events, s.max_size_bytes, s.max_buffered_bytes) == (
        1000,
        10 * 1024 * 1024,
        256 * 1024 * 1024,
    )
    assert s.max_age_seconds == 300
    assert s.storage == "filesystem"
    assert s.pages_path == home / "pages"
    assert (s.s3_endpoint, s.s3_bucket, s.s3_prefix, s.s3_region) == ("", "", "", "us-east-1")
    assert (s.s3_access_key, s.s3_secret_key) == ("", "")
    assert s.index == "sqlite"
    assert s.index_location == str(home / "index.db")
    assert s.index_ttl_days == 90
    assert s.wal_path == home / "wal"
    assert s.wal_segment_bytes == 64 * 1024 * 1024
    assert s.max_retries == 10
    assert (s.retry_base_seconds, s.retry_max_seconds) == (1, 300)
    assert s.dead_letter_path == home / "dead-letter"
    assert s.address == "127.0.0.1:50051"
    assert s.health_address == "127.0.0.1:9102"
    assert s.page_writers == 2
    assert (s.tls, s.tls_client_ca, s.allow_plain_text) == (None, None, False)
    assert (s.tls_ca, s.tls_client_cert, s.tls_client_key) == (None, None, None)
    assert not s.client_tls
    assert s == SnapshotterSettings.embedded(tmp_path, "archive")


def test_every_key_is_parsed(tmp_path: Path) -> None:
    table = {
        "format": "ndjson",
        "compression": "gzip",
        "key-template": "{writer_id}/{year}/{sequence}{ext}",
        "tags": {"env": "prod", "team": "storage"},
        "max-events": 50,
        "max-size-bytes": 2048,
        "max-age-seconds": 2.5,
        "max-buffered-bytes": 4096,
        "storage": "s3",
        "path": str(tmp_path / "elsewhere"),
        "s3-endpoint": "http://127.0.0.1:9000",
        "s3-bucket": "archive",
        "s3-prefix": "pages/",
        "s3-region": "eu-west-3",
        "s3-access-key": "AKIA-TEST",
        "s3-secret-key": "secret-test",
        "index": "redis",
        "index-url": "redis://127.0.0.1:6379/2",
        "index-ttl-days": 7,
        "wal-dir": str(tmp_path / "wal-here"),
        "wal-segment-bytes": 1 << 20,
        "max-retries": 3,
        "retry-base-seconds": 0.5,
        "retry-max-seconds": 30,
        "dead-letter-dir": str(tmp_path / "dl"),
        "address": "0.0.0.0:6000",
        "health-address": "0.0.0.0:6001",
        "page-writers": 8,
        "tls-cert": "/etc/ripple/snapshotter.pem",
        "tls-key": "/etc/ripple/snapshotter.key",
        "tls-client-ca": "/etc/ripple/publishers-ca.pem",
        "allow-plain-text": True,
        "tls-ca": "/etc/ripple/ca.pem",
        "tls-client-cert": "/etc/ripple/publisher.pem",
        "tls-client-key": "/etc/ripple/publisher.key",
    }
    s = parse(table, data_dir=tmp_path)
    assert (s.format, s.compression) == ("ndjson", "gzip")
    key = s.key_template.render(PageMetadata(writer_id="w", page_sequence=3, start_time=0), ".x")
    assert key == "w/1970/3.x"
    assert dict(s.tags) == {"env": "prod", "team": "storage"}
    assert (s.max_events, s.max_size_bytes, s.max_buffered_bytes) == (50, 2048, 4096)
    assert s.max_age_seconds == 2.5
    assert s.storage == "s3"
    assert s.pages_path == tmp_path / "elsewhere"
    assert s.s3_endpoint == "http://127.0.0.1:9000"
    assert (s.s3_bucket, s.s3_prefix, s.s3_region) == ("archive", "pages/", "eu-west-3")
    assert (s.s3_access_key, s.s3_secret_key) == ("AKIA-TEST", "secret-test")
    assert s.index == "redis"
    assert s.index_location == "redis://127.0.0.1:6379/2"
    assert s.index_ttl_days == 7
    assert s.wal_path == tmp_path / "wal-here"
    assert s.wal_segment_bytes == 1 << 20
    assert s.max_retries == 3
    assert (s.retry_base_seconds, s.retry_max_seconds) == (0.5, 30)
    assert s.dead_letter_path == tmp_path / "dl"
    assert (s.address, s.health_address) == ("0.0.0.0:6000", "0.0.0.0:6001")
    assert s.page_writers == 8
    assert s.tls == (Path("/etc/ripple/snapshotter.pem"), Path("/etc/ripple/snapshotter.key"))
    assert s.tls_client_ca == Path("/etc/ripple/publishers-ca.pem")
    assert s.allow_plain_text is True
    assert s.tls_ca == Path("/etc/ripple/ca.pem")
    assert s.tls_client_cert == Path("/etc/ripple/publisher.pem")
    assert s.tls_client_key == Path("/etc/ripple/publisher.key")
    # nothing was left at its default
    defaults = SnapshotterSettings.embedded(tmp_path, "archive")
    for field in table:
        attr = field.replace("-", "_")
        assert getattr(s, attr) != getattr(defaults, attr), field


def test_secrets_stay_out_of_repr() -> None:
    s = parse({"s3-access-key": "AKIA-VISIBLE", "s3-secret-key": "hunter2-secret"})
    assert "hunter2-secret" not in repr(s)
    assert "AKIA-VISIBLE" not in repr(s)


def test_number_types() -> None:
    s = parse({"max-events": 10, "max-age-seconds": 3, "retry-max-seconds": 1.25})
    assert s.max_events == 10
    assert isinstance(s.max_events, int)
    assert isinstance(s.max_age_seconds, float)
    assert s.retry_max_seconds == 1.25


def test_zero_is_allowed_where_it_means_never() -> None:
    s = parse({"index-ttl-days": 0, "max-retries": 0})
    assert (s.index_ttl_days, s.max_retries) == (0, 0)


def test_every_format_compression_storage_and_index_is_accepted() -> None:
    for page_format in ("protobuf", "ndjson"):
        assert parse({"format": page_format}).format == page_format
    for compression in ("none", "gzip", "zstd"):
        assert parse({"compression": compression}).compression == compression
    assert parse({"storage": "filesystem"}).storage == "filesystem"
    assert parse({"storage": "s3", "s3-bucket": "b"}).s3_bucket == "b"
    assert parse({"index": "sqlite", "index-url": "/tmp/i.db"}).index_location == "/tmp/i.db"
    assert parse({"index": "redis", "index-url": "rediss://h:6380/0"}).index == "redis"
    for url in ("postgresql://ripple@db/ripple", "postgres://ripple@db/ripple"):
        assert parse({"index": "postgresql", "index-url": url}).index_location == url


def error(table: dict, name: str = "archive") -> str:
    with pytest.raises(ValueError, match=r"^snapshotters\.") as caught:
        parse(table, name=name)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_unknown_key() -> None:
    message = error({"max_events": 10})  # underscores are not the spelling
    assert message.startswith("snapshotters.archive:")
    assert "'max_events'" in message
    assert "max-events" in message  # the known keys are listed


@pytest.mark.parametrize(
    ("table", "named", "value"),
    [
        ({"format": "avro"}, "snapshotters.archive.format", "avro"),
        ({"format": "PROTOBUF"}, "snapshotters.archive.format", "PROTOBUF"),
        ({"compression": "lz4"}, "snapshotters.archive.compression", "lz4"),
        ({"storage": "gcs"}, "snapshotters.archive.storage", "gcs"),
        ({"index": "mysql"}, "snapshotters.archive.index", "mysql"),
    ],
)
def test_bad_choices(table: dict, named: str, value: str) -> None:
    message = error(table)
    assert message.startswith(named)
    assert repr(value) in message


@pytest.mark.parametrize(
    "key",
    [
        "max-events",
        "max-size-bytes",
        "max-age-seconds",
        "max-buffered-bytes",
        "wal-segment-bytes",
        "retry-base-seconds",
        "retry-max-seconds",
        "page-writers",
        "index-ttl-days",
        "max-retries",
    ],
)
def test_non_positive_numbers(key: str) -> None:
    assert error({key: -1}).startswith(f"snapshotters.archive.{key} must be")
    if key not in ("index-ttl-days", "max-retries"):
        assert error({key: 0}).startswith(f"snapshotters.archive.{key} must be more than 0")
    for wrong in ("many", True, [1], {"a": 1}, math.nan):
        assert error({key: wrong}).startswith(f"snapshotters.archive.{key} must be a number")


@pytest.mark.parametrize("key", ["max-events", "page-writers", "wal-segment-bytes"])
def test_whole_numbers_are_not_truncated(key: str) -> None:
    assert error({key: 1.5}).startswith(f"snapshotters.archive.{key} must be a whole number")
    assert error({key: math.inf}).startswith(f"snapshotters.archive.{key} must be a number")
    assert getattr(parse({key: 4.0}), key.replace("-", "_")) == 4


@pytest.mark.parametrize("key", ["format", "s3-bucket", "address", "path", "key-template"])
def test_strings_must_be_strings(key: str) -> None:
    assert error({key: 5}).startswith(f"snapshotters.archive.{key} must be a string")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"tls-cert": "c.pem"}, r"tls-cert is set but snapshotters\.archive\.tls-key is not"),
        ({"tls-key": "k.pem"}, r"tls-key is set but snapshotters\.archive\.tls-cert is not"),
        ({"tls-client-cert": "c.pem"}, r"tls-client-cert is set but .*tls-client-key is not"),
        ({"tls-client-key": "k.pem"}, r"tls-client-key is set but .*tls-client-cert is not"),
        ({"tls-client-ca": "ca.pem"}, r"tls-client-ca is set but tls-cert is not"),
        ({"allow-plain-text": "yes"}, r"allow-plain-text must be true or false"),
    ],
)
def test_tls_settings_that_cannot_work(table: dict, message: str) -> None:
    assert re.match(rf"snapshotters\.archive\.{message}", error(table))


@pytest.mark.parametrize(
    ("what", "client_tls"),
    [
        ({"tls-cert": "c.pem", "tls-key": "k.pem"}, True),  # the server's certificate
        ({"tls-ca": "ca.pem"}, True),
        ({"tls-client-cert": "c.pem", "tls-client-key": "k.pem"}, True),
        ({"tls-cert": "", "tls-key": ""}, False),  # empty: not set
        ({}, False),
    ],
)
def test_which_settings_make_a_client_use_tls(what: dict, client_tls: bool) -> None:
    assert parse(what).client_tls is client_tls


@pytest.mark.parametrize(
    ("address", "health_address", "refused"),
    [
        ("0.0.0.0:50051", "127.0.0.1:9102", "snapshotters.archive.address 0.0.0.0:50051"),
        ("[::1]:50051", ":9102", "snapshotters.archive.health-address :9102"),
        (
            "snap.example.test:1",
            "localhost:9102",
            "snapshotters.archive.address snap.example.test:1",
        ),
        ("127.0.0.1:50051", "[::1]:9102", None),
    ],
)
def test_production_refuses_plain_text_off_loopback(
    address: str, health_address: str, refused: str | None
) -> None:
    listening = {"address": address, "health_address": health_address}
    problem = plain_text_refusal(parse({}), production=True, **listening)
    if refused is None:
        assert problem is None
    else:
        assert problem is not None
        assert problem.startswith(f"mode is production and {refused} is off loopback: set ")
        assert "snapshotters.archive.tls-cert and tls-key" in problem
        assert "snapshotters.archive.allow-plain-text = true" in problem
    assert plain_text_refusal(parse({}), production=False, **listening) is None
    with_tls = parse({"tls-cert": "c.pem", "tls-key": "k.pem"})
    assert plain_text_refusal(with_tls, production=True, **listening) is None


def test_allow_plain_text_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    allowed = parse({"allow-plain-text": True})
    listening = {"address": "0.0.0.0:50051", "health_address": "0.0.0.0:9102"}
    assert plain_text_refusal(allowed, production=True, **listening) is None
    assert "serving plain text on 0.0.0.0:50051 (snapshotters.archive.address)" in caplog.text
    assert "snapshotters.archive.allow-plain-text says a proxy" in caplog.text


def test_s3_needs_a_bucket() -> None:
    for table in ({"storage": "s3"}, {"storage": "s3", "s3-bucket": ""}):
        message = error(table)
        assert message.startswith("snapshotters.archive")
        assert "s3-bucket" in message


@pytest.mark.parametrize(
    ("index", "url"),
    [
        ("redis", None),
        ("redis", "postgresql://db/ripple"),
        ("redis", "/var/lib/index.db"),
        ("postgresql", None),
        ("postgresql", "redis://127.0.0.1:6379/0"),
        ("postgresql", "sqlite:///index.db"),
    ],
)
def test_remote_index_needs_a_matching_url(index: str, url: str | None) -> None:
    table = {"index": index} if url is None else {"index": index, "index-url": url}
    message = error(table)
    assert message.startswith("snapshotters.archive")
    assert "index-url" in message
    assert f'index = "{index}"' in message


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("{writer_id}/{hour}/{sequence}", "{hour}"),
        ("{writer_id}/{date}", "{sequence}"),
        ("/{writer_id}/{sequence}", "relative"),
        ("{writer_id}/../{sequence}", "'..'"),
    ],
)
def test_bad_key_template(template: str, problem: str) -> None:
    message = error({"key-template": template})
    assert message.startswith("snapshotters.archive.key-template")
    assert problem in message


@pytest.mark.parametrize("tags", ["env=prod", ["env", "prod"], {"env": 1}, {"a": "b", "c": None}])
def test_tags_must_be_a_table_of_strings(tags: object) -> None:
    assert error({"tags": tags}).startswith("snapshotters.archive.tags must be a table of strings")


@pytest.mark.parametrize("name", ["", "a.b", "a/b", "a b", "../x"])
def test_bad_names(name: str) -> None:
    assert error({}, name=name).startswith(f"snapshotters.{name}:")


def test_names_with_dashes_and_underscores(tmp_path: Path) -> None:
    s = parse({}, name="cold_archive-2", data_dir=tmp_path)
    assert s.directory == tmp_path / "snapshots" / "cold_archive-2"


def test_a_snapshotter_must_be_a_table(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^snapshotters\.archive must be a table"):
        parse_snapshotters({"archive": "ndjson"}, tmp_path)


def test_errors_name_the_snapshotter(tmp_path: Path) -> None:
    raw = {"good": {}, "broken": {"compression": "brotli"}}
    with pytest.raises(ValueError, match=r"^snapshotters\.broken\.compression"):
        parse_snapshotters(raw, tmp_path)
