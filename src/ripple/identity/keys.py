"""Access keys: what a key may do (`AccessKey.permits`), and making and checking the ids,
secrets, user names and restrictions they are created with.

An access key id is public (it is sent with every request); its secret key never leaves
ripple except once, when the key is created.
"""

from __future__ import annotations

import re
import secrets
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from ripple.identity.errors import BadInput
from ripple.metabase.buckets import validate_bucket_name
from ripple.metabase.errors import InvalidArgument

ACTIONS = ("read", "write", "list", "delete")

ACCESS_KEY_PREFIX = "RK"
ACCESS_KEY_LENGTH = 20
SECRET_KEY_LENGTH = 40
MAX_PREFIX_BYTES = 1024

_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"  # base32: no 0/O or 1/I to misread
_ACCESS_KEY_ID = re.compile(r"[A-Za-z0-9]{16,128}")
_USER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")


@dataclass(frozen=True)
class AccessKey:
    """An access key as the gateway checks requests against it (never its secret).

    A key restricted to a bucket may act only in that bucket (and list buckets: the gateway
    shows it only its own); one restricted to a prefix too may act only on the keys under
    it. `denied` actions are refused everywhere."""

    access_key_id: str
    project_id: uuid.UUID
    project_public_id: uuid.UUID
    user: str  # the project's name
    bucket: str | None = None
    prefix: str | None = None
    denied: frozenset[str] = frozenset()
    allow_bypass_governance: bool = False

    def __post_init__(self) -> None:
        unknown = self.denied - set(ACTIONS)
        if unknown:
            raise ValueError(f"unknown actions {sorted(unknown)}; actions are {ACTIONS}")
        if self.prefix is not None and self.bucket is None:
            raise ValueError("a prefix restriction needs a bucket restriction")

    @property
    def restricted(self) -> bool:
        """Limited to one bucket (and maybe a prefix) or denied some actions: not the key
        of the account owner."""
        return self.bucket is not None or bool(self.denied)

    @property
    def may_bypass_governance(self) -> bool:
        """An unrestricted key acts as the account owner, who holds S3's
        `s3:BypassGovernanceRetention`; a restricted key only when made with
        `--allow-bypass-governance`."""
        return self.allow_bypass_governance or not self.restricted

    def permits(self, action: str, bucket: str | None = None, key: str | None = None) -> bool:
        """May this key do `action` (one of ACTIONS) in `bucket` on `key`?

        - `bucket` None: a request about no one bucket (ListBuckets: `list`). A key
          restricted to a bucket may only `list` there, and the gateway shows it its bucket.
        - `key` None: a request about the bucket itself. A key restricted to a prefix may
          read about the bucket (HeadBucket, GetBucketVersioning, ...) but not change or
          delete it, nor list it whole.
        - `list` in a bucket: `key` is the requested listing prefix, which must start with
          the key's prefix restriction (None is the whole bucket)."""
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; actions are {', '.join(ACTIONS)}")
        if action in self.denied:
            return False
        if self.bucket is None:
            return True
        if bucket is None:
            return action == "list"
        if bucket != self.bucket:
            return False
        if self.prefix is None:
            return True
        if key is None:
            return action == "read"
        return key.startswith(self.prefix)


def new_access_key_id() -> str:
    """`RK` and 18 random base32 characters (90 bits): 20 upper-case alphanumerics."""
    size = ACCESS_KEY_LENGTH - len(ACCESS_KEY_PREFIX)
    return ACCESS_KEY_PREFIX + "".join(secrets.choice(_ID_ALPHABET) for _ in range(size))


def new_secret_key() -> str:
    """40 random URL-safe base64 characters (240 bits)."""
    return secrets.token_urlsafe(SECRET_KEY_LENGTH * 3 // 4)


def is_access_key_id(text: str) -> bool:
    """Could `text` be an access key id (16 to 128 letters and digits)?"""
    return _ACCESS_KEY_ID.fullmatch(text) is not None


def check_access_key_id(text: str) -> str:
    if not is_access_key_id(text):
        # not shown: a secret key given in its place must not end up in a terminal or log
        raise BadInput("the access key must be 16 to 128 letters and digits (A-Z, a-z, 0-9)")
    return text


def check_secret_key(secret: str) -> str:
    """A given secret key: 16 to 128 printable ASCII characters, no spaces. The message
    says what is wrong without showing it."""
    if not 16 <= len(secret) <= 128:
        raise BadInput(f"the secret key must be 16 to 128 characters long, not {len(secret)}")
    if not all("!" <= c <= "~" for c in secret):
        raise BadInput("the secret key must be printable ASCII characters without spaces")
    return secret


def check_user_name(name: str) -> str:
    if _USER_NAME.fullmatch(name) is None:
        raise BadInput(
            f"user name {_shown(name)} must be 1 to 64 letters, digits, dots, hyphens, "
            "underscores, @ or +, starting with a letter or digit"
        )
    return name


def check_restriction(
    bucket: str | None, prefix: str | None, denied: Iterable[str]
) -> tuple[str | None, str | None, frozenset[str]]:
    """A key's restrictions, checked: the bucket name valid, a prefix only with a bucket,
    1 to 1024 bytes, and denied actions among ACTIONS."""
    if bucket is not None:
        try:
            validate_bucket_name(bucket)
        except InvalidArgument as e:
            raise BadInput(e.message) from None
    if prefix is not None:
        if bucket is None:
            raise BadInput("a prefix restriction needs a bucket: give --bucket too")
        try:
            size = len(prefix.encode("utf-8"))
        except UnicodeEncodeError:
            raise BadInput("the prefix must be valid Unicode text") from None
        if not 1 <= size <= MAX_PREFIX_BYTES:
            raise BadInput(f"the prefix must be 1 to {MAX_PREFIX_BYTES} bytes long, not {size}")
    actions = frozenset(denied)
    unknown = sorted(actions - set(ACTIONS))
    if unknown:
        raise BadInput(
            f"unknown action {_shown(unknown[0])} to deny; choose from {', '.join(ACTIONS)}"
        )
    return bucket, prefix, actions


def denied_column(denied: frozenset[str]) -> str:
    """How the denied actions are stored: sorted, comma-joined, empty for none."""
    return ",".join(sorted(denied))


def denied_of(column: str) -> frozenset[str]:
    return frozenset(column.split(",")) if column else frozenset()


def _shown(text: str) -> str:
    """`text` quoted for a message, cut short if long."""
    return repr(text if len(text) <= 80 else text[:77] + "...")
