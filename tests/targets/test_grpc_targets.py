"""gRPC target strings read as gRPC reads them (`ripple.targets.grpc_targets`): the forms of
its naming doc, the spellings gRPC also takes (any case of scheme, percent-encoding, a query),
and refusals for what it would not connect to as written."""

from __future__ import annotations

import pytest

from ripple.targets.grpc_targets import local_entry, parse_grpc_target


@pytest.mark.parametrize(
    ("target", "scheme", "addresses"),
    [
        ("127.0.0.1:8085", "dns", [("127.0.0.1", 8085)]),
        ("localhost:8085", "dns", [("localhost", 8085)]),  # `localhost` is no resolver
        ("pubsub.example.test", "dns", [("pubsub.example.test", 443)]),
        ("[::1]:8085", "dns", [("::1", 8085)]),
        ("::1", "dns", [("::1", 443)]),
        ("dns:///pubsub.example.test:8085", "dns", [("pubsub.example.test", 8085)]),
        ("dns:pubsub.example.test:8085", "dns", [("pubsub.example.test", 8085)]),
        ("dns:///[fd00:ec2::254]", "dns", [("fd00:ec2::254", 443)]),
        # gRPC percent-decodes, matches the scheme in any case, and drops query and fragment
        ("dns:///%31%32%37.0.0.1:8085", "dns", [("127.0.0.1", 8085)]),
        ("%31%36%39.254.169.254:80", "dns", [("169.254.169.254", 80)]),
        ("DNS:///10.0.0.1:80?x=1#y", "dns", [("10.0.0.1", 80)]),
        ("ipv4:127.0.0.1:8085", "ipv4", [("127.0.0.1", 8085)]),
        ("IPv4:203.0.113.7,10.1.2.3:80", "ipv4", [("203.0.113.7", 443), ("10.1.2.3", 80)]),
        ("ipv4:%31%30.0.0.1:80", "ipv4", [("10.0.0.1", 80)]),
        ("ipv4:///127.0.0.1:80", "ipv4", [("127.0.0.1", 80)]),
        ("ipv6:[::1]:443", "ipv6", [("::1", 443)]),
        ("ipv6:::ffff:127.0.0.1", "ipv6", [("::ffff:127.0.0.1", 443)]),
        ("ipv6:[fe80::1%25eth0]:80,[2001:db8::1]:81", "ipv6",
         [("fe80::1%eth0", 80), ("2001:db8::1", 81)]),
    ],
)  # fmt: skip
def test_network_targets(target: str, scheme: str, addresses: list[tuple[str, int]]) -> None:
    parsed = parse_grpc_target(target)
    assert (parsed.scheme, list(parsed.addresses)) == (scheme, addresses)
    assert (parsed.local, parsed.authority, parsed.discovered) == ("", "", False)


def test_a_dns_server_of_its_own_is_kept() -> None:
    parsed = parse_grpc_target("dns://10.0.0.53:53/pubsub.example.test:443")
    assert parsed.authority == "10.0.0.53:53"
    assert parsed.addresses == (("pubsub.example.test", 443),)


@pytest.mark.parametrize(
    ("target", "local"),
    [
        ("unix:/run/emulator.sock", "unix:/run/emulator.sock"),
        ("unix:///run/emulator.sock", "unix:/run/emulator.sock"),
        ("UNIX:%2Frun%2Femulator.sock", "unix:/run/emulator.sock"),
        ("unix:relative.sock", "unix:relative.sock"),
        ("unix-abstract:emulator", "unix-abstract:emulator"),
        ("vsock:3:8085", "vsock:3:8085"),
        ("vsock:03:08085", "vsock:3:8085"),
    ],
)
def test_local_sockets(target: str, local: str) -> None:
    parsed = parse_grpc_target(target)
    assert (parsed.local, parsed.addresses) == (local, ())
    assert local_entry(target) == local


@pytest.mark.parametrize("target", ["xds:///pubsub", "google-c2p:///pubsub.googleapis.com"])
def test_discovery_schemes(target: str) -> None:
    parsed = parse_grpc_target(target)
    assert parsed.discovered
    assert parsed.addresses == ()


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("", "empty"),
        (" 127.0.0.1:80", "spaces"),
        ("ipv4:127.1:80", "'127.1' is not an IPv4 address"),  # gRPC refuses it too
        ("ipv4:2130706433:80", "not an IPv4 address"),
        ("ipv4:0127.0.0.1:80", "not an IPv4 address"),
        ("ipv4:127.0.0.1:", "empty port"),
        ("ipv4://10.0.0.53/127.0.0.1:80", "takes no authority"),
        ("ipv6:[::1:80", "not [ADDRESS]:PORT"),
        ("ipv6:127.0.0.1", "not an IPv6 address"),
        ("127.0.0.1:99999", "port '99999'"),
        ("127.0.0.1:http", "port 'http'"),
        ("dns:////127.0.0.1:80", "names no host"),
        (":80", "names no host"),
        ("http://127.0.0.1:80", "names no host"),
        ("unix://host/x.sock", "absolute path"),
        ("unix:", "names no socket"),
        ("vsock:host:80", "vsock takes CID:PORT"),
    ],
)
def test_what_grpc_would_not_read_as_written_is_refused(target: str, says: str) -> None:
    with pytest.raises(ValueError, match="gRPC target") as raised:
        parse_grpc_target(target)
    assert says in str(raised.value)


def test_local_entry_takes_only_local_sockets() -> None:
    with pytest.raises(ValueError, match="not unix:PATH"):
        local_entry("127.0.0.1:80")
