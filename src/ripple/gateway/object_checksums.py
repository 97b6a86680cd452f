"""The additional checksum kept with each object version and multipart upload (the
metabase's `Checksum`): what requests declare and what responses show of it.

- PutObject keeps the checksum its body was verified against (`of_received`): FULL_OBJECT.
- CopyObject keeps the source's, or computes the one `x-amz-checksum-algorithm` asks for
  (`requested_algorithm`).
- GET and HEAD with `x-amz-checksum-mode: ENABLED` show it (`shown_headers`): for the whole
  object, or for one part (`partNumber`) of a multipart object; never for a byte range.
"""

from __future__ import annotations

from xml.etree.ElementTree import Element

from ripple.gateway import xml
from ripple.gateway.body import Received
from ripple.gateway.checksums import (
    ALGORITHMS,
    COMPOSITE,
    FULL_OBJECT,
    algorithm_label,
    decode,
    element_of,
    encode,
    header_of,
)
from ripple.gateway.errors import S3Error
from ripple.gateway.request import S3Request
from ripple.metabase import Checksum


def shown_value(checksum: Checksum) -> str:
    """The value S3 shows: a COMPOSITE one with `-<part count>` after it."""
    if checksum.type == COMPOSITE and checksum.parts:
        return f"{checksum.value}-{len(checksum.parts)}"
    return checksum.value


def response_headers(checksum: Checksum | None) -> dict[str, str]:
    """`x-amz-checksum-<algorithm>` and `x-amz-checksum-type` of a version (none without)."""
    if checksum is None or not checksum.value:
        return {}
    return {
        header_of(checksum.algorithm): shown_value(checksum),
        "x-amz-checksum-type": checksum.type,
    }


def add_elements(parent: Element, checksum: Checksum | None, *, algorithm: bool = False) -> None:
    """`<ChecksumSHA256>` and `<ChecksumType>` (and `<ChecksumAlgorithm>`) under `parent`."""
    if checksum is None:
        return
    if algorithm:
        xml.add(parent, "ChecksumAlgorithm", checksum.algorithm)
    if checksum.value:
        xml.add(parent, element_of(checksum.algorithm), shown_value(checksum))
    xml.add(parent, "ChecksumType", checksum.type)


def checksum_mode(req: S3Request) -> bool:
    """Whether GET / HEAD asked for the checksum (`x-amz-checksum-mode: ENABLED`)."""
    mode = req.header("x-amz-checksum-mode")
    if not mode:
        return False
    if mode.upper() != "ENABLED":
        raise S3Error("InvalidRequest", "Value for x-amz-checksum-mode header is invalid.")
    return True


def shown_headers(req: S3Request, checksum: Checksum | None, part: int | None) -> dict[str, str]:
    """What GET / HEAD answer of a version's checksum: the whole object's, or part `part`'s
    (a part of an object written in one piece is the whole object); none unless asked."""
    if not checksum_mode(req) or checksum is None:
        return {}
    if part is None or (part == 1 and not checksum.parts):
        return response_headers(checksum)
    if part <= len(checksum.parts):
        return {header_of(checksum.algorithm): checksum.parts[part - 1]}
    return {}


def of_received(received: Received) -> Checksum | None:
    """The FULL_OBJECT checksum a PutObject body was verified against, if it sent one."""
    for name, value in received.checksums.items():
        algorithm = algorithm_label(name)
        return Checksum(algorithm, FULL_OBJECT, encode(decode(algorithm, value) or b""))
    return None


def requested_algorithm(req: S3Request) -> str | None:
    """The algorithm `x-amz-checksum-algorithm` names (CreateMultipartUpload, CopyObject),
    as S3 names it ('SHA256'); one ripple does not support is refused."""
    name = req.header("x-amz-checksum-algorithm")
    if not name:
        return None
    if name.upper() not in ALGORITHMS:
        raise S3Error(
            "InvalidRequest",
            "Checksum algorithm provided is unsupported. Please try again with any of the "
            f"valid types: [{', '.join(ALGORITHMS)}]",
        )
    return name.upper()
