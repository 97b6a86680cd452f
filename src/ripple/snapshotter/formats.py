"""The page formats and compressions a snapshotter may be configured with.

Names only, so that reading a configuration (`ripple.snapshotter.settings`) loads no
protobuf; `ripple.snapshotter.pages` turns pages into bytes in each of them.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["COMPRESSIONS", "FORMATS", "Compression", "Format"]

Format = Literal["protobuf", "ndjson"]
Compression = Literal["none", "gzip", "zstd"]
FORMATS: tuple[Format, ...] = ("protobuf", "ndjson")
COMPRESSIONS: tuple[Compression, ...] = ("none", "gzip", "zstd")
