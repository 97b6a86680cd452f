"""Where pages are listed for discovery and replay: SQLite, Redis or PostgreSQL."""

from ripple.snapshotter.index.base import Index, IndexEntry, IndexError_

__all__ = ["Index", "IndexEntry", "IndexError_"]
