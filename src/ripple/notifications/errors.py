"""Why a notification configuration is refused: the S3 error code it answers with and what
to say, so the model speaks no HTTP (`ripple.gateway.errors.from_notifications` answers it)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["NotificationError", "invalid"]


class NotificationError(Exception):
    """A refused notification configuration. `code` is S3's error code (InvalidArgument,
    NotImplemented, …); `extra` more members of S3's `<Error>` (ArgumentName, …)."""

    def __init__(self, code: str, message: str, extra: Mapping[str, str] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.extra = dict(extra or {})


def invalid(message: str, name: str, value: str) -> NotificationError:
    """S3's InvalidArgument, naming the argument and its value."""
    return NotificationError(
        "InvalidArgument", message, {"ArgumentName": name, "ArgumentValue": value}
    )
