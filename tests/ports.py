"""A free TCP port on 127.0.0.1 for a server a test starts (the port is free when asked; a
test binds it right after)."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
