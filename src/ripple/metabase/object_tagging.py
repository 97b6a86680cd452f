"""Object tags (S3 PutObjectTagging / GetObjectTagging / DeleteObjectTagging) and S3's rules
for a tag set, which PutObject, CopyObject and CreateMultipartUpload apply too.

Tags belong to one object version: the latest when no version ID is given. A delete marker
has none: asking for the latest version when it is a marker is `ObjectNotFound` (NoSuchKey,
with `delete_marker`), naming a marker by version ID is `MethodNotAllowed`. A change is an
UPDATE of the version's row in one transaction, which the change stream records (an
`ObjectTagging:Put` or `ObjectTagging:Delete` event); setting the tags a version already has
changes nothing and records nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

import sqlalchemy as sa

from ripple.changestream.capture import capture_of
from ripple.changestream.tag import Operation, TransactionTag
from ripple.metabase.db import Metabase
from ripple.metabase.errors import InvalidTag, TooManyTags
from ripple.metabase.get_object import DeleteMarkerVersion, resolve_object
from ripple.metabase.rows import start_key_write, update_row
from ripple.metabase.types import Object, ObjectLocation

MAX_TAGS = 10
MAX_KEY_LENGTH = 128
MAX_VALUE_LENGTH = 256
# besides letters, digits and white space (S3's tag character set)
_ALLOWED_PUNCTUATION = frozenset("_.:/=+-@")

Tags = Mapping[str, str] | Iterable[tuple[str, str]]


def check_tags(tags: Tags) -> dict[str, str]:
    """A tag set as S3 accepts it: at most 10 tags (`TooManyTags`), keys of 1 to 128 and
    values of 0 to 256 Unicode characters, letters, digits, spaces and `_ . : / = + - @`
    only, no key starting with `aws:` and none given twice (`InvalidTag`)."""
    pairs = list(tags.items()) if isinstance(tags, Mapping) else list(tags)
    if len(pairs) > MAX_TAGS:
        raise TooManyTags(f"object tags cannot be greater than {MAX_TAGS} (got {len(pairs)})")
    checked: dict[str, str] = {}
    for key, value in pairs:
        if not key or len(key) > MAX_KEY_LENGTH:
            raise InvalidTag(
                f"the TagKey you have provided is invalid: {key!r} must be 1 to "
                f"{MAX_KEY_LENGTH} characters"
            )
        if len(value) > MAX_VALUE_LENGTH:
            raise InvalidTag(
                f"the TagValue you have provided is too long, max {MAX_VALUE_LENGTH} (tag {key!r})"
            )
        if not _allowed(key):
            raise InvalidTag(f"the TagKey you have provided is invalid: {key!r}")
        if not _allowed(value):
            raise InvalidTag(f"the TagValue you have provided is invalid: {value!r}")
        if key.lower().startswith("aws:"):
            raise InvalidTag(f"your TagKey cannot be prefixed with aws: ({key!r})")
        if key in checked:
            raise InvalidTag(f"cannot provide multiple Tags with the same key ({key!r})")
        checked[key] = value
    return checked


def _allowed(text: str) -> bool:
    return all(c.isalnum() or c.isspace() or c in _ALLOWED_PUNCTUATION for c in text)


def tagged_version(conn: sa.Connection, loc: ObjectLocation, version_id: str | None) -> Object:
    """The object version whose tags a request reads or writes (never a delete marker)."""
    obj = resolve_object(conn, loc, version_id)
    if obj.is_delete_marker:
        raise DeleteMarkerVersion(obj)
    return obj


def put_object_tagging(
    db: Metabase,
    loc: ObjectLocation,
    tags: Tags,
    *,
    version_id: str | None = None,
    tag: TransactionTag | None = None,
) -> Object:
    """Replace the tags of a version (the latest without `version_id`); returns the version
    with its new tags. An empty tag set removes them."""
    new_tags = check_tags(tags)
    tag = (tag or TransactionTag()).defaults(operation=Operation.PUT_OBJECT_TAGGING)
    return _set_tags(db, loc, new_tags, version_id, tag)


def delete_object_tagging(
    db: Metabase,
    loc: ObjectLocation,
    *,
    version_id: str | None = None,
    tag: TransactionTag | None = None,
) -> Object:
    """Remove every tag of a version (the latest without `version_id`); returns the version."""
    tag = (tag or TransactionTag()).defaults(operation=Operation.DELETE_OBJECT_TAGGING)
    return _set_tags(db, loc, {}, version_id, tag)


def get_object_tagging(
    db: Metabase, loc: ObjectLocation, *, version_id: str | None = None
) -> Object:
    """The version whose tags were asked for (its `tags`, its `version_id`)."""
    with db.read() as conn:
        return tagged_version(conn, loc, version_id)


def _set_tags(
    db: Metabase,
    loc: ObjectLocation,
    tags: dict[str, str],
    version_id: str | None,
    transaction_tag: TransactionTag,
) -> Object:
    def tx(conn: sa.Connection) -> Object:
        start_key_write(conn, loc)
        obj = tagged_version(conn, loc, version_id)
        if obj.tags == tags:
            return obj  # nothing changes, so nothing is recorded
        update_row(conn, obj, tags=tags or None)
        capture_of(conn).default_etag(obj.etag)
        return replace(obj, tags=dict(tags))

    return db.run_write(tx, transaction_tag, exclude_txn_from_change_streams=False)
