"""A webhook receiver for the target tests: a threading HTTP/1.1 server on 127.0.0.1 that
records every request and answers what the test's `respond` function says: a status code,
"close" (drop the connection without answering) or "hold" (wait until the test releases
it)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable
from dataclasses import dataclass

Action = int | str  # a status code, "close" or "hold"


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes


class HookServer:
    """A threading HTTP/1.1 server that records requests and answers as told."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.respond: Callable[[Request], Action] = lambda request: 200
        self.in_flight = 0
        self.most_in_flight = 0
        self.gate = threading.Semaphore(0)  # each release lets one held request answer
        self.closing = threading.Event()  # at shutdown: every held request answers
        self._lock = threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with owner._lock:
                    owner.requests.append(request)
                    owner.in_flight += 1
                    owner.most_in_flight = max(owner.most_in_flight, owner.in_flight)
                try:
                    action = owner.respond(request)
                    if action == "hold":
                        while not owner.gate.acquire(timeout=0.05):
                            if owner.closing.is_set():
                                break
                        action = 200
                finally:
                    with owner._lock:
                        owner.in_flight -= 1
                if action == "close":
                    self.close_connection = True
                    return
                self.send_response(int(action))
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)
