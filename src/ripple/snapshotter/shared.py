"""The snapshotters a process knows by name, opened once and shared by every user.

`snapshot://NAME` destinations name a snapshotter of the configuration (`[snapshotters.NAME]`,
or the embedded `default`). The pipeline and the gateway call `configure` with the
settings' snapshotters at start; targets `acquire` the one they name, and the last
`release` closes it (flushing its buffers). One process holds a snapshotter's write-ahead
log at a time: a second process that opens it gets a one-line error saying so.

The pipeline's tasks run in many worker processes, so its driver serves the snapshotters
over their gRPC service (`Served`, each opened at its first event) and its workers
`configure_remote` them: there `acquire` answers a `Remote`, which publishes each batch of
events, with their ids and times, in one `PublishBatch` call.

The snapshotter itself, its gRPC service and client are imported when one is opened or
served: a process that only configures them (the gateway) loads no gRPC.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ripple.snapshotter.settings import DEFAULT_NAME, SnapshotterSettings

if TYPE_CHECKING:
    from ripple.snapshotter.service import Publish

__all__ = [
    "Archive",
    "Remote",
    "Served",
    "acquire",
    "configure",
    "configure_remote",
    "configured",
    "release",
    "settings_named",
]


class Archive(Protocol):
    """What a target publishes to: an open snapshotter, or a `Remote` one."""

    def publish_many(self, events: Sequence[Publish]) -> Any: ...

    def close(self) -> None: ...


_lock = threading.Lock()
_configured: dict[str, SnapshotterSettings] = {}
_remote: dict[str, str] = {}  # name -> the address it is served at
_open: dict[str, tuple[Archive, int]] = {}


def configure(snapshotters: Mapping[str, SnapshotterSettings]) -> None:
    """The snapshotters `snapshot://NAME` may name from now on."""
    with _lock:
        _configured.clear()
        _configured.update(snapshotters)


def configured() -> dict[str, SnapshotterSettings]:
    """The snapshotters `snapshot://NAME` may name (before `configure`: the embedded
    `default` under ./.ripple)."""
    with _lock:
        return dict(_configured) or {DEFAULT_NAME: SnapshotterSettings.embedded(Path(".ripple"))}


def configure_remote(addresses: Mapping[str, str]) -> None:
    """From now on snapshotter NAME is the one served at ADDRESS (`Served`), not one this
    process opens."""
    with _lock:
        _remote.clear()
        _remote.update(addresses)


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


def acquire(name: str) -> Archive:
    """The open snapshotter `name`, opened now if no one holds it (a `Remote` one when it
    is served elsewhere)."""
    settings = settings_named(name)
    with _lock:
        if name in _open:
            snapshotter, users = _open[name]
            _open[name] = (snapshotter, users + 1)
            return snapshotter
        remote = _remote.get(name)
        if remote:
            opened: Archive = Remote(name, remote)
        else:
            from ripple.snapshotter.service import Snapshotter

            opened = Snapshotter.open(settings)
        _open[name] = (opened, 1)
        return opened


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


class Remote:
    """Snapshotter `name` served at `address`: `publish_many` returns once the events are
    in its write-ahead log; a failure is a `RuntimeError` of one line."""

    def __init__(self, name: str, address: str, timeout: float = 30.0) -> None:
        from ripple.snapshotter.client import SnapshotterClient

        self.name = name
        self.address = address
        self.client = SnapshotterClient(address, timeout)

    def publish_many(self, events: Sequence[Publish]) -> int:
        from ripple.snapshotter.client import SnapshotterClientError

        try:
            return self.client.publish_batch(events)
        except SnapshotterClientError as e:
            raise RuntimeError(f"snapshotter {self.name} at {self.address}: {e}") from None

    def close(self) -> None:
        self.client.close()


class _OnFirstUse:
    """Snapshotter `name`, acquired when its service first needs it (a pipeline that
    archives nothing opens no write-ahead log), released by `close`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._archive: Archive | None = None
        self._guard = threading.Lock()

    def __getattr__(self, attribute: str) -> Any:
        with self._guard:
            if self._archive is None:
                self._archive = acquire(self.name)
        return getattr(self._archive, attribute)

    def close(self) -> None:
        with self._guard:
            if self._archive is not None:
                self._archive = None
                release(self.name)


class Served:
    """Every configured snapshotter served over gRPC on `host` (a free port each), for a
    pipeline's workers: `addresses` ({name: HOST:PORT}); `stop` ends the services and
    closes what they opened."""

    def __init__(self, host: str) -> None:
        from ripple.snapshotter.grpc_server import serve_grpc

        self.addresses: dict[str, str] = {}
        self._served: list[tuple[Any, _OnFirstUse]] = []
        try:
            for name in sorted(configured()):
                snapshotter = _OnFirstUse(name)
                server, port = serve_grpc(snapshotter, f"{host}:0")  # type: ignore[arg-type]
                self._served.append((server, snapshotter))
                self.addresses[name] = f"{host}:{port}"
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for server, snapshotter in self._served:
            server.stop(grace=5).wait()
            snapshotter.close()
        self._served.clear()
