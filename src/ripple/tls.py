"""The gateway's TLS: a server context made from a PEM certificate (its chain after it) and
key, TLS 1.2 or newer with forward-secret AEAD ciphers only, reloaded in place on SIGHUP so a
rotated certificate reaches the next connection without dropping the open ones.

Settings, rotation and deployments behind a proxy: docs/gateway.md, "TLS".
"""

from __future__ import annotations

import ipaddress
import logging
import ssl
from pathlib import Path

__all__ = ["Certificate", "TlsError", "plain_http_problem"]

log = logging.getLogger(__name__)

# TLS 1.2's forward-secret AEAD suites (TLS 1.3 has only such suites, and OpenSSL's own list)
CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"


class TlsError(Exception):
    """A certificate or key that cannot be served: one line naming the file and why."""


def plain_http_problem(address: str, *, production: bool, allowed: bool) -> str | None:
    """Why the gateway may not serve plain HTTP on `address` (HOST:PORT): in production, off
    loopback, unless `allowed` (`s3.allow-plain-http`, which is logged). None: it may."""
    host = address.rpartition(":")[0].strip("[]")
    if not production or _loopback(host):
        return None
    if allowed:
        log.warning(
            "serving plain HTTP on %s in production: s3.allow-plain-http says a proxy in front "
            "terminates TLS",
            address,
        )
        return None
    return (
        f"mode is production and s3.address {address} is off loopback: set s3.tls-cert and "
        "s3.tls-key (RIPPLE_S3_TLS_CERT, RIPPLE_S3_TLS_KEY) to serve HTTPS, or "
        "s3.allow-plain-http = true behind a proxy that terminates TLS"
    )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name, or "" (every address)
        return False


class Certificate:
    """The server context for `cert` and `key`; `reload` reads both again into the same
    context, which every new connection's handshake uses."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.cert = cert
        self.key = key
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.context.set_ciphers(CIPHERS)
        self.context.set_alpn_protocols(["http/1.1"])
        self.context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
        self._load()

    def reload(self) -> bool:
        """Read the files again; on failure keep serving the certificate loaded before and
        log why. Whether the new one is served."""
        try:
            self._load()
        except TlsError as e:
            log.error("%s; still serving the certificate loaded before", e)
            return False
        log.warning("TLS certificate %s reloaded", self.cert)
        return True

    def _load(self) -> None:
        for what, path in (("s3.tls-cert", self.cert), ("s3.tls-key", self.key)):
            if not path.is_file():
                raise TlsError(f"{what} {str(path)!r} is not a readable file")
        try:
            self.context.load_cert_chain(self.cert, self.key)
        except ssl.SSLError as e:
            raise TlsError(
                f"cannot serve TLS with s3.tls-cert {str(self.cert)!r} and s3.tls-key "
                f"{str(self.key)!r}: {e.reason or e} (PEM files, the key matching the "
                "certificate, its chain after it)"
            ) from None
