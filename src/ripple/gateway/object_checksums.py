"""The additional checksum kept with each object version and multipart upload (the
metabase's `Checksum`): what requests declare and what responses show of it.

- PutObject keeps the checksum its body was verified against (`of_received`): FULL_OBJECT.
- CopyObject keeps the source's, or computes the one `x-amz-checksum-algorithm` asks for
  (`requested_algorithm`).
- CreateMultipartUpload declares an algorithm and a type (`declared`); every part must then
  carry that algorithm's checksum (`part_algorithm`; a FULL_OBJECT upload's part without one
  gets it computed), and CompleteMultipartUpload makes the object's checksum from the
  parts' (`completed`): COMPOSITE, the checksum of their binary checksums shown with
  `-<part count>`; FULL_OBJECT, the CRC of the whole object (CRC32, CRC32C, CRC64NVME).
- GET and HEAD with `x-amz-checksum-mode: ENABLED` show it (`shown_headers`): for the whole
  object, or for one part (`partNumber`) of a multipart object; never for a byte range.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from xml.etree.ElementTree import Element

from ripple.gateway import xml
from ripple.gateway.body import Received
from ripple.gateway.checksums import (
    ALGORITHMS,
    CHECKSUM_PREFIX,
    COMPOSITE,
    FULL_OBJECT,
    NOT_CHECKSUMS,
    algorithm_label,
    combine_crc,
    composite,
    decode,
    element_of,
    encode,
    header_of,
    is_crc,
)
from ripple.gateway.errors import S3Error
from ripple.gateway.parts import Part
from ripple.gateway.request import S3Request
from ripple.metabase import Checksum

TYPES = (FULL_OBJECT, COMPOSITE)


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
    if "x-amz-checksum-mode" not in req.http.headers:
        return False
    if req.header("x-amz-checksum-mode").upper() != "ENABLED":
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


def declared(req: S3Request) -> Checksum | None:
    """The algorithm and type a CreateMultipartUpload declares (`x-amz-checksum-algorithm`,
    `x-amz-checksum-type`); a type without an algorithm, or one the algorithm cannot make
    (SHA-1 and SHA-256 are COMPOSITE only, CRC64NVME FULL_OBJECT only), is refused."""
    kind = req.header("x-amz-checksum-type")
    given = "x-amz-checksum-type" in req.http.headers
    if given and kind.upper() not in TYPES:  # an empty one too
        raise S3Error("InvalidRequest", "Value for x-amz-checksum-type header is invalid.")
    algorithm = requested_algorithm(req)
    if algorithm is None:
        if given:
            raise S3Error(
                "InvalidRequest",
                "The x-amz-checksum-type header can only be used with the "
                "x-amz-checksum-algorithm header.",
            )
        return None
    default = FULL_OBJECT if algorithm == "CRC64NVME" else COMPOSITE
    kind = kind.upper() or default
    if (kind == FULL_OBJECT and not is_crc(algorithm)) or (
        kind == COMPOSITE and algorithm == "CRC64NVME"
    ):
        raise S3Error(
            "InvalidRequest",
            f"The {kind} checksum type cannot be used with the {algorithm.lower()} checksum "
            "algorithm.",
        )
    return Checksum(algorithm, kind)


def requested_algorithm(req: S3Request) -> str | None:
    """The algorithm `x-amz-checksum-algorithm` names (CreateMultipartUpload, CopyObject),
    as S3 names it ('SHA256'); one ripple does not support (an empty one too) is refused."""
    if "x-amz-checksum-algorithm" not in req.http.headers:
        return None
    name = req.header("x-amz-checksum-algorithm")
    if name.upper() not in ALGORITHMS:
        raise S3Error(
            "InvalidRequest",
            "Checksum algorithm provided is unsupported. Please try again with any of the "
            f"valid types: [{', '.join(ALGORITHMS)}]",
        )
    return name.upper()


def sent_algorithms(req: S3Request) -> list[str]:
    """The algorithms of the checksums a request body comes with, as headers or trailers."""
    names = [n for n in req.headers if n.startswith(CHECKSUM_PREFIX) and n not in NOT_CHECKSUMS]
    names += [t.strip().lower() for t in req.header("x-amz-trailer").split(",") if t.strip()]
    return [algorithm_label(n) for n in names if n.startswith(CHECKSUM_PREFIX)]


def part_algorithm(req: S3Request, upload: Checksum | None) -> str | None:
    """Before an UploadPart's body: the algorithm the upload declared, whose checksum the
    part must come with (another is refused; none is refused for a COMPOSITE upload, and
    computed for a FULL_OBJECT one, as S3 does). None: the upload declared none."""
    if upload is None:
        return None
    sent = sent_algorithms(req)
    if any(a != upload.algorithm for a in sent) or (not sent and upload.type == COMPOSITE):
        actual = sent[0].lower() if sent else "null"
        raise S3Error(
            "InvalidRequest",
            "Checksum Type mismatch occurred, expected checksum Type: "
            f"{upload.algorithm.lower()}, actual checksum Type: {actual}",
        )
    return upload.algorithm


def listed_checksums(element: Element) -> dict[str, str]:
    """The `<ChecksumCRC32>`… of one `<Part>` of a CompleteMultipartUpload, by algorithm."""
    found: dict[str, str] = {}
    for algorithm in ALGORITHMS:
        value = xml.text(element, "Checksum" + algorithm)
        if value is not None:
            found[algorithm] = value
    return found


def completed(
    req: S3Request,
    upload: Checksum | None,
    parts: Sequence[Part],
    listed: Sequence[Mapping[str, str]],
) -> Checksum | None:
    """The checksum of the object a CompleteMultipartUpload makes of `parts` (the part
    checksums its document `listed` for each), checked as S3 checks it; None when the
    upload declared no algorithm (then checksums on the request are not kept)."""
    if upload is None:
        for part, sums in zip(parts, listed, strict=True):
            if sums:  # a checksum the upload never asked for: not one of its parts
                raise _invalid_part(part.number, "it carries a checksum the upload did not declare")
        return None
    algorithm, kind = upload.algorithm, upload.type
    asked = req.http.headers.get("x-amz-checksum-type")
    if asked is not None and asked.upper() != kind:
        raise S3Error(
            "InvalidRequest",
            f"The upload was created using the {kind} checksum mode. The complete request "
            "must use the same checksum mode.",
        )
    for part, sums in zip(parts, listed, strict=True):
        _check_listed(algorithm, kind, part, sums)
    raw = [part.checksum for part in parts]
    if kind == COMPOSITE:
        value = composite(algorithm, raw)
    else:
        value = raw[0]
        for part, checksum in zip(parts[1:], raw[1:], strict=True):
            value = combine_crc(algorithm, value, checksum, part.size)
    made = Checksum(algorithm, kind, encode(value), tuple(encode(r) for r in raw))
    _check_claimed(req, made)
    return made


def _check_listed(algorithm: str, kind: str, part: Part, sums: Mapping[str, str]) -> None:
    for other in sums:
        if other != algorithm:
            raise S3Error(
                "BadDigest",
                f"The {other.lower()} you specified for part {part.number} did not match what "
                "we received.",
            )
    if not part.checksum:
        raise _invalid_part(part.number, f"it was stored without its {algorithm} checksum")
    value = sums.get(algorithm)
    if value is None:
        if kind == COMPOSITE:
            raise S3Error(
                "InvalidRequest",
                f"The upload was created using a {algorithm.lower()} checksum. The complete "
                "request must include the checksum for each part. It was missing for part "
                f"{part.number} in the request.",
            )
        return  # a FULL_OBJECT upload's parts may be listed without (S3 uses the stored)
    if decode(algorithm, value) != part.checksum:
        raise _invalid_part(part.number, f"its {algorithm} checksum is not the one given")


def _check_claimed(req: S3Request, made: Checksum) -> None:
    """The object's checksum a CompleteMultipartUpload sent (`x-amz-checksum-<algorithm>`),
    if any, must be the one made (a COMPOSITE one with or without `-<part count>`)."""
    for name, value in req.headers.items():
        if not name.startswith(CHECKSUM_PREFIX) or name in NOT_CHECKSUMS:
            continue
        sent = algorithm_label(name)
        if sent != made.algorithm:
            raise S3Error(
                "InvalidRequest",
                "Checksum Type mismatch occurred, expected checksum Type: "
                f"{made.algorithm.lower()}, actual checksum Type: {sent.lower()}",
            )
        text = value.strip()
        suffix = f"-{len(made.parts)}"
        if made.type == COMPOSITE and text.endswith(suffix):
            text = text.removesuffix(suffix)
        claimed = decode(made.algorithm, text)
        if claimed is None:
            raise S3Error("InvalidRequest", f"Value for {name} header is invalid.")
        if encode(claimed) != made.value:
            raise S3Error(
                "BadDigest",
                f"The {sent.lower()} you specified did not match the calculated checksum.",
            )


def _invalid_part(number: int, why: str) -> S3Error:
    return S3Error(
        "InvalidPart",
        f"part {number} could not be found, or does not match the one given: {why}",
    )
