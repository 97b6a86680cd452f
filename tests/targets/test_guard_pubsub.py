"""The destination guard and the Pub/Sub target's explicit `endpoint` (issue 24): a gRPC
target, read as gRPC reads it, checked when the topic is configured (every address it names,
a local socket only if allowed, what cannot be checked refused) and again before each batch;
and the allow list of Pub/Sub projects for API topics, with an endpoint or without."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from ripple.config import load_settings
from ripple.notifications.topics import Topic
from ripple.targets.base import Outcome, Result
from ripple.targets.destinations import push_target
from ripple.targets.pubsub import PubSubTarget
from tests.targets.conftest import Use, delivery
from tests.targets.pubsub_fake import FakePublisher

PUBLIC = "203.0.113.7"  # TEST-NET-3: a stand-in for a public address
TOPIC = "pubsub://projects/my-team/topics/photos"


def topic(endpoint: str, *, api: bool = False) -> Topic:
    """A Pub/Sub topic with an `endpoint` argument: of the configuration file, or (`api`)
    made through the topic API (named by its ARN, with the name its owner gave it)."""
    if api:
        return Topic("arn:aws:sns:us-east-1:p:photos", TOPIC, {"endpoint": endpoint}, "photos")
    return Topic("photos", TOPIC, {"endpoint": endpoint})


@pytest.mark.parametrize(
    ("endpoint", "says"),
    [
        ("127.0.0.1:8085", "127.0.0.1 is a loopback address"),
        ("ipv4:127.0.0.1:8085", "127.0.0.1 is a loopback address"),
        ("IPV4:127.0.0.1:8085", "127.0.0.1 is a loopback address"),
        (f"ipv4:{PUBLIC}:443,169.254.169.254:80", "169.254.169.254 is a cloud metadata address"),
        ("ipv6:[::1]:8085", "::1 is a loopback address"),
        ("ipv6:[::ffff:10.0.0.5]:80", "(IPv4 10.0.0.5) is a private address"),
        ("dns:///127.0.0.1:8085", "127.0.0.1 is a loopback address"),
        ("dns:127.0.0.1:8085", "127.0.0.1 is a loopback address"),
        ("dns:///%31%32%37.0.0.1:8085", "127.0.0.1 is a loopback address"),
        ("%31%36%39.254.169.254:80", "169.254.169.254 is a cloud metadata address"),
        ("169.254.169.254:80", "169.254.169.254 is a cloud metadata address"),
        ("[fd00:ec2::254]:80", "fd00:ec2::254 is a cloud metadata address"),
        ("dns:///metadata.example.test:80", "resolves to 169.254.169.254, a cloud metadata"),
        ("unix:/run/emulator.sock", "'unix:/run/emulator.sock' is a local socket"),
        ("unix-abstract:emulator", "'unix-abstract:emulator' is a local socket"),
        ("vsock:2:8085", "'vsock:2:8085' is a local socket"),
        ("dns://10.0.0.53/pubsub.example.test:443", "asks its own DNS server '10.0.0.53'"),
        ("xds:///pubsub", "lets a control plane choose the destination"),
        ("ipv4:127.1:8085", "'127.1' is not an IPv4 address"),
    ],
)
def test_an_endpoint_is_checked_when_its_topic_is_configured(
    use: Use, dns: dict[str, list[str]], endpoint: str, says: str
) -> None:
    dns["metadata.example.test"] = ["169.254.169.254"]
    use()
    for api in (False, True):
        allow = "pubsub:projects/my-team" if api else ""
        use(allow)
        with pytest.raises(ValueError, match="refused in production mode") as refused:
            push_target(topic(endpoint, api=api))
        assert says in str(refused.value)
        assert "\n" not in str(refused.value)
    use(mode="dev")  # dev mode checks nothing
    assert isinstance(push_target(topic(endpoint)), PubSubTarget)


def test_allowed_endpoints_pass(use: Use) -> None:
    use()
    for endpoint in (f"{PUBLIC}:443", f"ipv4:{PUBLIC}:443", f"dns:///{PUBLIC}", "later.example"):
        assert isinstance(push_target(topic(endpoint)), PubSubTarget)
    use("127.0.0.1/32, unix:///run/emulator.sock")
    for endpoint in ("ipv4:127.0.0.1:8085", "unix:/run/emulator.sock", "unix:///run/emulator.sock"):
        assert isinstance(push_target(topic(endpoint)), PubSubTarget)
    with pytest.raises(ValueError, match=r"'unix:/run/other\.sock' is a local socket"):
        push_target(topic("unix:/run/other.sock"))


def test_the_project_allow_list_applies_with_an_endpoint_too(use: Use) -> None:
    """An API topic may name only allowed projects, whether or not it gives an endpoint;
    a topic of the configuration file is the operator's."""
    use()
    without_endpoint = Topic("arn:aws:sns:us-east-1:p:photos", TOPIC, {}, "photos")
    for api_topic in (topic(f"{PUBLIC}:443", api=True), without_endpoint):
        with pytest.raises(ValueError, match="add pubsub:projects/my-team to RIPPLE_DEST"):
            push_target(api_topic)
    assert isinstance(push_target(topic(f"{PUBLIC}:443")), PubSubTarget)
    use("pubsub:projects/my-team")
    assert isinstance(push_target(topic(f"{PUBLIC}:443", api=True)), PubSubTarget)


