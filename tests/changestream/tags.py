"""Transaction tags with one member set, for the tests that every reader gets every member."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any, get_origin, get_type_hints

from ripple.changestream.tag import Operation, TransactionTag

MEMBERS = [f.name for f in fields(TransactionTag)]


def sample(member: str, n: int = 0) -> Any:
    """A value of `member` that no other member and no other `n` (0 or 1) has. A member of
    a type not named here is a TypeError: a new kind of member needs a value here."""
    kind = get_type_hints(TransactionTag)[member]
    if kind is str:
        return f'{member} {n} "ü"'
    if kind == Operation | None:
        return (Operation.COPY, Operation.RENAME_PREFIX)[n]
    if get_origin(kind) is Mapping:
        return {f"bucket-{n}": ("Enabled", "Suspended")[n]}
    raise TypeError(f"no sample value for member {member!r} of type {kind}")


def with_member(member: str, n: int = 0, tag: TransactionTag | None = None) -> TransactionTag:
    """`tag` (the empty one by default) with `member` set to its `n`-th sample value."""
    return replace(tag or TransactionTag(), **{member: sample(member, n)})
