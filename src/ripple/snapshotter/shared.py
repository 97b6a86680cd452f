"""The snapshotters a process knows by name, opened once and shared by every user.

`snapshot://NAME` destinations name a snapshotter of the configuration (`[snapshotters.NAME]`,
or the embedded `default`). The pipeline and the gateway call `configure` with the
settings' snapshotters at start; targets `acquire` the one they name, and the last
`release` closes it (flushing its buffers). One process holds a snapshotter's write-ahead
log at a time: a second process that opens it gets a one-line error saying so.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path

from ripple.snapshotter.service import Snapshotter
from ripple.snapshotter.settings import DEFAULT_NAME, SnapshotterSettings

__all__ = ["acquire", "configure", "release", "settings_named"]

_lock = threading.Lock()
_configured: dict[str, SnapshotterSettings] = {}
_open: dict[str, tuple[Snapshotter, int]] = {}


def configure(snapshotters: Mapping[str, SnapshotterSettings]) -> None:
    """The snapshotters `snapshot://NAME` may name from now on."""
    with _lock:
        _configured.clear()
        _configured.update(snapshotters)


def settings_named(name: str) -> SnapshotterSettings:
    """The settings of snapshotter `name`; `ValueError` listing the known ones. Before
    `configure`, only the embedded `default` under ./.ripple is known."""
    with _lock:
        known = dict(_configured) or {DEFAULT_NAME: SnapshotterSettings.embedded(Path(".ripple"))}
    if name not in known:
        raise ValueError(
            f"no snapshotter {name!r}; configured: {', '.join(sorted(known))} "
            f"(add a [snapshotters.{name}] table to ripple.toml)"
        )
    return known[name]


def acquire(name: str) -> Snapshotter:
    """The open snapshotter `name`, opened now if no one holds it."""
    settings = settings_named(name)
    with _lock:
        if name in _open:
            snapshotter, users = _open[name]
            _open[name] = (snapshotter, users + 1)
            return snapshotter
        snapshotter = Snapshotter.open(settings)
        _open[name] = (snapshotter, 1)
        return snapshotter


def release(name: str) -> None:
    """One user fewer; the last one closes it."""
    with _lock:
        if name not in _open:
            return
        snapshotter, users = _open[name]
        if users > 1:
            _open[name] = (snapshotter, users - 1)
            return
        del _open[name]
    snapshotter.close()
