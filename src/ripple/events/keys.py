"""Object keys in S3 event messages: URL-encoded the way S3 encodes them, and back.

S3 documents `s3.object.key` as "URL encoded ... (application/x-www-form-urlencoded)", for
example `red flower.jpg` becomes `red+flower.jpg`, and in practice leaves `/` as it is. That
is the HTML form encoding (WHATWG `application/x-www-form-urlencoded`, Java's `URLEncoder`)
with `/` kept:

- `A-Z a-z 0-9 - _ . *` and `/` are kept;
- a space becomes `+`;
- every other character is percent-encoded as its UTF-8 bytes with upper-case hex
  (`+` → `%2B`, `=` → `%3D`, `~` → `%7E`, `ü` → `%C3%BC`).

`*` kept and `~` encoded are where this differs from Python's `quote_plus`; consumers decode
with `unquote_plus` (as AWS's own Lambda examples do) and get the same key either way.
"""

from __future__ import annotations

from urllib.parse import quote, unquote_plus

__all__ = ["decode_key", "encode_key"]

# `quote` always keeps A-Z a-z 0-9 _ . - ~; we add `/` and `*`, and encode `~` afterwards.
_SAFE = "/*"


def encode_key(key: str) -> str:
    """The key as S3 writes it in an event message (`red flower.jpg` → `red+flower.jpg`)."""
    if " " in key:
        encoded = quote(key, safe=_SAFE + " ").replace(" ", "+")
    else:
        encoded = quote(key, safe=_SAFE)
    # A `~` left in the output can only be a `~` of the key: percent escapes are hex digits.
    return encoded.replace("~", "%7E") if "~" in encoded else encoded


def decode_key(encoded: str) -> str:
    """The raw key of an event message's `s3.object.key` (the inverse of `encode_key`)."""
    return unquote_plus(encoded, encoding="utf-8", errors="strict")
