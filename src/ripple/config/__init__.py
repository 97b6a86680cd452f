"""Configuration: `ripple.toml` (or `--config FILE`), overridden by `RIPPLE_*` variables.

The embedded defaults need neither: SQLite in the data directory, the S3 gateway on
127.0.0.1:9000, Spark `local[*]`. One table drives it all: each field of `Settings` is a
row (`ripple.config.table.Setting`) giving the key, the variable, the parser
(`ripple.config.parsers`), the default and a line of help, from which `load_settings`
(`ripple.config.load`) reads and checks every value and `ripple.config.reference` renders
the table of docs/configuration.md. Every problem is reported as one `ConfigError` line
that names the key and variable and what they accept.
"""

from ripple.config.load import DEFAULT_CONFIG_FILE, load_settings
from ripple.config.settings import (
    ENVIRONMENT_VARIABLES,
    MAX_AUTOMATIC_WORKERS,
    SETTINGS,
    Settings,
    usable_cores,
)
from ripple.config.table import ConfigError, Setting

__all__ = [
    "DEFAULT_CONFIG_FILE",
    "ENVIRONMENT_VARIABLES",
    "MAX_AUTOMATIC_WORKERS",
    "SETTINGS",
    "ConfigError",
    "Setting",
    "Settings",
    "load_settings",
    "usable_cores",
]
