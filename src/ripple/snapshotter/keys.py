"""Page keys from templates such as `{writer_id}/{date}/{sequence}.pb.zst`.

Placeholders: `{year}` `{month}` `{day}` `{date}` (YYYY-MM-DD, all UTC, of the page's first
event), `{writer_id}`, `{timestamp}` (the first event's time, Unix milliseconds) and
`{sequence}` (the page sequence). A key depends only on the page, never on when it is
written, so a page written again after a crash lands on the same key. A template must hold
`{writer_id}` and `{sequence}`, the two that make a key unique; anything else in braces is
an error naming the placeholder.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ripple.snapshotter.proto import PageMetadata

__all__ = ["DEFAULT_TEMPLATE", "PLACEHOLDERS", "KeyTemplate"]

PLACEHOLDERS = ("year", "month", "day", "date", "writer_id", "timestamp", "sequence")
REQUIRED = ("writer_id", "sequence")
DEFAULT_TEMPLATE = "{writer_id}/{date}/{timestamp}_{sequence}{ext}"


@dataclass(frozen=True)
class KeyTemplate:
    """A checked key template. `{ext}` is also accepted: the extension of the page's format
    and compression (`.pb.zst`, `.ndjson.gz`…)."""

    text: str

    def __post_init__(self) -> None:
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(self.text) if f is not None]
        except ValueError as e:
            raise ValueError(f"key template {self.text!r}: {e}") from None
        for name in fields:
            if name not in (*PLACEHOLDERS, "ext"):
                raise ValueError(
                    f"key template {self.text!r}: unknown placeholder {{{name}}}; "
                    f"use {', '.join('{' + p + '}' for p in (*PLACEHOLDERS, 'ext'))}"
                )
        missing = [p for p in REQUIRED if p not in fields]
        if missing:
            raise ValueError(
                f"key template {self.text!r} must hold {{writer_id}} and {{sequence}} "
                f"(missing {', '.join('{' + p + '}' for p in missing)}), or pages would overwrite"
            )
        if self.text.startswith("/") or ".." in self.text.split("/"):
            raise ValueError(f"key template {self.text!r} must be relative, without '..'")

    def render(self, meta: PageMetadata, ext: str = "", suffix: str = "") -> str:
        """The key of a page; `suffix` follows the sequence (compaction's `~c<last>`)."""
        when = datetime.fromtimestamp(meta.start_time / 1000, tz=UTC)
        # a writer id never adds a directory; "%" escaped first keeps "a/b" and "a%2Fb" apart
        writer = meta.writer_id.replace("%", "%25").replace("/", "%2F")
        if writer in (".", ".."):
            writer = writer.replace(".", "%2E")
        return self.text.format(
            year=f"{when.year:04d}",
            month=f"{when.month:02d}",
            day=f"{when.day:02d}",
            date=when.strftime("%Y-%m-%d"),
            writer_id=writer,
            timestamp=meta.start_time,
            sequence=f"{meta.page_sequence}{suffix}",
            ext=ext,
        )