def test_a_ripple_toml_topic_with_a_refused_endpoint_is_one_line(
    use: Use, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "ripple.toml"
    config.write_text(
        'mode = "production"\n'
        '[topics."projects/my-team/topics/photos"]\n'
        'endpoint = "ipv4:10.1.2.3:8085"\n',
        encoding="utf-8",
    )
    settings = load_settings(config, environ={})
    use(settings.destinations_allow, settings.mode)
    with pytest.raises(ValueError, match=r"^topic ") as refused:
        push_target(settings.topics["projects/my-team/topics/photos"])
    assert str(refused.value) == (
        "topic 'projects/my-team/topics/photos': destination 10.1.2.3 is a private address, "
        "refused in production mode; if it is intended, add 10.1.2.3/32 to "
        "RIPPLE_DESTINATIONS_ALLOW (destinations.allow)"
    )


def publish(target: PubSubTarget, n: int = 2) -> list[Result]:
    target.open()
    try:
        return target.publish([delivery(f"k{i}", n=i) for i in range(n)])
    finally:
        target.close()


def test_every_address_is_checked_again_before_a_batch(use: Use) -> None:
    with FakePublisher() as fake:
        for endpoint in (f"ipv4:{fake.endpoint}", f"dns:///{fake.endpoint}"):
            target = PubSubTarget("projects/p/topics/t", endpoint=endpoint, timeout_s=5)
            use()
            calls = fake.calls
            results = publish(target)
            assert [r.outcome for r in results] == [Outcome.PERMANENT] * 2
            assert "127.0.0.1 is a loopback address" in (results[0].error or "")
            assert fake.calls == calls  # nothing sent
            use("127.0.0.1/32")
            assert publish(target) == [Result(Outcome.OK)] * 2
        assert len(fake.messages) == 4


def test_a_local_socket_is_refused_before_a_batch_unless_allowed(use: Use) -> None:
    with tempfile.TemporaryDirectory() as directory:  # short: a socket path has a limit
        socket_path = f"{directory}/pubsub.sock"
        with FakePublisher(unix=socket_path) as fake:
            target = PubSubTarget("projects/p/topics/t", endpoint=f"unix:{socket_path}")
            use()
            results = publish(target, 1)
            assert results[0].outcome is Outcome.PERMANENT
            assert "is a local socket, refused in production mode" in (results[0].error or "")
            assert fake.calls == 0
            use(f"unix:{socket_path}")
            assert publish(target, 1) == [Result(Outcome.OK)]
            use(mode="dev")
            assert publish(target, 1) == [Result(Outcome.OK)]
            assert len(fake.messages) == 2
