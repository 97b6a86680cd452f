"""The checksums of multipart objects: COMPOSITE (the checksum of the parts' checksums) and
FULL_OBJECT CRCs joined from the parts' CRCs, against values computed over the whole data
and against the values Ceph's s3-tests publish for three 5 MiB parts of 'A', 'B' and 'C'."""

from __future__ import annotations

import os
import random

import pytest

from ripple.gateway.checksums import (
    checksum_for,
    combine_crc,
    composite,
    decode,
    element_of,
    encode,
    header_of,
)
from ripple.gateway.errors import S3Error

MiB = 1024 * 1024


def _digest(algorithm: str, data: bytes) -> bytes:
    hasher = checksum_for(algorithm)
    hasher.update(data)
    return hasher.digest()


@pytest.mark.parametrize("algorithm", ["crc32", "crc32c", "crc64nvme"])
def test_combined_crcs_are_the_crc_of_the_whole(algorithm: str) -> None:
    rng = random.Random(7)
    for _ in range(20):
        first, second = os.urandom(rng.randrange(0, 3000)), os.urandom(rng.randrange(0, 3000))
        joined = combine_crc(
            algorithm, _digest(algorithm, first), _digest(algorithm, second), len(second)
        )
        assert joined == _digest(algorithm, first + second)


@pytest.mark.parametrize(
    ("algorithm", "expected"),
    [("crc32", "WgDhBQ=="), ("crc32c", "xU+Krw=="), ("crc64nvme", "i+6LR0y3eFo=")],
)
def test_full_object_crc_of_three_parts(algorithm: str, expected: str) -> None:
    parts = [_digest(algorithm, letter * (5 * MiB)) for letter in (b"A", b"B", b"C")]
    whole = parts[0]
    for part in parts[1:]:
        whole = combine_crc(algorithm, whole, part, 5 * MiB)
    assert encode(whole) == expected


@pytest.mark.parametrize(
    ("algorithm", "expected"),
    [
        ("sha256", "uWBwpe1dxI4Vw8Gf0X9ynOdw/SS6VBzfWm9giiv1sf4="),
        ("sha1", "sizjvY4eud3MrcHdZM3cQ/ol39o="),
    ],
)
def test_composite_checksum_of_three_parts(algorithm: str, expected: str) -> None:
    parts = [_digest(algorithm, letter * (5 * MiB)) for letter in (b"A", b"B", b"C")]
    assert encode(composite(algorithm, parts)) == expected


def test_names_and_values() -> None:
    assert header_of("SHA256") == "x-amz-checksum-sha256"
    assert element_of("crc64nvme") == "ChecksumCRC64NVME"
    assert decode("crc32", "AAAAAA==") == b"\0\0\0\0"
    assert decode("crc32", "AAAAAAA=") is None  # five bytes
    assert decode("sha256", "bad") is None
    with pytest.raises(S3Error) as e:
        header_of("md4")
    assert e.value.code == "InvalidRequest"
