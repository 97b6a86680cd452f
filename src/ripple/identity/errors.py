"""Identity errors: each is one line that says what is wrong and what to do, and never
holds a secret."""

from __future__ import annotations


class IdentityError(Exception):
    """Base of every error the identity functions raise for bad input or a refused change."""


class BadInput(IdentityError):
    """A name, access key, secret, bucket, prefix or action that is not acceptable."""


class UserExists(IdentityError):
    def __init__(self, name: str) -> None:
        super().__init__(f"user {name!r} already exists")


class UnknownUser(IdentityError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no user {name!r}: create it with `ripple user create {name}`")


class KeyExists(IdentityError):
    def __init__(self, access_key_id: str) -> None:
        super().__init__(f"access key {access_key_id} already exists; choose another")


class UnknownKey(IdentityError):
    def __init__(self, access_key_id: str) -> None:
        super().__init__(f"no access key {access_key_id!r}")


class MasterKeyError(IdentityError):
    """The master key file is missing, unreadable, too open or the wrong length."""


class SealError(IdentityError):
    """A sealed secret does not open: another master key, another access key id, altered."""
