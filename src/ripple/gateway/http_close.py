"""The lingering close of the gateway's HTTP connections (`ripple.gateway.protocol` inherits
it): after a refusal, or a response that leaves its request's body unread, the gateway shuts
its sending side, reads and drops what the client still sends (at most `linger_bytes`, for
at most `linger_timeout`), then closes; so a client that sends its whole request before
reading gets the answer instead of a connection reset. Nothing is written once it began."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from ripple.gateway.http_rules import HttpLimits


class Lingering:
    """The lingering close of a connection's protocol: `close` lingers when `must_linger`
    says the client may still be sending."""

    limits: HttpLimits
    loop: asyncio.AbstractEventLoop

    def init_lingering(self) -> None:
        self.lingering = False  # closing: the answer is sent, what arrives is dropped
        self.dropping = False  # what arrives is dropped (lingering, or a refusal)
        self.raw: asyncio.Transport | None = None
        self._linger_timer: asyncio.TimerHandle | None = None
        self._dropped = 0

    def wrapped(self, transport: asyncio.Transport) -> asyncio.Transport:
        """The transport for uvicorn's code to write to and close."""
        self.raw = transport
        return cast(asyncio.Transport, _Transport(transport, self))

    def must_linger(self) -> bool:
        raise NotImplementedError

    def stop_timers(self) -> None:
        """Cancel the protocol's timers: the connection is ending."""
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None

    def dropped(self, data: bytes) -> bool:
        """Whether `data` is dropped, not read."""
        if not self.dropping:
            return False
        self._dropped += len(data)
        if self.lingering and self._dropped > self.limits.linger_bytes:
            self.close_now()
        return True

    def close(self) -> None:
        """Close, lingering if the client may still be sending this request."""
        if self.raw is None:
            raise RuntimeError("closing a connection that was never made")
        if self.lingering or self.raw.is_closing():
            return
        if self.must_linger():
            self.linger()
        else:
            self.raw.close()

    def linger(self) -> None:
        """Shut the sending side once the answer is out, read off and drop what the client
        still sends; close when it closes, or past the linger limits."""
        if self.raw is None:
            raise RuntimeError("lingering on a connection that was never made")
        self.lingering = self.dropping = True
        self.stop_timers()
        if self.raw.is_closing():
            return
        try:
            if self.raw.can_write_eof():
                self.raw.write_eof()
        except OSError:  # the client is gone already (ENOTCONN): nothing to linger for
            self.raw.close()
            return
        self.raw.resume_reading()
        self._linger_timer = self.loop.call_later(self.limits.linger_timeout, self.close_now)

    def close_now(self) -> None:
        if self.raw is not None:
            self.raw.close()


class _Transport:
    """The connection's transport as uvicorn's code sees it: closing it closes lingering
    when the client may still be sending, and nothing is written once that began."""

    def __init__(self, transport: asyncio.Transport, protocol: Lingering) -> None:
        self._transport = transport
        self._protocol = protocol

    def write(self, data: bytes) -> None:
        if not self._protocol.lingering:
            self._transport.write(data)

    def close(self) -> None:
        self._protocol.close()

    def is_closing(self) -> bool:
        return self._protocol.lingering or self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
