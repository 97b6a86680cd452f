"""The snapshotter's health checks and Prometheus metrics over HTTP.

| path | what it answers |
|---|---|
| `GET /health/buffers` | `Snapshotter.buffers_health()`: writers, buffered events and bytes, ages |
| `GET /health/storage` | `Snapshotter.storage_health()`: backend, status, success rate, latency |
| `GET /health/index` | `Snapshotter.index_health()`: backend, status, success rate, entries |
| `GET /health` | the three under `buffers`, `storage`, `index`, and an overall `status` |
| `GET /metrics` | the default Prometheus registry, in its text format |

A check whose `status` is "unhealthy" answers 503, any other 200, so a load balancer or
an orchestrator's probe can use the code alone. `HealthServer` runs the app with uvicorn on
a thread, on a socket bound before it starts (port 0: any free port), over HTTPS with a
certificate, as the S3 gateway does (`ripple.gateway.server`).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ripple.snapshotter.service import Snapshotter
from ripple.tls import Certificate

__all__ = ["HealthServer", "HealthServerError", "create_app", "overall"]

UNHEALTHY = "unhealthy"


class HealthServerError(Exception):
    """The health server cannot listen: a malformed address, or the port is taken."""


def _answer(report: dict[str, Any]) -> JSONResponse:
    return JSONResponse(report, status_code=503 if report.get("status") == UNHEALTHY else 200)


def overall(checks: dict[str, dict[str, Any]]) -> str:
    """ "unhealthy" if any check is, else "healthy" (a backend not used yet is "unknown",
    which is not a failure)."""
    return UNHEALTHY if any(c.get("status") == UNHEALTHY for c in checks.values()) else "healthy"


def create_app(snapshotter: Snapshotter) -> Starlette:
    """The health and metrics app of `snapshotter`. The endpoints are plain functions:
    Starlette runs them on its thread pool, so a slow index never blocks the event loop."""

    def check(read: Callable[[], dict[str, Any]]) -> Callable[[Request], Response]:
        def endpoint(_: Request) -> Response:
            return _answer(read())

        return endpoint

    def everything(_: Request) -> Response:
        checks = {
            "buffers": snapshotter.buffers_health(),
            "storage": snapshotter.storage_health(),
            "index": snapshotter.index_health(),
        }
        return _answer({"snapshotter": snapshotter.name, "status": overall(checks), **checks})

    def metrics(_: Request) -> Response:
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    return Starlette(
        routes=[
            Route("/health", everything),
            Route("/health/buffers", check(snapshotter.buffers_health)),
            Route("/health/storage", check(snapshotter.storage_health)),
            Route("/health/index", check(snapshotter.index_health)),
            Route("/metrics", metrics),
        ]
    )


def bind(address: str) -> socket.socket:
    """A listening socket on HOST:PORT (port 0: any free port), or `HealthServerError`."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise HealthServerError(
            f"health address {address!r} must be HOST:PORT, e.g. 127.0.0.1:9102"
        )
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, int(port)))
    except OSError as e:
        sock.close()
        raise HealthServerError(
            f"cannot listen for health checks on {address}: {e.strerror or e}; pass "
            "--health-address or set snapshotters.NAME.health-address to a free HOST:PORT"
        ) from None
    sock.listen(128)
    return sock


class HealthServer:
    """The app of `create_app` on `address`, bound at once (`HealthServerError`), served on
    a thread from `start()` until `stop()`; with `tls`, over HTTPS with that certificate
    (its `reload` reaches the next connection). Handshakes run on the event loop, so a slow
    client holds up no other."""

    def __init__(
        self, snapshotter: Snapshotter, address: str, tls: Certificate | None = None
    ) -> None:
        self.socket = bind(address)
        host, port = self.socket.getsockname()[:2]
        self.port: int = port
        scheme = "http" if tls is None else "https"
        self.url = f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"
        config = uvicorn.Config(
            create_app(snapshotter),
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=2,
            ssl_context_factory=None if tls is None else lambda _config, _default: tls.context,
        )
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Serve on a thread. Connections made before it is up wait in the socket's backlog."""
        self._thread = threading.Thread(
            target=self.server.run,
            kwargs={"sockets": [self.socket]},
            name="snapshotter-health",
            daemon=True,
        )
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        self.socket.close()

    def __enter__(self) -> HealthServer:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
