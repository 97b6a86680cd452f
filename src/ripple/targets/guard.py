"""The destination guard: which hosts a push target may connect to.

Whoever may create a topic chooses where ripple connects, so the guard keeps destinations
away from the machine's own services, the private network and the cloud metadata endpoint.
It decides twice: when a topic is configured (`check_host`, `check_pubsub_topic`,
`check_grpc_target`) and each time a target opens a connection (`check_address`), because
what a name resolves to can change. `mode = "dev"` allows everything; `"production"` refuses
those addresses (`DestinationRefused`) unless `destinations.allow` lets them through. The
`ripple` command installs the process-wide guard (`set_default_guard(settings.guard)`)
before any command starts; code that never loaded settings sees the dev-mode default.

Modes, the allow list, gRPC targets and what each target does with the answer:
docs/targets.md, "Destination guard".
"""

from __future__ import annotations

import ipaddress
import re
import socket

from ripple.targets.grpc_targets import LOCAL_SCHEMES, local_entry, parse_grpc_target

__all__ = ["MODES", "DestinationGuard", "DestinationRefused", "default_guard", "set_default_guard"]

MODES = ("dev", "production")
SETTING = "RIPPLE_DESTINATIONS_ALLOW (destinations.allow)"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "168.63.129.16")
)
_REFUSED: tuple[tuple[str, tuple[IPNetwork, ...]], ...] = tuple(
    (kind, tuple(ipaddress.ip_network(n) for n in networks))
    for kind, networks in (
        ("loopback", ("127.0.0.0/8", "::1/128")),
        ("unspecified", ("0.0.0.0/8", "::/128")),
        ("link-local", ("169.254.0.0/16", "fe80::/10")),
        ("private", ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")),
        ("private", ("fc00::/7", "fec0::/10")),
        ("multicast", ("224.0.0.0/4", "ff00::/8")),
        # IETF protocol assignments (192.0.0.192 is a cloud metadata address) and the
        # benchmarking range, which some networks route internally
        ("special-purpose", ("192.0.0.0/24", "198.18.0.0/15")),
    )
)
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_PATTERN = re.compile(rf"^(?:\*\.)?{_LABEL}(?:\.{_LABEL})*$")


class DestinationRefused(ValueError):
    """The guard refuses a destination; the message is one line saying how to allow it."""


def _ipv4(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 one carries (::ffff:a.b.c.d, 6to4), else itself."""
    if isinstance(address, ipaddress.IPv6Address):
        return address.ipv4_mapped or address.sixtofour or address
    return address


def refusal(address: IPAddress) -> str | None:
    """Why production mode refuses `address` ("loopback", "private", …), or None."""
    address = _ipv4(address)
    if address in METADATA:
        return "cloud metadata"
    for kind, networks in _REFUSED:
        if any(address in n for n in networks if n.version == address.version):
            return kind
    if address.is_reserved:
        return "reserved"
    return None


def _ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _normal(host: str) -> str:
    """A host as compared: lower case, without brackets or the root's trailing dot."""
    return host.strip().removeprefix("[").removesuffix("]").rstrip(".").lower()


class DestinationGuard:
    """Which destinations may be connected to: see the module docstring. Made of plain
    values, the allow list and the mode (`ripple.config.Settings.guard` makes the one the
    settings ask for); `ValueError` naming the entry if the list is malformed."""

    def __init__(
        self, allow: str = "", mode: str = "dev", *, secrets_in_cleartext: bool = False
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode
        # `topics.allow-secrets-in-cleartext`: a target may send credentials over a
        # connection without TLS (Kafka SASL on a plain-text listener), in any mode
        self.secrets_in_cleartext = secrets_in_cleartext
        networks: list[IPNetwork] = []
        patterns: list[str] = []
        projects: list[str] = []
        sockets: list[str] = []
        for raw in allow.split(","):
            entry = raw.strip()
            if entry.startswith(_PUBSUB):
                projects.append(_pubsub_project(entry))
                continue
            if entry.partition(":")[0].lower() in LOCAL_SCHEMES:
                try:
                    sockets.append(local_entry(entry))
                except ValueError as e:
                    raise ValueError(f"{SETTING}: entry {entry!r}: {e}") from None
                continue
            parsed = _parse_entry(entry) if entry else None
            if isinstance(parsed, str):
                patterns.append(parsed)
            elif parsed is not None:
                networks.append(parsed)
        self.networks = tuple(networks)
        self.patterns = tuple(patterns)
        self.pubsub_projects = frozenset(projects)
        self.local_sockets = frozenset(sockets)

    @property
    def enforcing(self) -> bool:
        """Whether anything is refused at all (production mode)."""
        return self.mode == "production"

    def __repr__(self) -> str:
        allowed = ",".join([*map(str, self.networks), *self.patterns, *self.local_sockets])
        cleartext = ", secrets_in_cleartext=True" if self.secrets_in_cleartext else ""
        return f"DestinationGuard(allow={allowed!r}, mode={self.mode!r}{cleartext})"

    def allows_name(self, host: str) -> bool:
        """Whether a pattern of the allow list matches the host name."""
        name = _normal(host)
        for pattern in self.patterns:
            if pattern.startswith("*."):
                if name.endswith(pattern[1:]):
                    return True
            elif name == pattern:
                return True
        return False

    def check_host(self, host: str) -> None:
        """Configuration time: `DestinationRefused` if `host` is refused. A name is resolved
        and every address checked; a name that does not resolve passes (see the module
        docstring)."""
        if not self.enforcing:
            return
        address = _ip(_normal(host))
        if address is not None:
            self._check(host, address, resolved=False)
            return
        if self.allows_name(host):
            return
        try:
            addresses = _resolve(_normal(host), None)
        except (OSError, UnicodeError):
            return  # checked again when connecting
        for address in addresses:
            self._check(host, address, resolved=True)

    def check_pubsub_topic(self, topic: str) -> None:
        """An API topic's Pub/Sub topic (`projects/P/topics/T`): in production, `P` must be
        listed as `pubsub:projects/P`; `DestinationRefused` otherwise."""
        if not self.enforcing:
            return
        _, _, rest = topic.partition("projects/")
        project = rest.partition("/")[0]
        if project not in self.pubsub_projects:
            raise DestinationRefused(
                f"Pub/Sub topic {topic!r}: ripple publishes with its own Google credentials, "
                f"so a topic may name only projects the operator allows; add "
                f"pubsub:projects/{project} to {SETTING} if this one is meant"
            )

    def check_grpc_target(self, target: str, *, connecting: bool = False) -> None:
        """A gRPC target (an explicit Pub/Sub endpoint), in production: every address it
        names checked as `check_host` does, or `check_address` when `connecting` (then
        `OSError` if a name does not resolve); `DestinationRefused` for a local socket the
        allow list does not name, and for what cannot be checked (see the module
        docstring)."""
        if not self.enforcing:
            return
        try:
            parsed = parse_grpc_target(target)
        except ValueError as e:
            raise DestinationRefused(
                f"{e}: refused in production mode, which connects only where it can check "
                "(write HOST:PORT, dns:///HOST:PORT, ipv4:ADDRESS:PORT or ipv6:[ADDRESS]:PORT)"
            ) from None
        if parsed.local:
            if parsed.local not in self.local_sockets:
                raise DestinationRefused(
                    f"destination {parsed.local!r} is a local socket, refused in production "
                    f"mode; if it is intended, add {parsed.local} to {SETTING}"
                )
            return
        if parsed.discovered:
            raise DestinationRefused(
                f"gRPC target {target!r}: {parsed.scheme}: lets a control plane choose the "
                "destination, which the guard cannot check; refused in production mode"
            )
        if parsed.authority:
            raise DestinationRefused(
                f"gRPC target {target!r} asks its own DNS server {parsed.authority!r}, whose "
                "answers the guard cannot check; refused in production mode "
                "(write dns:///HOST:PORT)"
            )
        for host, port in parsed.addresses:
            if connecting:
                self.check_address(host, port)
            else:
                self.check_host(host)

    def check_address(self, host: str, port: int) -> list[str]:
        """Connection time: the addresses of `host` a target may connect to, in the order
        the resolver gave them; `[host]` itself when nothing needs checking (dev mode, a
        name an allow pattern matches). `DestinationRefused` if any address is refused,
        `OSError` if the name does not resolve."""
        name = _normal(host)
        if not self.enforcing:
            return [host]
        address = _ip(name)
        if address is not None:
            self._check(host, address, resolved=False)
            return [name]
        if self.allows_name(name):
            return [host]
        try:
            addresses = _resolve(name, port)
        except UnicodeError as e:  # a label longer than 63 characters, …
            raise socket.gaierror(f"cannot resolve {host!r}: {e}") from None
        for address in addresses:
            self._check(host, address, resolved=True)
        return [str(a) for a in addresses]

    def _check(self, host: str, address: IPAddress, *, resolved: bool) -> None:
        v4 = _ipv4(address)
        for a in {address, v4}:
            if any(a.version == n.version and a in n for n in self.networks):
                return
        kind = refusal(address)
        if kind is None:
            return
        article = "an" if kind[0] in "aeiou" else "a"
        shown = str(address) if v4 == address else f"{address} (IPv4 {v4})"
        if resolved:
            what = f"destination {_normal(host)!r} resolves to {shown}, {article} {kind} address"
            hint = f"add {_normal(host)} (or {_cidr(v4)})"
        else:
            what = f"destination {shown} is {article} {kind} address"
            hint = f"add {_cidr(v4)}"
        raise DestinationRefused(
            f"{what}, refused in production mode; if it is intended, {hint} to {SETTING}"
        )


def _cidr(address: IPAddress) -> str:
    return f"{address.compressed.partition('%')[0]}/{address.max_prefixlen}"


def _resolve(host: str, port: int | None) -> list[IPAddress]:
    """Every address `host` resolves to (TCP), without repeats, in the resolver's order."""
    seen: dict[IPAddress, None] = {}
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        address = _ip(str(sockaddr[0]))
        if address is not None:
            seen.setdefault(address)
    if not seen:
        raise socket.gaierror(f"{host!r} resolves to no IP address")
    return list(seen)


_PUBSUB = "pubsub:projects/"
_GCP_PROJECT = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")


def _pubsub_project(entry: str) -> str:
    project = entry.removeprefix(_PUBSUB)
    if not _GCP_PROJECT.match(project):
        raise ValueError(
            f"{SETTING}: entry {entry!r} is not pubsub:projects/GCP_PROJECT_ID "
            "(6 to 30 lower-case letters, digits and hyphens)"
        )
    return project


def _parse_entry(entry: str) -> IPNetwork | str:
    """One entry of the allow list: a network, or a host pattern in lower case."""
    where = f"{SETTING}: entry {entry!r}"
    if "://" in entry:
        raise ValueError(f"{where} is a URL; give its host name or a CIDR instead")
    bare = entry.removeprefix("[").replace("]", "")
    if "/" in bare:
        try:
            return ipaddress.ip_network(bare)
        except ValueError as e:
            try:
                loose = ipaddress.ip_network(bare, strict=False)
            except ValueError:
                raise ValueError(f"{where} is not a CIDR: {e}") from None
            raise ValueError(f"{where} has host bits set; did you mean {loose}?") from None
    address = _ip(bare)
    if address is not None:
        return ipaddress.ip_network(_cidr(address))
    pattern = entry.rstrip(".").lower()
    if _PATTERN.match(pattern):
        return pattern
    raise ValueError(
        f"{where} is neither a CIDR (10.0.0.0/8, ::1/128) "
        "nor a host pattern (hooks.example.com, *.example.com)"
    )


_default = DestinationGuard()


def default_guard() -> DestinationGuard:
    """The process-wide guard the targets consult when they connect."""
    return _default


def set_default_guard(guard: DestinationGuard) -> DestinationGuard:
    """Make `guard` the process-wide guard; the one it replaces (tests put it back)."""
    global _default
    previous, _default = _default, guard
    return previous
