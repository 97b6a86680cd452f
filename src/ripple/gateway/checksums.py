"""S3's additional checksums (`x-amz-checksum-*`): CRC32, CRC32C, CRC64NVME, SHA-1 and
SHA-256, computed as a payload streams, verified, and combined for multipart objects.

`Checksums` computes several checksums of one payload (S3's base64 form) and verifies
them against what the client sent; `checksum_for` is one such hasher. For a multipart
object, `composite` is S3's COMPOSITE checksum (the checksum of the parts' binary
checksums, shown with `-<part count>`) and `combine_crc` joins the CRCs of consecutive
pieces into the CRC of the whole (FULL_OBJECT), without reading the data again.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import zlib
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Protocol

from awscrt import checksums as awscrt_checksums

from ripple.gateway.errors import S3Error

CHECKSUM_PREFIX = "x-amz-checksum-"
# x-amz-checksum-* headers that are not checksums of the body
NOT_CHECKSUMS = frozenset(
    {"x-amz-checksum-type", "x-amz-checksum-mode", "x-amz-checksum-algorithm"}
)
FULL_OBJECT = "FULL_OBJECT"
COMPOSITE = "COMPOSITE"
# reflected polynomial and width of each CRC; all three start and end with all ones
_CRCS = {
    "crc32": (0xEDB88320, 32),
    "crc32c": (0x82F63B78, 32),
    "crc64nvme": (0x9A6C9329AC4BC9B5, 64),
}


class Hasher(Protocol):
    """What hashlib's objects offer: the checksums below are used the same way."""

    def update(self, data: bytes, /) -> None: ...
    def digest(self) -> bytes: ...


class _Crc:
    """A CRC as a hasher: `step(data, crc)` extends a CRC (as zlib.crc32 does)."""

    def __init__(self, step: Callable[[bytes, int], int], size: int) -> None:
        self._step, self._size, self._crc = step, size, 0

    def update(self, data: bytes, /) -> None:
        self._crc = self._step(data, self._crc)

    def digest(self) -> bytes:
        return self._crc.to_bytes(self._size, "big")


_ALGORITHMS: dict[str, tuple[str, Callable[[], Hasher]]] = {
    # name in x-amz-checksum-<name> → (name S3 shows in messages, factory)
    # CRC-32C and CRC-64/NVME from AWS's C runtime (orders of magnitude faster than a
    # Python table, and without the GIL): a copy computes them over data no client sends
    "crc32": ("CRC32", lambda: _Crc(zlib.crc32, 4)),
    "crc32c": ("CRC32C", lambda: _Crc(awscrt_checksums.crc32c, 4)),
    "crc64nvme": ("CRC64NVME", lambda: _Crc(awscrt_checksums.crc64nvme, 8)),
    "sha1": ("SHA1", hashlib.sha1),
    "sha256": ("SHA256", hashlib.sha256),
}


def _algorithm(name: str) -> str:
    """'crc32' from 'crc32', 'CRC32' or 'x-amz-checksum-crc32'; S3Error when unsupported."""
    key = name.strip().lower().removeprefix(CHECKSUM_PREFIX)
    if key not in _ALGORITHMS:
        supported = ", ".join(CHECKSUM_PREFIX + known for known in _ALGORITHMS)
        raise S3Error(
            "InvalidRequest", f"Checksum {name!r} is not supported; use one of {supported}."
        )
    return key


def checksum_for(name: str) -> Hasher:
    """A fresh hasher for a checksum algorithm ('crc32' or 'x-amz-checksum-crc32'...)."""
    return _ALGORITHMS[_algorithm(name)][1]()


