"""Certificates the TLS tests make: an authority of the test's own (`trustme`), a server
certificate from it for 127.0.0.1 and localhost as PEM files, and what a client sees."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import trustme
from cryptography import x509

HOSTS = ("127.0.0.1", "localhost")


def authority(directory: Path, name: str = "ca") -> tuple[trustme.CA, Path]:
    """A new certificate authority and its certificate's PEM file in `directory`."""
    ca = trustme.CA()
    ca_file = directory / f"{name}.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return ca, ca_file


def issue(
    ca: trustme.CA, directory: Path, name: str = "server", hosts: tuple[str, ...] = HOSTS
) -> tuple[Path, Path]:
    """A certificate for `hosts` from `ca`, its chain after it, and its key, as PEM files."""
    leaf = ca.issue_cert(*hosts)
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    leaf.private_key_pem.write_to_path(str(key))
    cert.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    return cert, key


def trusting(ca_file: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca_file))


def served_serial(
    port: int, ca_file: Path, *, mine: tuple[Path, Path] | None = None, alpn: str | None = None
) -> int:
    """The serial number of the certificate a new connection to 127.0.0.1:`port` is shown;
    with `mine` (a certificate and its key), showing one to a server that asks; with `alpn`,
    offering that protocol (gRPC's is `h2`)."""
    context = trusting(ca_file)
    if alpn is not None:
        context.set_alpn_protocols([alpn])
    if mine is not None:
        context.load_cert_chain(*mine)
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


class Pki:
    """Under `directory`: the server's authority (`ca`, `ca_file`) and certificate (`cert`,
    `key`), and the authority of client certificates (`clients`, `clients_file`)."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True)
        self.directory = directory
        self.ca, self.ca_file = authority(directory, "ca")
        self.cert, self.key = issue(self.ca, directory, "server")
        self.clients, self.clients_file = authority(directory, "clients-ca")
