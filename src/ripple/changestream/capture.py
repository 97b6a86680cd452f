"""What a write transaction changed, collected as it happens, with the request context (the
transaction tag, `ripple.changestream.tag`) that travels with it into its change records.

The metabase attaches a `Capture` to every write transaction and reports each row it
inserts, deletes or updates; `ChangeStreamWriter.flush` turns the capture into records just
before the transaction commits.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.engine import Connection

from ripple.changestream.definition import ModType
from ripple.changestream.tag import TransactionTag

_CAPTURE = "ripple.changestream.capture"


@dataclass(frozen=True)
class Mod:
    mod_type: ModType
    table: str
    old: Mapping[str, Any] | None  # the row before (DELETE, UPDATE)
    new: Mapping[str, Any] | None  # the row after (INSERT, UPDATE)

    @property
    def row(self) -> Mapping[str, Any]:
        row = self.new if self.new is not None else self.old
        if row is None:
            raise ValueError("a mod with neither an old nor a new row")
        return row


class Capture:
    """The changes of one write transaction, in the order it made them."""

    def __init__(
        self,
        tag: TransactionTag | None = None,
        *,
        system: bool = False,
        exclude_txn_from_change_streams: bool = False,
    ) -> None:
        self.tag = tag or TransactionTag()
        self.system = system
        self.excluded = exclude_txn_from_change_streams
        self.mods: list[Mod] = []
        self.bucket_versioning: dict[str, str] = {}
        self._inserted: set[tuple[str, Hashable]] = set()

    def insert(self, table: str, row: Mapping[str, Any], key: Hashable) -> None:
        self.mods.append(Mod(ModType.INSERT, table, None, row))
        self._inserted.add((table, key))

    def delete(self, table: str, row: Mapping[str, Any], key: Hashable) -> None:
        self._check_not_inserted(table, key)
        self.mods.append(Mod(ModType.DELETE, table, row, None))

    def update(
        self, table: str, old: Mapping[str, Any], new: Mapping[str, Any], key: Hashable
    ) -> None:
        self._check_not_inserted(table, key)
        self.mods.append(Mod(ModType.UPDATE, table, old, new))

    def _check_not_inserted(self, table: str, key: Hashable) -> None:
        # Records put a transaction's DELETEs and UPDATEs before its INSERTs; a row changed
        # after this transaction inserted it would be replayed in the wrong order.
        if (table, key) in self._inserted:
            raise RuntimeError(f"row {key!r} of {table} changed after this transaction inserted it")

    def default_etag(self, etag: str) -> None:
        """The ETag of the object the transaction wrote, unless the request named one."""
        self.tag = self.tag.defaults(etag=etag)

    def note_bucket(self, bucket: str, versioning: str | None) -> None:
        """The versioning state (`Enabled`, `Suspended`; None: off) of a bucket it changes."""
        if versioning:
            self.bucket_versioning[bucket] = versioning

    def tag_json(self) -> str:
        """The transaction tag its records carry: the request's, with the versioning states."""
        tag = self.tag
        if self.bucket_versioning:
            versioning = {**tag.bucket_versioning, **self.bucket_versioning}
            tag = replace(tag, bucket_versioning=versioning)
        return tag.encode()


def attach(conn: Connection, capture: Capture) -> None:
    conn.info[_CAPTURE] = capture


def detach(conn: Connection) -> Capture | None:
    capture = conn.info.pop(_CAPTURE, None)
    if capture is not None and not isinstance(capture, Capture):
        raise TypeError(f"the connection's capture is a {type(capture).__name__}")
    return capture


def capture_of(conn: Connection) -> Capture:
    """The capture of the write transaction `conn` is in; writes outside one are a bug."""
    capture = conn.info.get(_CAPTURE)
    if not isinstance(capture, Capture):
        raise RuntimeError("object rows are written only inside Metabase.write()")
    return capture
