"""A webhook receiver on 127.0.0.1 for tests: records every POST (headers and body) and
answers the status it is told to."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True)
class Post:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int = 200  # what the receiver answered

    def json(self) -> Any:
        return orjson.loads(self.body)


class Receiver:
    def __init__(self) -> None:
        self.status = 200
        self._posts: list[Post] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                if len(body) < length:  # the sender died mid-request: nothing was delivered
                    self.close_connection = True
                    return
                with owner._lock:
                    status = owner.status
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    owner._posts.append(Post(self.path, headers, body, status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/events"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def posts(self) -> list[Post]:
        with self._lock:
            return list(self._posts)

    def records(self) -> list[dict[str, Any]]:
        """The S3 event records received, in order (test messages left out)."""
        return [r for p in self.posts if "Records" in p.json() for r in p.json()["Records"]]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    try:
        yield r
    finally:
        r.close()
