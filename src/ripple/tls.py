"""TLS for ripple's listeners (the S3 gateway, the pipeline's metrics, a snapshotter's gRPC
API and health): a server context made from a PEM certificate (its chain after it) and key,
TLS 1.2 or newer with forward-secret AEAD ciphers only, reloaded in place on SIGHUP so a
rotated certificate reaches the next connection without dropping the open ones; and the
rule of production mode, no plain text off loopback.

Settings, rotation and deployments behind a proxy: docs/gateway.md, "TLS".
"""

from __future__ import annotations

import ipaddress
import logging
import ssl
from pathlib import Path

__all__ = ["Certificate", "TlsError", "is_loopback", "plain_text_problem"]

log = logging.getLogger(__name__)

# TLS 1.2's forward-secret AEAD suites (TLS 1.3 has only such suites, and OpenSSL's own list)
CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"


class TlsError(Exception):
    """A certificate or key that cannot be served: one line naming the file and why."""


def plain_text_problem(
    listener: str, address: str, *, production: bool, remedy: str, allowed_by: str = ""
) -> str | None:
    """Why `listener` (its setting, e.g. `s3.address`) may not serve plain text on `address`
    (HOST:PORT): in production, off loopback, unless `allowed_by` names the setting that
    says a proxy in front terminates TLS (logged). `remedy` says which settings to add.
    None: it may."""
    host = address.rpartition(":")[0].strip("[]")
    if not production or is_loopback(host):
        return None
    if allowed_by:
        log.warning(
            "serving plain text on %s (%s) in production: %s says a proxy in front terminates TLS",
            address,
            listener,
            allowed_by,
        )
        return None
    return f"mode is production and {listener} {address} is off loopback: {remedy}"


def is_loopback(host: str) -> bool:
    """Is `host` (an address or `localhost`) this machine's loopback? A name or "" (every
    address) is not."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name, or "" (every address)
        return False


class Certificate:
    """The server context for `cert` and `key`; `reload` reads both again into the same
    context, which every new connection's handshake uses. `settings` names the two files in
    errors (`s3.tls-cert`, `s3.tls-key`); with `alpn`, the protocol offered (HTTP/1.1 for the
    gateway; gRPC needs none from here)."""

    def __init__(
        self,
        cert: Path,
        key: Path,
        settings: tuple[str, str] = ("s3.tls-cert", "s3.tls-key"),
        alpn: str | None = "http/1.1",
    ) -> None:
        self.cert = cert
        self.key = key
        self.settings = settings
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.context.set_ciphers(CIPHERS)
        if alpn is not None:
            self.context.set_alpn_protocols([alpn])
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
        cert_setting, key_setting = self.settings
        for what, path in ((cert_setting, self.cert), (key_setting, self.key)):
            if not path.is_file():
                raise TlsError(f"{what} {str(path)!r} is not a readable file")
        try:
            self.context.load_cert_chain(self.cert, self.key)
        except ssl.SSLError as e:
            raise TlsError(
                f"cannot serve TLS with {cert_setting} {str(self.cert)!r} and {key_setting} "
                f"{str(self.key)!r}: {e.reason or e} (PEM files, the key matching the "
                "certificate, its chain after it)"
            ) from None
