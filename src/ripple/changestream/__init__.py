"""The change stream: definitions and options, records written inside the metabase
transaction with their transaction tag, transaction exclusion, reading by partition and
position, retention."""

from ripple.changestream.capture import Capture, capture_of
from ripple.changestream.definition import (
    ChangeStreamError,
    ModType,
    StreamDefinition,
    StreamOptions,
    ValueCaptureType,
    parse_retention,
)
from ripple.changestream.tag import Operation, TransactionTag

__all__ = [
    "Capture",
    "ChangeStreamError",
    "ModType",
    "Operation",
    "StreamDefinition",
    "StreamOptions",
    "TransactionTag",
    "ValueCaptureType",
    "capture_of",
    "parse_retention",
]
