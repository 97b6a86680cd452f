"""gRPC target strings: where a channel opened on one would connect, so the destination
guard (`ripple.targets.guard`) can judge an explicit Pub/Sub `endpoint` before gRPC does.

gRPC reads a target as a URI whose scheme names the resolver (its doc/naming.md), and the
channel connects wherever that resolver says; so this reads it the same way:

| target | where it connects |
|---|---|
| `host:port`, `host`, `[v6]:port`, a scheme without a resolver | as `dns:///` + the target |
| `dns:host[:port]`, `dns:///host[:port]` | the addresses `host` resolves to (port 443 if none) |
| `dns://authority/host[:port]` | the same, asked of the DNS server `authority` |
| `ipv4:a.b.c.d[:port][,…]`, `ipv6:addr` / `ipv6:[addr]:port[,…]` | each address listed |
| `unix:path`, `unix:///absolute`, `unix-abstract:name`, `vsock:cid:port` | a local socket |
| `xds:…`, `google-c2p:…` | wherever a control plane says |

As gRPC does, the scheme is matched in any case, the rest is percent-decoded (`%31%32%37.0.0.1`
is 127.0.0.1) and a query or fragment is ignored. What gRPC would refuse or read otherwise
(`ipv4:127.1`, a port that is not a number, `dns:////…`) is `ValueError` here, so nothing
is let through that this reading does not understand. Pure: no I/O, no gRPC import.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import unquote

__all__ = ["LOCAL_SCHEMES", "GrpcTarget", "local_entry", "parse_grpc_target"]

DEFAULT_PORT = 443
LOCAL_SCHEMES = ("unix", "unix-abstract", "vsock")
# resolvers whose destinations come from elsewhere (a control plane), never from the target
_DISCOVERY = ("xds", "google-c2p")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):(.*)", re.DOTALL)
_PORT = re.compile(r"[0-9]{1,5}")


@dataclass(frozen=True)
class GrpcTarget:
    """One target read: the `(host, port)` pairs a DNS or address target connects to, or
    the local socket it names, or the discovery scheme that decides."""

    target: str  # as given
    scheme: str  # dns, ipv4, ipv6, unix, unix-abstract, vsock, xds, google-c2p
    addresses: tuple[tuple[str, int], ...] = ()  # dns: one name; ipv4/ipv6: addresses
    authority: str = ""  # dns://authority/: the DNS server asked
    local: str = ""  # unix:PATH, unix-abstract:NAME or vsock:CID:PORT, as `local_entry` writes

    @property
    def discovered(self) -> bool:
        """Whether a control plane, not the target, says where it connects."""
        return self.scheme in _DISCOVERY


def parse_grpc_target(target: str) -> GrpcTarget:
    """How gRPC reads `target` (see the module docstring); `ValueError` with one line if it
    is nothing gRPC would connect to as written."""
    if not target or target != target.strip():
        raise ValueError(f"gRPC target {target!r} is empty or has spaces around it")
    match = _SCHEME.fullmatch(target)
    scheme = match[1].lower() if match else ""
    rest = match[2] if match else ""
    if scheme in _DISCOVERY:
        return GrpcTarget(target, scheme)
    if scheme in LOCAL_SCHEMES:
        return GrpcTarget(target, scheme, local=_local(scheme, rest, target))
    if scheme in ("ipv4", "ipv6"):
        authority, path = _authority_and_path(rest)
        if authority:
            raise ValueError(f"gRPC target {target!r}: {scheme}: takes no authority")
        pairs = tuple(_address(scheme, part, target) for part in path.split(","))
        return GrpcTarget(target, scheme, pairs)
    if scheme == "dns":
        authority, path = _authority_and_path(rest)
    else:  # gRPC's default: the whole target is a DNS name
        authority, path = "", _decoded(target)
    return GrpcTarget(target, "dns", (_host_port(path, target),), authority)


def local_entry(text: str) -> str:
    """A `unix:`, `unix-abstract:` or `vsock:` target in one spelling (`unix:///a` is
    `unix:/a`), for comparing an endpoint with the guard's allow list; `ValueError` if
    `text` is none of them."""
    match = _SCHEME.fullmatch(text.strip())
    if match is None or match[1].lower() not in LOCAL_SCHEMES:
        raise ValueError(f"{text!r} is not unix:PATH, unix-abstract:NAME or vsock:CID:PORT")
    return _local(match[1].lower(), match[2], text)


def _decoded(text: str) -> str:
    """A URI component as gRPC uses it: without query and fragment, percent-decoded."""
    return unquote(re.split(r"[?#]", text, maxsplit=1)[0], errors="strict")


def _authority_and_path(rest: str) -> tuple[str, str]:
    """`//authority/path` or `path` (one leading `/` of the path dropped, as gRPC does)."""
    authority = ""
    if rest.startswith("//"):
        authority, slash, rest = rest[2:].partition("/")
        rest = slash + rest
    path = _decoded(rest)
    return _decoded(authority), path[1:] if path.startswith("/") else path


def _host_port(text: str, target: str) -> tuple[str, int]:
    """`host[:port]`, `[v6][:port]` or a bare IPv6 address, as gRPC splits them."""
    host, port = text, ""
    if text.startswith("["):
        host, bracket, after = text[1:].partition("]")
        if not bracket or (after and not after.startswith(":")):
            raise ValueError(f"gRPC target {target!r}: {text!r} is not [ADDRESS]:PORT")
        port = after[1:] if after else ""
        if after == ":":
            raise ValueError(f"gRPC target {target!r}: {text!r} has an empty port")
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
        if not port:
            raise ValueError(f"gRPC target {target!r}: {text!r} has an empty port")
    if not host or "/" in host or any(c.isspace() for c in host):
        raise ValueError(f"gRPC target {target!r}: {text!r} names no host")
    return host, _port(port, target)


def _port(text: str, target: str) -> int:
    if not text:
        return DEFAULT_PORT
    if not _PORT.fullmatch(text) or int(text) > 65535:
        raise ValueError(f"gRPC target {target!r}: port {text!r} is not a number to 65535")
    return int(text)


def _address(scheme: str, part: str, target: str) -> tuple[str, int]:
    """One `address[:port]` of an ipv4: or ipv6: target; the address must be one."""
    if scheme == "ipv4":
        host, colon, port = part.partition(":")
        if colon and not port:
            raise ValueError(f"gRPC target {target!r}: {part!r} has an empty port")
    elif part.startswith("["):
        v6, number = _host_port(part, target)
        return _checked(ipaddress.IPv6Address, v6, target), number
    else:
        host, port = part, ""
    cls = ipaddress.IPv4Address if scheme == "ipv4" else ipaddress.IPv6Address
    return _checked(cls, host, target), _port(port, target)


def _checked(
    cls: type[ipaddress.IPv4Address] | type[ipaddress.IPv6Address], host: str, target: str
) -> str:
    try:
        cls(host)
    except ValueError:
        version = "IPv4" if cls is ipaddress.IPv4Address else "IPv6"
        raise ValueError(f"gRPC target {target!r}: {host!r} is not an {version} address") from None
    return host


def _local(scheme: str, rest: str, target: str) -> str:
    """The local socket a `unix:`, `unix-abstract:` or `vsock:` target names, one spelling."""
    if scheme == "unix" and rest.startswith("//"):
        authority, _, path = rest[2:].partition("/")
        if authority:
            raise ValueError(f"gRPC target {target!r}: unix:// takes an absolute path")
        rest = "/" + path
    name = _decoded(rest)
    if not name or "\0" in name:
        raise ValueError(f"gRPC target {target!r} names no socket")
    if scheme == "vsock":
        cid, _, port = name.partition(":")
        if not (re.fullmatch(r"[0-9]{1,10}", cid) and _PORT.fullmatch(port)):
            raise ValueError(f"gRPC target {target!r}: vsock takes CID:PORT")
        name = f"{int(cid)}:{int(port)}"
    return f"{scheme}:{name}"
