"""What a handler reads off a request: headers by name."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from ripple.gateway.request import S3Request


def _request(headers: list[tuple[bytes, bytes]]) -> S3Request:
    scope = {
        "type": "http",
        "method": "PUT",
        "path": "/bkt/k",
        "raw_path": b"/bkt/k",
        "query_string": b"",
        "headers": headers,
    }
    none: Any = None
    return S3Request(Request(scope), none, none, "bkt", "k", {})


def test_a_header_is_its_first_value_by_any_case_of_its_name() -> None:
    req = _request(
        [
            (b"x-amz-meta-color", b"red"),
            (b"content-type", b"text/plain"),
            (b"x-amz-meta-color", b"blue"),
            (b"x-amz-meta-caf\xc3\xa9", b"caf\xc3\xa9"),
        ]
    )
    assert req.header("x-amz-meta-color") == "red"  # as Starlette's Headers.get answers
    assert req.header("Content-Type") == "text/plain"
    assert req.header("x-amz-meta-caf\xc3\xa9") == "caf\xc3\xa9"  # Latin-1, as ASGI decodes
    assert req.header("if-match") == ""
    assert req.header("if-match", "*") == "*"
