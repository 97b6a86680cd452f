"""HTTPS for bench/gateway.py: a certificate authority of the run's own and the gateway's
certificate from it (`trustme`, PEM files in a temporary directory, for 127.0.0.1 and
localhost), what a connection to the gateway negotiates, and the order of the phases that
measure one gateway over HTTPS beside another over HTTP: the same light client, object
size and connections to each, the two sides' phases alternated (A B, then B A) so that a
machine that speeds up or slows down during the run moves both alike.

Imported as `from https import …`: running `python bench/gateway.py` puts bench/ on sys.path.
"""

from __future__ import annotations

import socket
import ssl
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit

import trustme

HOSTS = ("127.0.0.1", "localhost")  # what the gateway's certificate names
WARM = 500  # PUTs, then GETs, per side before the timed part

Side = TypeVar("Side")
Measured = TypeVar("Measured")


@dataclass
class Authority:
    """The run's certificate authority (`ca_file`, what clients trust) and the gateway's
    certificate (its chain after it) and key."""

    ca_file: Path
    cert: Path
    key: Path

    def env(self) -> dict[str, str]:
        """The gateway's settings that serve HTTPS with the certificate."""
        return {"RIPPLE_S3_TLS_CERT": str(self.cert), "RIPPLE_S3_TLS_KEY": str(self.key)}

    def context(self) -> ssl.SSLContext:
        """A client context that trusts this authority only."""
        return ssl.create_default_context(cafile=str(self.ca_file))


@contextmanager
def authority() -> Iterator[Authority]:
    """A new authority and a certificate for HOSTS, their files removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="ripple-bench-tls-") as directory:
        ca, folder = trustme.CA(), Path(directory)
        leaf = ca.issue_cert(*HOSTS)
        made = Authority(folder / "ca.pem", folder / "server.pem", folder / "server.key")
        ca.cert_pem.write_to_path(str(made.ca_file))
        made.cert.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
        leaf.private_key_pem.write_to_path(str(made.key))
        yield made


def negotiated(url: str, context: ssl.SSLContext) -> str:
    """What a connection to the https:// `url` negotiates: "TLSv1.3 TLS_AES_256_GCM_SHA384"."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    with (
        socket.create_connection((host, parts.port or 443), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        cipher = tls.cipher()
        return f"{tls.version()} {cipher[0] if cipher else '?'}"


def alternated(
    measure: Callable[[Side, str, str, list[str]], Measured],
    sides: dict[str, Side],
    keys_of: Callable[[str, int], list[str]],
    n: int,
    rounds: int,
) -> dict[str, list[Measured]]:
    """`measure(side, what, method, keys)` on each side: WARM PUTs and GETs (not kept), then
    `n` PUTs of new keys in `rounds` rounds, then GETs of them in as many, the sides' order
    reversed each round. What each measured, by "NAME PUT" and "NAME GET"."""
    for name, side in sides.items():
        warm = keys_of("warm", min(n, WARM))
        measure(side, f"{name} warm-up PUT", "PUT", warm)
        measure(side, f"{name} warm-up GET", "GET", warm)
    out: dict[str, list[Measured]] = {f"{s} {m}": [] for m in ("PUT", "GET") for s in sides}
    shares = [
        keys_of(f"put-r{r}", n // rounds + (1 if r < n % rounds else 0)) for r in range(rounds)
    ]
    for method in ("PUT", "GET"):
        for r, keys in enumerate(shares):
            order: Sequence[str] = list(sides) if r % 2 == 0 else list(sides)[::-1]
            for name in order:
                what = f"{name} {method} (round {r + 1}/{rounds})"
                out[f"{name} {method}"].append(measure(sides[name], what, method, keys))
    return out
