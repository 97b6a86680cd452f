"""Continuation tokens, which resume a ListObjectsV2 or ListBuckets page after the last key
or name it answered: opaque to clients, a version byte and that key in URL-safe base64."""

from __future__ import annotations

import base64

from ripple.gateway.errors import S3Error

_TOKEN_VERSION = b"\x01"


def continuation_token(key: str) -> str:
    """The opaque V2 token that resumes a listing after `key` (a key or common prefix)."""
    raw = base64.urlsafe_b64encode(_TOKEN_VERSION + key.encode("utf-8"))
    return raw.decode("ascii").rstrip("=")


def resume_key(token: str) -> str:
    """The key a V2 continuation token resumes after; `InvalidArgument` if it is not one
    this gateway made."""
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_", validate=True)
        if not raw.startswith(_TOKEN_VERSION) or len(raw) == len(_TOKEN_VERSION):
            raise ValueError("not a ripple continuation token")
        return raw[len(_TOKEN_VERSION) :].decode("utf-8")
    except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
        raise S3Error(
            "InvalidArgument",
            "the continuation token provided is incorrect: pass back the "
            "NextContinuationToken of the previous page unchanged",
            extra={"ArgumentName": "continuation-token", "ArgumentValue": token},
        ) from None
