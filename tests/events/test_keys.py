"""Key encoding in event messages: S3's form encoding with `/` kept, and decoding back."""

from __future__ import annotations

import re
from urllib.parse import unquote_plus

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ripple.events import decode_key, encode_key


@pytest.mark.parametrize(
    ("key", "encoded"),
    [
        ("red flower.jpg", "red+flower.jpg"),
        ("a/b c.txt", "a/b+c.txt"),
        ("dir/sub dir/ü+=.txt", "dir/sub+dir/%C3%BC%2B%3D.txt"),
        ("ü", "%C3%BC"),
        ("+", "%2B"),
        ("=", "%3D"),
        ("%", "%25"),
        ("%2B", "%252B"),
        ("AZaz09-_.*", "AZaz09-_.*"),
        ("~", "%7E"),
        ("a:b;c,d?e&f$g@h#i", "a%3Ab%3Bc%2Cd%3Fe%26f%24g%40h%23i"),
        ("(1) copy!'", "%281%29+copy%21%27"),
        ("/leading//double/", "/leading//double/"),
        ("tab\there\nnl", "tab%09here%0Anl"),
        ("😀", "%F0%9F%98%80"),
        ("", ""),
    ],
)
def test_encode_key(key: str, encoded: str) -> None:
    assert encode_key(key) == encoded
    assert decode_key(encoded) == key


def test_decode_key_plus_is_space() -> None:
    assert decode_key("red+flower.jpg") == "red flower.jpg"
    assert decode_key("a%2Bb") == "a+b"


@given(st.text())
def test_round_trip(key: str) -> None:
    encoded = encode_key(key)
    assert decode_key(encoded) == key
    assert unquote_plus(encoded) == key  # what consumers (AWS's Lambda examples) use
    assert re.fullmatch(r"[A-Za-z0-9\-_.*/+%]*", encoded)
    assert re.fullmatch(r"(?:[^%]|%[0-9A-F]{2})*", encoded)  # escapes are upper-case hex
