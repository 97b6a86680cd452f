"""Object lock rules: legal hold, governance and compliance retention, bucket defaults.

A legal hold forbids deleting a version, always. An active retention period forbids it
too, except in governance mode when the request asks to bypass governance and the caller
is allowed to. Expired retention forbids nothing. Compliance retention can be extended but
never shortened, changed to governance or removed while it is active; governance can be
shortened or removed only with an allowed bypass (extending it, or turning it into
compliance, needs none).
"""

from __future__ import annotations

from datetime import MAXYEAR, MINYEAR, UTC, datetime, timedelta

from ripple.metabase.errors import InvalidArgument, ObjectLocked, ObjectLockNotEnabled
from ripple.metabase.types import Bucket, Object, Retention, RetentionMode


def bypass_allowed(bypass_governance: bool, can_bypass_governance: bool) -> bool:
    """A bypass counts only when requested and the caller holds the permission."""
    return bypass_governance and can_bypass_governance


def check_deletable(obj: Object, now: datetime, *, bypass: bool) -> None:
    """Raise `ObjectLocked` if object lock forbids deleting this version."""
    if obj.is_delete_marker:
        return
    if obj.legal_hold:
        raise ObjectLocked(
            f"{obj.object_key!r} version {obj.version_id} is under legal hold; "
            "turn the legal hold off before deleting it"
        )
    retention = obj.retention
    if retention is None or not retention.active(now):
        return
    if retention.mode is RetentionMode.GOVERNANCE and bypass:
        return
    raise ObjectLocked(
        f"{obj.object_key!r} version {obj.version_id} is retained in "
        f"{retention.mode.name.lower()} mode until {retention.retain_until.isoformat()}"
        + (
            "; deleting it needs x-amz-bypass-governance-retention and the permission to bypass"
            if retention.mode is RetentionMode.GOVERNANCE
            else ""
        )
    )


def check_retention_change(
    current: Retention | None, new: Retention | None, now: datetime, *, bypass: bool
) -> None:
    """Raise if replacing `current` with `new` (None: remove) breaks the lock rules."""
    if new is not None and new.retain_until <= now:
        raise InvalidArgument("retain-until date must be in the future")
    if current is None or not current.active(now):
        return
    if current.mode is RetentionMode.COMPLIANCE:
        if new is None or new.mode is not RetentionMode.COMPLIANCE:
            raise ObjectLocked("compliance-mode retention cannot be removed or changed in mode")
        if new.retain_until < current.retain_until:
            raise ObjectLocked("compliance-mode retention cannot be shortened")
        return
    # governance settings are altered only with a bypass: shortened, removed, or changed in
    # mode (to compliance too, as S3 requires); extending them needs none
    altered = new is None or new.retain_until < current.retain_until or new.mode is not current.mode
    if altered and not bypass:
        raise ObjectLocked(
            "governance-mode retention can be shortened, removed or changed in mode only "
            "with x-amz-bypass-governance-retention and the permission to bypass it"
        )


def default_retention(bucket: Bucket, now: datetime) -> Retention | None:
    """The retention a new object gets from its bucket when it names none. A period
    stored before its bounds were checked that would end past the last representable
    time retains until that time, rather than failing every write to the bucket."""
    default = bucket.default_retention
    if not bucket.object_lock_enabled or default is None:
        return None
    try:
        if default.days is not None:
            return Retention(default.mode, now + timedelta(days=default.days))
        if default.years is not None:
            return Retention(default.mode, _add_years(now, default.years))
    except (OverflowError, ValueError):
        return Retention(default.mode, datetime.max.replace(tzinfo=UTC))
    return None


def check_lock_allowed(bucket: Bucket, retention: Retention | None, legal_hold: bool) -> None:
    if (retention is not None or legal_hold) and not bucket.object_lock_enabled:
        raise ObjectLockNotEnabled(
            f"bucket {bucket.name!r} has no object lock configuration; "
            "create it with object lock enabled to retain or hold objects"
        )


def _add_years(when: datetime, years: int) -> datetime:
    if not MINYEAR <= when.year + years <= MAXYEAR:
        raise OverflowError(f"{when.year} + {years} years is out of range")
    try:
        return when.replace(year=when.year + years)
    except ValueError:  # 29 February into a year without one
        return when.replace(year=when.year + years, day=28)
