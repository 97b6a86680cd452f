"""Certificates for the TLS tests, made by the test's own authorities (`trustme`), and the
serial number of the certificate a listener shows a new connection."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import trustme
from cryptography import x509


def issue(ca: trustme.CA, directory: Path, name: str) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost from `ca`, its chain after it, and its key,
    as PEM files."""
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    leaf.private_key_pem.write_to_path(str(key))
    cert.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    return cert, key


def authority(directory: Path, name: str) -> tuple[trustme.CA, Path]:
    """A new certificate authority and its certificate as a PEM file."""
    ca = trustme.CA()
    ca_file = directory / f"{name}.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return ca, ca_file


class Pki:
    """Under `directory`: the server's authority (`ca`, `ca_file`) and certificate (`cert`,
    `key`), and the authority of client certificates (`clients`, `clients_file`)."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True)
        self.directory = directory
        self.ca, self.ca_file = authority(directory, "ca")
        self.cert, self.key = issue(self.ca, directory, "server")
        self.clients, self.clients_file = authority(directory, "clients-ca")


def served_serial(port: int, ca_file: Path, mine: tuple[Path, Path] | None = None) -> int:
    """The serial number of the certificate a new gRPC connection to 127.0.0.1:`port` is
    shown (with `mine`, a client certificate and key, for a server that asks for one)."""
    context = ssl.create_default_context(cafile=str(ca_file))
    context.set_alpn_protocols(["h2"])  # gRPC's
    if mine is not None:
        context.load_cert_chain(*mine)
    return _peer_serial(port, context)


def https_serial(port: int, ca_file: Path) -> int:
    """The serial number of the certificate a new HTTPS connection to `port` is shown."""
    return _peer_serial(port, ssl.create_default_context(cafile=str(ca_file)))


def _peer_serial(port: int, context: ssl.SSLContext) -> int:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    if der is None:
        raise AssertionError("the server showed no certificate")
    return x509.load_der_x509_certificate(der).serial_number


def serial_of(cert: Path) -> int:
    return x509.load_pem_x509_certificate(cert.read_bytes()).serial_number
