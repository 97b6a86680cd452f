"""The change stream: definitions and options, records written inside the metabase
transaction, transaction exclusion, reading by partition and position, retention."""

from ripple.changestream.capture import OPERATIONS, Capture, TransactionTag, capture_of
from ripple.changestream.definition import (
    ChangeStreamError,
    ModType,
    StreamDefinition,
    StreamOptions,
    ValueCaptureType,
    parse_retention,
)

__all__ = [
    "OPERATIONS",
    "Capture",
    "ChangeStreamError",
    "ModType",
    "StreamDefinition",
    "StreamOptions",
    "TransactionTag",
    "ValueCaptureType",
    "capture_of",
    "parse_retention",
]
