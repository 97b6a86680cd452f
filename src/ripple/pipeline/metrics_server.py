"""The pipeline's Prometheus endpoint, `/metrics`, from a thread of its own: plain HTTP, or
HTTPS with `metrics.tls-cert` and `metrics.tls-key` (`ripple.tls.Certificate`, reloaded on
SIGHUP). prometheus_client's own server loads its certificate once; this one serves the
certificate's context, so a reload reaches the next connection."""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from ripple.tls import Certificate

__all__ = ["serve_metrics"]

log = logging.getLogger(__name__)
HANDLER_TIMEOUT_S = 30  # a connection that sends nothing (no handshake, no request) is closed


class _Quiet(WSGIRequestHandler):
    """No line per scrape; a connection that stalls is dropped."""

    timeout = HANDLER_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingWSGIServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # a failed handshake (a plain-HTTP scraper, a wrong CA) or a dropped client: no
        # traceback on stderr
        log.debug("metrics connection from %s failed", client_address, exc_info=True)


def serve_metrics(host: str, port: int, tls: Certificate | None = None) -> WSGIServer:
    """Serve the process's metrics on `host:port` (0: any free port) until the process
    ends; with `tls`, over HTTPS. `OSError` when the address cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server_class = type("MetricsServer", (_Server,), {"address_family": family})
    server: WSGIServer = make_server(
        host, port, make_wsgi_app(), server_class, handler_class=_Quiet
    )
    if tls is not None:
        # the handshake happens in the connection's thread, on its first read: a client
        # that stalls in it holds only its own thread, not the accepting one
        server.socket = tls.context.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
    threading.Thread(target=server.serve_forever, name="ripple-metrics", daemon=True).start()
    return server
