"""The gateway's HTTP protocol (`ripple.gateway.protocol.S3Protocol`) is uvicorn's httptools
protocol with S3's framing rules: it overrides uvicorn's methods, private ones among them
(`_should_upgrade`, `_start_asgi_task`), and calls `_unset_keepalive_if_required`. These
tests fail, naming the method, when a new uvicorn renames or reshapes one of them, instead of
the override silently no longer being called."""

from __future__ import annotations

import inspect

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ripple.gateway.protocol import S3Protocol

OVERRIDDEN = {
    "__init__",
    "connection_made",
    "connection_lost",
    "data_received",
    "on_message_begin",
    "on_url",
    "on_header",
    "on_headers_complete",
    "on_body",
    "on_message_complete",
    "on_response_complete",
    "shutdown",
    "_should_upgrade",
    "_start_asgi_task",
}
CALLED = {"_unset_keepalive_if_required"}


def test_uvicorn_has_every_method_the_protocol_overrides_or_calls() -> None:
    missing = sorted(
        n for n in OVERRIDDEN | CALLED if not callable(getattr(HttpToolsProtocol, n, None))
    )
    assert missing == [], (
        f"uvicorn's HttpToolsProtocol has no {', '.join(missing)} any more: "
        "ripple.gateway.protocol.S3Protocol relies on it"
    )


def test_every_override_takes_what_uvicorn_passes() -> None:
    changed = [
        name
        for name in sorted(OVERRIDDEN)
        if hasattr(HttpToolsProtocol, name)  # (a missing one fails the test above)
        and inspect.signature(getattr(S3Protocol, name)).parameters.keys()
        != inspect.signature(getattr(HttpToolsProtocol, name)).parameters.keys()
    ]
    assert changed == [], f"uvicorn's HttpToolsProtocol changed the parameters of {changed}"


def test_the_list_names_every_override() -> None:
    overrides = {
        name
        for name, value in vars(S3Protocol).items()
        if callable(value) and hasattr(HttpToolsProtocol, name)
    }
    assert overrides == OVERRIDDEN