class Checksums:
    """Several checksums of one payload, computed as it streams and checked at the end."""

    def __init__(self, algorithms: Iterable[str]) -> None:
        self._hashers = {_algorithm(name): checksum_for(name) for name in algorithms}

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> Checksums:
        """The checksums a request's `x-amz-checksum-*` headers (lower-case names) ask for."""
        return cls(
            name
            for name in headers
            if name.startswith(CHECKSUM_PREFIX) and name not in NOT_CHECKSUMS
        )

    @property
    def names(self) -> list[str]:
        """Header names of the checksums computed ('x-amz-checksum-crc32'...)."""
        return [CHECKSUM_PREFIX + key for key in self._hashers]

    def update(self, data: bytes) -> None:
        for hasher in self._hashers.values():
            hasher.update(data)

    def digests(self) -> dict[str, str]:
        """Each checksum so far in base64, by header name."""
        return {
            CHECKSUM_PREFIX + key: base64.b64encode(hasher.digest()).decode("ascii")
            for key, hasher in self._hashers.items()
        }

    def verify(self, expected: Mapping[str, str]) -> None:
        """Check every computed checksum against `expected` (header name → base64 value)."""
        for key, hasher in self._hashers.items():
            name = CHECKSUM_PREFIX + key
            label = _ALGORITHMS[key][0]
            digest = hasher.digest()
            value = expected.get(name)
            if value is None:
                raise S3Error("InvalidRequest", f"The {name} value is missing; send it.")
            try:
                claimed = base64.b64decode(value.strip(), validate=True)
            except ValueError:
                claimed = b""
            if len(claimed) != len(digest):
                raise S3Error(
                    "InvalidRequest",
                    f"Value for {name} is invalid; send the base64 of the {label} checksum.",
                )
            if not hmac.compare_digest(claimed, digest):
                raise S3Error(
                    "BadDigest",
                    f"The {label} you specified did not match the calculated checksum; "
                    "resend the data.",
                )


def verify_checksums(expected: Mapping[str, str], data: bytes) -> dict[str, str]:
    """Check a whole payload against the `x-amz-checksum-*` in `expected`; the digests."""
    checksums = Checksums.from_headers(expected)
    checksums.update(data)
    checksums.verify(expected)
    return checksums.digests()


ALGORITHMS = tuple(label for label, _ in _ALGORITHMS.values())  # CRC32, …, SHA256


def algorithm_label(name: str) -> str:
    """S3's name of an algorithm ('SHA256') from 'sha256', 'SHA256' or its header name;
    `InvalidRequest` when ripple does not support it."""
    return _ALGORITHMS[_algorithm(name)][0]


def header_of(algorithm: str) -> str:
    """The header (and trailer) of an algorithm's checksum: 'x-amz-checksum-sha256'."""
    return CHECKSUM_PREFIX + _algorithm(algorithm)


def element_of(algorithm: str) -> str:
    """The XML element (and boto3 field) of an algorithm's checksum: 'ChecksumSHA256'."""
    return "Checksum" + algorithm_label(algorithm)


def decode(algorithm: str, value: str) -> bytes | None:
    """The binary checksum a base64 value holds; None unless it is exactly the size of
    the algorithm's checksum."""
    try:
        raw = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == len(checksum_for(algorithm).digest()) else None


def encode(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def composite(algorithm: str, parts: Iterable[bytes]) -> bytes:
    """S3's COMPOSITE checksum of a multipart object: the checksum of the concatenated
    binary checksums of its parts (shown with `-<part count>` after it)."""
    hasher = checksum_for(algorithm)
    for part in parts:
        hasher.update(part)
    return hasher.digest()


def is_crc(algorithm: str) -> bool:
    return _algorithm(algorithm) in _CRCS


def combine_crc(algorithm: str, first: bytes, second: bytes, second_length: int) -> bytes:
    """The CRC of A followed by B, from the CRC of A, the CRC of B and B's length (zlib's
    crc32_combine, for any of the three CRCs): how a FULL_OBJECT checksum of a multipart
    object is made from its parts' checksums."""
    key = _algorithm(algorithm)
    poly, width = _CRCS[key]
    crc = int.from_bytes(first, "big")
    power = 0
    while second_length:
        if second_length & 1:
            crc = _apply(_zeros_operator(poly, width, power), crc)
        second_length >>= 1
        power += 1
    return (crc ^ int.from_bytes(second, "big")).to_bytes(width // 8, "big")


def _apply(matrix: tuple[int, ...], vector: int) -> int:
    """A GF(2) matrix (one int per column) times a vector (the bits of an int)."""
    result, column = 0, 0
    while vector:
        if vector & 1:
            result ^= matrix[column]
        vector >>= 1
        column += 1
    return result


@cache
def _zeros_operator(poly: int, width: int, power: int) -> tuple[int, ...]:
    """The linear map that feeds 2**power zero bytes through a CRC register."""
    if power == 0:
        one_bit = (poly, *(1 << n for n in range(width - 1)))  # one zero bit
        operator = one_bit
        for _ in range(3):  # 2, 4, 8 zero bits: one byte
            operator = tuple(_apply(operator, column) for column in operator)
        return operator
    half = _zeros_operator(poly, width, power - 1)
    return tuple(_apply(half, column) for column in half)
