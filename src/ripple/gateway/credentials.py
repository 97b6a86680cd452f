"""Credentials a topic may carry: user info in its push endpoint, and secret arguments
(`secret`, `bearer-token`, `password`, a header naming an authorization, token, key,
password or cookie). The topic APIs take them over HTTPS only (`topics.check_secrets`), and
never show them: an endpoint is shown `redacted`, a secret argument as `HIDDEN`.
"""

from __future__ import annotations

HIDDEN = "***"
_SECRET_ARGUMENTS = ("secret", "bearer-token", "password")  # password: Kafka SASL
_SECRET_HEADER_WORDS = ("auth", "token", "secret", "key", "password", "cookie")


def is_secret(argument: str) -> bool:
    """Does a topic argument hold a credential?"""
    if argument in _SECRET_ARGUMENTS:
        return True
    header = argument.lower().removeprefix("header.")
    return argument.startswith("header.") and any(w in header for w in _SECRET_HEADER_WORDS)


def _authority(uri: str) -> tuple[str, str, str]:
    """(`scheme://`, authority, the rest) of a URI, split as `urlsplit` would but without
    refusing anything (`http://[::1` has an authority too): a client's text is only
    looked at here, `parse_endpoint` judges it."""
    scheme, sep, rest = uri.strip().partition("://")
    if not sep:
        return "", "", uri
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    return scheme + sep, rest[:end], rest[end:]


def has_user_info(uri: str) -> bool:
    """Does a push endpoint carry user info (`user:password@`, `token@`)?"""
    return "@" in _authority(uri)[1]


def redacted(endpoint: str) -> str:
    """The push endpoint as GetTopicAttributes and errors show it: `user:***@`, or `***@`
    for a user name alone (a token: nats://token@host)."""
    scheme, authority, rest = _authority(endpoint)
    userinfo, at, host = authority.rpartition("@")
    if not at:
        return endpoint
    user, colon, _ = userinfo.partition(":")
    hidden = f"{user}:{HIDDEN}" if colon else HIDDEN
    return f"{scheme}{hidden}@{host}{rest}"
