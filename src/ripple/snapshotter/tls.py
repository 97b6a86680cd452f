"""A snapshotter's TLS: what its gRPC server serves (`GrpcTls`, from its settings with
`server_tls`; rotated on SIGHUP through gRPC's certificate fetcher) and the PEM files its
publishers use (`read_pem`). Settings and rotation: docs/snapshotter.md, "TLS"."""

from __future__ import annotations

import logging
import ssl
import tempfile
import threading
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]

from ripple.snapshotter.settings import SnapshotterSettings
from ripple.tls import Certificate, TlsError

__all__ = ["GrpcTls", "read_pem", "server_tls"]

log = logging.getLogger(__name__)


def read_pem(path: Path, setting: str, *, authorities: bool = False) -> bytes:
    """The PEM file `setting` names; with `authorities`, checked to hold CA certificates.
    `TlsError` naming the setting when it cannot be read or used."""
    try:
        pem = path.read_bytes()
    except OSError as e:
        raise TlsError(f"{setting} {str(path)!r} is not a readable file: {e.strerror}") from None
    if authorities:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=pem.decode())
        except (ssl.SSLError, ValueError) as e:
            raise TlsError(
                f"{setting} {str(path)!r} is not a bundle of PEM CA certificates: "
                f"{getattr(e, 'reason', None) or e}"
            ) from None
    return pem


class GrpcTls:
    """What the gRPC server serves TLS with: the files of `certificate` (which checks that
    they are a pair, and which the health server serves too) and, with `client_ca`, the CA
    bundle every client's certificate must be signed by (`client_ca_setting` names it).

    `reload()` (SIGHUP) reads them all again; gRPC asks `_fetch` at each new connection's
    handshake, so the next connection is served the new files and open ones keep theirs.
    Files that cannot be served are logged and the ones loaded before stay."""

    def __init__(
        self,
        certificate: Certificate,
        client_ca: Path | None = None,
        client_ca_setting: str = "tls-client-ca",
    ) -> None:
        self.certificate = certificate
        self.client_ca = client_ca
        self.client_ca_setting = client_ca_setting
        self._lock = threading.Lock()
        self._current = self._read()
        self._served = self._current

    def _read(self) -> Any:
        cert_setting, key_setting = self.certificate.settings
        key = read_pem(self.certificate.key, key_setting)
        chain = read_pem(self.certificate.cert, cert_setting)
        _check_pair(chain, key, cert_setting, key_setting)  # the very bytes gRPC is given
        pair = (key, chain)
        authorities = None
        if self.client_ca is not None:
            authorities = read_pem(self.client_ca, self.client_ca_setting, authorities=True)
        return grpc.ssl_server_certificate_configuration([pair], root_certificates=authorities)

    def reload(self) -> bool:
        """Read the files again; whether new connections are served them."""
        try:
            current = self._read()
        except TlsError as e:
            log.error("%s; still serving the certificate loaded before", e)
            return False
        self.certificate.reload()  # the health endpoint's (logs why if it cannot)
        with self._lock:
            self._current = current
        return True

    def _fetch(self) -> Any:
        """gRPC's fetcher: the configuration to serve from now on, or None to keep its own."""
        with self._lock:
            if self._served is self._current:
                return None
            self._served = self._current
            return self._current

    def credentials(self) -> Any:
        return grpc.dynamic_ssl_server_credentials(
            self._current, self._fetch, require_client_authentication=self.client_ca is not None
        )


def server_tls(settings: SnapshotterSettings) -> GrpcTls | None:
    """The TLS `settings` configure for the gRPC server (and its health), loaded; None for
    plain text; `TlsError` naming the setting at fault."""
    files = settings.tls
    if files is None:
        return None
    certificate = Certificate(
        *files, settings=(settings.setting("tls-cert"), settings.setting("tls-key"))
    )
    return GrpcTls(certificate, settings.tls_client_ca, settings.setting("tls-client-ca"))


def _check_pair(chain: bytes, key: bytes, cert_setting: str, key_setting: str) -> None:
    """`TlsError` unless `key` is the private key of `chain`'s first certificate."""
    with tempfile.TemporaryDirectory() as directory:  # the ssl module loads pairs from files
        cert_file, key_file = Path(directory, "cert.pem"), Path(directory, "key.pem")
        cert_file.write_bytes(chain)
        key_file.touch(mode=0o600)
        key_file.write_bytes(key)
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert_file, key_file)
        except ssl.SSLError as e:
            raise TlsError(
                f"cannot serve TLS with {cert_setting} and {key_setting}: {e.reason or e} (PEM "
                "files, the key matching the certificate, its chain after it)"
            ) from None
