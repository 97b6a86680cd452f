"""Configuration: defaults, `ripple.toml`, `RIPPLE_*` overrides, and one-line errors that
name the key at fault."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from ripple.config import (
    ENVIRONMENT_VARIABLES,
    MAX_AUTOMATIC_WORKERS,
    ConfigError,
    Settings,
    load_settings,
    usable_cores,
)

PROJECT = "4d0452d9-395d-498d-927f-a54a6544764e"
PHOTOS = f"{PROJECT}:photos:projects/my-team/topics/photos"
LOGS = f"{PROJECT}:logs:projects/my-team/topics/logs"
EVENTING_PREFIX = "bucket-eventing.buckets (RIPPLE_BUCKET_EVENTING_BUCKETS): "

FULL_TOML = f"""\
data-dir = "/var/lib/ripple"
mode = "production"

[database]
url = "postgresql://ripple@db.example:5432/ripple"

[s3]
address = "0.0.0.0:9100"
region = "eu-west-1"

[spark]
master = "spark://spark.example:7077"

[bucket-eventing]
buckets = "{PHOTOS},{LOGS}"

[destinations]
allow = "hooks.example"

[metrics]
address = "127.0.0.1:9500"
"""

FULL_SETTINGS = Settings(
    data_dir=Path("/var/lib/ripple"),
    database_url="postgresql://ripple@db.example:5432/ripple",
    s3_address="0.0.0.0:9100",
    region="eu-west-1",
    spark_master="spark://spark.example:7077",
    bucket_eventing_buckets=f"{PHOTOS},{LOGS}",
    mode="production",
    destinations_allow="hooks.example",
    metrics_address="127.0.0.1:9500",
)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_file_or_env() -> None:
    settings = load_settings(environ={})
    assert settings == Settings()
    assert settings.data_dir == Path(".ripple")
    assert settings.database_url == ""
    assert settings.s3_address == "127.0.0.1:9000"
    assert settings.spark_master == "local[*]"
    assert settings.mode == "dev"
    assert settings.effective_database_url == "sqlite:///.ripple/metabase.db"


def test_defaults_ignore_unrelated_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENVIRONMENT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RIPPLE_UNKNOWN_THING", "x")
    assert load_settings() == Settings()


def test_effective_database_url_follows_data_dir() -> None:
    settings = load_settings(environ={"RIPPLE_DATA_DIR": "/srv/ripple"})
    assert settings.effective_database_url == "sqlite:////srv/ripple/metabase.db"


def test_configured_database_url_wins() -> None:
    url = "postgresql://u@h/d"
    settings = load_settings(environ={"RIPPLE_DATABASE_URL": url})
    assert settings.effective_database_url == url


def test_default_file_in_working_directory(tmp_path: Path) -> None:
    _write(tmp_path / "ripple.toml", FULL_TOML)
    assert load_settings(environ={}) == FULL_SETTINGS


def test_named_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "elsewhere.toml", FULL_TOML)
    # A ripple.toml in the working directory is not read when a file is named.
    _write(tmp_path / "ripple.toml", 'mode = "dev"\n')
    assert load_settings(path, environ={}) == FULL_SETTINGS


def test_dotted_keys_are_the_same_as_tables(tmp_path: Path) -> None:
    _write(tmp_path / "ripple.toml", 'database.url = "sqlite:///x.db"\ns3.region = "r1"\n')
    settings = load_settings(environ={})
    assert settings.database_url == "sqlite:///x.db"
    assert settings.region == "r1"


def test_env_overrides_file(tmp_path: Path) -> None:
    _write(tmp_path / "ripple.toml", FULL_TOML)
    settings = load_settings(
        environ={
            "RIPPLE_MODE": "dev",
            "RIPPLE_DATABASE_URL": "sqlite:///other.db",
            "RIPPLE_DATA_DIR": "data",
        }
    )
    assert settings.mode == "dev"
    assert settings.database_url == "sqlite:///other.db"
    assert settings.data_dir == Path("data")
    # Keys without a variable keep the file's value.
    assert settings.s3_address == "0.0.0.0:9100"
    assert settings.region == "eu-west-1"


def test_env_from_process_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path / "ripple.toml", 's3.address = "1.2.3.4:1"\n')
    monkeypatch.setenv("RIPPLE_S3_ADDRESS", "5.6.7.8:2")
    assert load_settings().s3_address == "5.6.7.8:2"


def test_values_are_stripped() -> None:
    settings = load_settings(environ={"RIPPLE_MODE": " production ", "RIPPLE_REGION": " r1\n"})
    assert settings.mode == "production"
    assert settings.region == "r1"


def test_bucket_eventing_buckets_as_list(tmp_path: Path) -> None:
    _write(tmp_path / "ripple.toml", f'[bucket-eventing]\nbuckets = ["{PHOTOS}", "{LOGS}"]\n')
    settings = load_settings(environ={})
    assert settings.bucket_eventing_buckets == f"{PHOTOS},{LOGS}"
    assert settings.eventing_buckets == {
        (uuid.UUID(PROJECT), "photos"): "projects/my-team/topics/photos",
        (uuid.UUID(PROJECT), "logs"): "projects/my-team/topics/logs",
    }


def test_bucket_eventing_buckets_as_string(tmp_path: Path) -> None:
    _write(tmp_path / "ripple.toml", f'bucket-eventing.buckets = " {PHOTOS} , {LOGS} "\n')
    assert load_settings(environ={}).eventing_buckets == {
        (uuid.UUID(PROJECT), "photos"): "projects/my-team/topics/photos",
        (uuid.UUID(PROJECT), "logs"): "projects/my-team/topics/logs",
    }


def test_bucket_eventing_buckets_from_env() -> None:
    settings = load_settings(environ={"RIPPLE_BUCKET_EVENTING_BUCKETS": PHOTOS})
    assert settings.eventing_buckets == {
        (uuid.UUID(PROJECT), "photos"): "projects/my-team/topics/photos"
    }


def test_bucket_eventing_buckets_env_overrides_list(tmp_path: Path) -> None:
    _write(tmp_path / "ripple.toml", f'[bucket-eventing]\nbuckets = ["{PHOTOS}"]\n')
    settings = load_settings(environ={"RIPPLE_BUCKET_EVENTING_BUCKETS": LOGS})
    assert settings.bucket_eventing_buckets == LOGS
    assert list(settings.eventing_buckets) == [(uuid.UUID(PROJECT), "logs")]


def test_bucket_eventing_buckets_empty_env_turns_the_list_off(tmp_path: Path) -> None:
    _write(tmp_path / "ripple.toml", f'[bucket-eventing]\nbuckets = ["{PHOTOS}"]\n')
    assert load_settings(environ={"RIPPLE_BUCKET_EVENTING_BUCKETS": ""}).eventing_buckets == {}


def test_bucket_eventing_buckets_empty_by_default() -> None:
    settings = load_settings(environ={})
    assert settings.bucket_eventing_buckets == ""
    assert settings.eventing_buckets == {}


# --- errors ---------------------------------------------------------------------------


def _error(*args: object, **kwargs: object) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(*args, **kwargs)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message.strip()
    return message


def test_unknown_top_level_key(tmp_path: Path) -> None:
    _write(tmp_path / "ripple.toml", 'colour = "blue"\n')
    message = _error(environ={})
    assert "'colour'" in message
    assert "ripple.toml" in message


def test_unknown_nested_key(tmp_path: Path) -> None:
    _write(tmp_path / "ripple.toml", '[database]\nurl = "sqlite:///x.db"\npassword = "p"\n')
    message = _error(environ={})
    assert "'database.password'" in message


def test_unknown_table(tmp_path: Path) -> None:
    _write(tmp_path / "ripple.toml", "[kafka]\nbrokers = 'b:9092'\n")
    assert "'kafka.brokers'" in _error(environ={})


@pytest.mark.parametrize(
    ("toml", "key", "type_name"),
    [
        ("[s3]\naddress = 9000\n", "s3.address", "int"),
        ("mode = true\n", "mode", "bool"),
        ('data-dir = ["a", "b"]\n', "data-dir", "list"),
        ("[database]\nurl = 1.5\n", "database.url", "float"),
    ],
)
def test_wrong_type(tmp_path: Path, toml: str, key: str, type_name: str) -> None:
    _write(tmp_path / "ripple.toml", toml)
    message = _error(environ={})
    assert key in message
    assert type_name in message


def test_bad_toml(tmp_path: Path) -> None:
    path = _write(tmp_path / "ripple.toml", "mode = \n")
    message = _error(environ={})
    assert str(path.name) in message
    assert "not valid TOML" in message


def test_missing_named_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    message = _error(missing, environ={})
    assert str(missing) in message
    assert "does not exist" in message


def test_named_directory_is_not_a_file(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    assert "conf.d" in _error(tmp_path / "conf.d", environ={})


@pytest.mark.parametrize("source", ["file", "env"])
def test_bad_mode(tmp_path: Path, source: str) -> None:
    if source == "file":
        _write(tmp_path / "ripple.toml", 'mode = "staging"\n')
        environ = {}
    else:
        environ = {"RIPPLE_MODE": "staging"}
    message = _error(environ=environ)
    assert "mode" in message
    assert "'staging'" in message
    assert "dev" in message
    assert "production" in message


@pytest.mark.parametrize("url", ["mysql://u@h/d", "redis://localhost", "not a url"])
def test_bad_database_url(url: str) -> None:
    message = _error(environ={"RIPPLE_DATABASE_URL": url})
    assert "database.url" in message
    assert "RIPPLE_DATABASE_URL" in message
    assert repr(url) in message


def test_bad_database_url_in_file(tmp_path: Path) -> None:
    _write(tmp_path / "ripple.toml", '[database]\nurl = "mysql://u@h/d"\n')
    message = _error(environ={})
    assert "database.url" in message
    assert "'mysql://u@h/d'" in message


def test_empty_data_dir() -> None:
    message = _error(environ={"RIPPLE_DATA_DIR": "  "})
    assert "data-dir" in message
    assert "RIPPLE_DATA_DIR" in message


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("photos", "'photos' has 1 part, not 3"),
        ("not-a-uuid:photos:projects/my-team/topics/t1", "project id 'not-a-uuid' is not a UUID"),
        (f"{PROJECT}:Photos:projects/my-team/topics/t1", "bucket name 'Photos' must"),
        (f"{PROJECT}:photos:my-topic", "topic 'my-topic' is not of the form"),
        (f"{PHOTOS},{PHOTOS}", f"{PHOTOS!r} and {PHOTOS!r} both name bucket 'photos'"),
    ],
)
def test_bad_bucket_eventing_buckets_in_env(value: str, says: str) -> None:
    message = _error(environ={"RIPPLE_BUCKET_EVENTING_BUCKETS": value})
    assert message.startswith(EVENTING_PREFIX)
    assert says in message


def test_bad_bucket_eventing_buckets_in_file_list(tmp_path: Path) -> None:
    bad = f"{PROJECT}:logs:projects/my-team/topics/goog-logs"
    _write(tmp_path / "ripple.toml", f'[bucket-eventing]\nbuckets = ["{PHOTOS}", "{bad}"]\n')
    message = _error(environ={})
    assert message.startswith(f"ripple.toml: {EVENTING_PREFIX}")  # the file's list
    assert f"{bad!r}: topic id 'goog-logs'" in message


def test_good_env_hides_a_bad_file_list(tmp_path: Path) -> None:
    _write(tmp_path / "ripple.toml", '[bucket-eventing]\nbuckets = ["photos"]\n')
    settings = load_settings(environ={"RIPPLE_BUCKET_EVENTING_BUCKETS": PHOTOS})
    assert list(settings.eventing_buckets) == [(uuid.UUID(PROJECT), "photos")]


def test_eventing_buckets_of_settings_built_by_hand() -> None:
    with pytest.raises(ConfigError) as info:
        _ = Settings(bucket_eventing_buckets="photos,logs").eventing_buckets
    assert str(info.value).startswith(EVENTING_PREFIX)


def test_topics_tables(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "ripple.toml",
        '[topics."projects/my-team/topics/photos"]\n'
        'push-endpoint = "https://hooks.example/s3"\n'
        "time-to-live = 600\n"
        "[topics.audit]\n"
        'push-endpoint = "none"\n',
    )
    settings = load_settings(config, environ={})
    photos = settings.topics["projects/my-team/topics/photos"]
    assert (photos.push_endpoint, dict(photos.arguments)) == (
        "https://hooks.example/s3",
        {"time-to-live": "600"},
    )
    assert photos.kind == "webhook"
    assert settings.topics["audit"].kind == "pull"


def test_a_wrong_topic_is_one_line_naming_file_and_topic(tmp_path: Path) -> None:
    config = _write(tmp_path / "ripple.toml", '[topics.audit]\npush-endpoint = "ftp://x"\n')
    with pytest.raises(ConfigError) as raised:
        load_settings(config, environ={})
    message = str(raised.value)
    assert message.startswith(
        f"{config}: topics.'audit': push-endpoint: endpoint 'ftp://x' has 'ftp'"
    )
    assert "\n" not in message


def test_event_source_and_arn_partition(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "ripple.toml", '[events]\nsource = "minio:s3"\narn-partition = "aws-cn"\n'
    )
    settings = load_settings(config, environ={"RIPPLE_REGION": "cn-north-1"})
    events = settings.event_settings
    assert (events.event_source, events.arn_partition, events.region) == (
        "minio:s3",
        "aws-cn",
        "cn-north-1",
    )
    assert Settings().event_settings.event_source == "ripple:s3"
    with pytest.raises(ConfigError, match=r"events.arn-partition \(RIPPLE_ARN_PARTITION\) must"):
        load_settings(environ={"RIPPLE_ARN_PARTITION": "aws:x"})
    with pytest.raises(ConfigError, match=r"events.source \(RIPPLE_EVENT_SOURCE\) must"):
        load_settings(environ={"RIPPLE_EVENT_SOURCE": "my source"})


# --- numbers --------------------------------------------------------------------------


def test_numeric_settings_take_toml_numbers(tmp_path: Path) -> None:
    """As docs/configuration.md writes them: TOML integers, and a float for the rate."""
    config = _write(
        tmp_path / "ripple.toml",
        "[s3]\ndelete-rate = 100\ndelete-burst = 50\nmax-rename-keys = 10\n"
        "[lifecycle]\ninterval = 0\n",
    )
    settings = load_settings(config, environ={})
    assert (settings.delete_rate, settings.delete_burst) == (100.0, 50)
    assert (settings.max_rename_keys, settings.lifecycle_interval) == (10, 0)
    assert isinstance(settings.delete_rate, float)
    _write(config, "[s3]\ndelete-rate = 2.5\n")
    assert load_settings(config, environ={}).delete_rate == 2.5


def test_numeric_settings_from_strings_and_variables(tmp_path: Path) -> None:
    config = _write(tmp_path / "conf.toml", '[s3]\ndelete-rate = "0.5"\n')
    settings = load_settings(
        config,
        environ={"RIPPLE_S3_DELETE_BURST": " 7 ", "RIPPLE_LIFECYCLE_INTERVAL": "60"},
    )
    assert (settings.delete_rate, settings.delete_burst, settings.lifecycle_interval) == (
        0.5,
        7,
        60,
    )
    assert load_settings(environ={"RIPPLE_S3_DELETE_RATE": "250"}).delete_rate == 250.0
    defaults = load_settings(environ={})
    assert (defaults.delete_rate, defaults.delete_burst) == (100.0, 200)
    assert (defaults.max_rename_keys, defaults.lifecycle_interval) == (1000, 3600)


@pytest.mark.parametrize(
    ("toml", "key", "says"),
    [
        ("[s3]\ndelete-rate = true\n", "s3.delete-rate", "not a boolean (true)"),
        ("[lifecycle]\ninterval = false\n", "lifecycle.interval", "not a boolean (false)"),
        ("[s3]\ndelete-rate = 0\n", "s3.delete-rate", "got 0"),
        ("[s3]\ndelete-rate = -1.5\n", "s3.delete-rate", "got -1.5"),
        ("[s3]\ndelete-rate = inf\n", "s3.delete-rate", "got inf"),
        ("[s3]\ndelete-rate = nan\n", "s3.delete-rate", "got nan"),
        ("[s3]\ndelete-burst = 2.5\n", "s3.delete-burst", "got 2.5"),
        ("[s3]\ndelete-burst = 0\n", "s3.delete-burst", "from 1 to"),
        ("[s3]\nmax-rename-keys = 1000001\n", "s3.max-rename-keys", "got 1000001"),
        ("[s3]\nmax-rename-keys = [1]\n", "s3.max-rename-keys", "got a TOML list"),
        ("[lifecycle]\ninterval = -1\n", "lifecycle.interval", "got -1"),
        ("[lifecycle]\ninterval = 31536001\n", "lifecycle.interval", "a year at most"),
        # huge integers: bounded, never an overflow where the value is used
        (f"[s3]\ndelete-rate = {'9' * 400}\n", "s3.delete-rate", "more than 30 digits"),
        (f"[lifecycle]\ninterval = {10**30}\n", "lifecycle.interval", "more than 30 digits"),
        ('[s3]\ndelete-rate = "fast"\n', "s3.delete-rate", "got 'fast'"),
    ],
)
def test_bad_numbers_in_the_file(tmp_path: Path, toml: str, key: str, says: str) -> None:
    _write(tmp_path / "ripple.toml", toml)
    message = _error(environ={})
    assert message.startswith(f"ripple.toml: {key} (RIPPLE_")
    assert says in message


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("RIPPLE_S3_DELETE_RATE", "1e999"),  # float() would take it: infinity
        ("RIPPLE_S3_DELETE_RATE", "inf"),
        ("RIPPLE_S3_DELETE_RATE", "NaN"),
        ("RIPPLE_S3_DELETE_RATE", "1_000"),
        ("RIPPLE_S3_DELETE_RATE", "\u0661\u0662"),  # Arabic-Indic digits: float() reads them
        ("RIPPLE_S3_DELETE_RATE", "9" * 5000),
        ("RIPPLE_S3_DELETE_BURST", "+7"),
        ("RIPPLE_S3_DELETE_BURST", "9" * 5000),  # past Python's 4300-digit int() limit
        ("RIPPLE_S3_MAX_RENAME_KEYS", "\u00b2"),  # str.isdigit() takes it
        ("RIPPLE_LIFECYCLE_INTERVAL", "3600.0"),
        ("RIPPLE_LIFECYCLE_INTERVAL", ""),
    ],
)
def test_bad_numbers_in_variables(variable: str, value: str) -> None:
    message = _error(environ={variable: value})
    assert f"({variable}) must be a " in message
    assert len(message) < 200


def test_a_too_long_integer_is_bad_toml_not_a_crash(tmp_path: Path) -> None:
    _write(tmp_path / "ripple.toml", f"[s3]\ndelete-rate = {'9' * 5000}\n")
    assert "not valid TOML: an integer is too long" in _error(environ={})


# --- region and destination guard -------------------------------------------------------


def test_events_name_us_east_1_when_no_region_is_configured() -> None:
    settings = load_settings(environ={})
    assert settings.region == ""
    assert settings.effective_region == "us-east-1"
    assert settings.event_settings.region == "us-east-1"
    assert load_settings(environ={"RIPPLE_REGION": "eu-west-1"}).event_settings.region == (
        "eu-west-1"
    )


def test_the_guard_of_the_settings() -> None:
    guard = load_settings(
        environ={"RIPPLE_MODE": "production", "RIPPLE_DESTINATIONS_ALLOW": "10.0.0.0/8"}
    ).guard
    assert guard.enforcing
    assert [str(n) for n in guard.networks] == ["10.0.0.0/8"]
    assert not load_settings(environ={}).guard.enforcing


def test_a_bad_allow_list_entry_is_a_settings_error() -> None:
    message = _error(environ={"RIPPLE_DESTINATIONS_ALLOW": "https://hooks.example"})
    assert "RIPPLE_DESTINATIONS_ALLOW" in message
    assert "'https://hooks.example' is a URL" in message


def test_gateway_workers_unset_is_one_per_core_for_up_and_one_for_serve() -> None:
    cores = min(usable_cores(), MAX_AUTOMATIC_WORKERS)
    assert 1 <= usable_cores() <= len(os.sched_getaffinity(0))
    unset = Settings()
    assert unset.gateway_workers(default=0) == cores  # ripple up
    assert unset.gateway_workers(default=1) == 1  # ripple serve
    three = load_settings(None, environ={"RIPPLE_S3_WORKERS": "3"})
    assert three.gateway_workers(default=0) == 3
    assert three.gateway_workers(default=1) == 3
