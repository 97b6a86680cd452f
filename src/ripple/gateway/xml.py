"""S3's XML on the wire: parsing request documents safely, rendering responses.

Requests are parsed with defusedxml (no DTDs, entities or external references; an unknown
encoding declaration is malformed too) after a size check, and namespaces are dropped so
`<Delete xmlns="…">` and `<Delete>` read alike. Singletons are read with `child` / `text`,
which refuse an element given twice.
Responses are built as ElementTree elements in S3's 2006-03-01 namespace.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException
from starlette.responses import Response

from ripple.gateway.errors import S3Error
from ripple.numbers import NumberError, whole_number

S3_NAMESPACE = "http://s3.amazonaws.com/doc/2006-03-01/"
MAX_XML_BYTES = 2 * 1024 * 1024  # a DeleteObjects of 1000 keys of 1024 bytes fits


def parse(body: bytes, *, root: str, limit: int = MAX_XML_BYTES) -> ET.Element:
    """The document's root element, which must be named `root`; `MalformedXML` otherwise."""
    if len(body) > limit:
        raise S3Error(
            "MalformedXML", f"the XML document is {len(body)} bytes; the limit is {limit}"
        )
    if not body.strip():
        raise S3Error("MalformedXML", f"the request body is empty; send a <{root}> document")
    try:
        element = SafeET.fromstring(body, forbid_dtd=True)
    except (ET.ParseError, DefusedXmlException, ValueError, LookupError) as e:
        # LookupError: an encoding declaration Python does not know (`x-evil-9`)
        raise S3Error(
            "MalformedXML",
            f"the XML you provided was not well-formed or did not validate: {_reason(e)}",
        ) from None
    _strip_namespaces(element)
    if element.tag != root:
        raise S3Error("MalformedXML", f"expected a <{root}> document, got <{element.tag}>")
    return element


def _reason(error: Exception) -> str:
    if isinstance(error, DefusedXmlException):
        return "a DTD (<!DOCTYPE ...>), entity or external reference is not allowed"
    return str(error)[:200]


def _strip_namespaces(element: ET.Element) -> None:
    for node in element.iter():
        if isinstance(node.tag, str) and node.tag.startswith("{"):
            node.tag = node.tag.split("}", 1)[1]


def child(element: ET.Element, path: str) -> ET.Element | None:
    """The one element at `path` (None when absent); `MalformedXML` when the document
    repeats it: a singleton given twice is refused, never read as its first."""
    found = element.findall(path)
    if len(found) > 1:
        raise S3Error("MalformedXML", f"<{path}> is given {len(found)} times; it may appear once")
    return found[0] if found else None


def text(element: ET.Element, path: str, default: str | None = None) -> str | None:
    """The stripped text of the one child at `path` (`child`), or `default` when absent."""
    found = child(element, path)
    if found is None:
        return default
    return (found.text or "").strip()


def number(
    element: ET.Element,
    path: str,
    *,
    least: int = 0,
    most: int,
    out_of_range: str = "InvalidArgument",
) -> int | None:
    """The whole number in the child at `path` (None when it is absent), bounded
    (`ripple.numbers`): `MalformedXML` when it is not a number, `out_of_range` (an S3 error
    code) when it is one outside `least..most`."""
    value = text(element, path)
    if value is None:
        return None
    try:
        return whole_number(value, f"<{path}>", least=least, most=most)
    except NumberError as e:
        raise S3Error(out_of_range if e.out_of_range else "MalformedXML", str(e)) from None


def document(tag: str, *, namespace: bool = True) -> ET.Element:
    element = ET.Element(tag)
    if namespace:
        element.set("xmlns", S3_NAMESPACE)
    return element


def add(parent: ET.Element, tag: str, value: Any = None) -> ET.Element:
    """Append `<tag>value</tag>` (booleans as true/false, datetimes as S3 timestamps)."""
    child = ET.SubElement(parent, tag)
    if value is not None:
        child.text = _text_of(value)
    return child


def add_all(parent: ET.Element, members: Iterable[tuple[str, Any]]) -> None:
    for tag, value in members:
        if value is not None:
            add(parent, tag, value)


def _text_of(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return timestamp(value)
    return str(value)


def timestamp(when: datetime) -> str:
    """ISO 8601 with milliseconds, as S3 writes times in XML: 2026-11-21T10:00:00.000Z."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


# control characters a key may hold that XML text cannot carry as they are: a raw CR would be
# read back as LF (XML's end-of-line handling), the others are not XML characters at all
_CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f]")


def render(element: ET.Element) -> bytes:
    """The document with its declaration. Control characters in text are written as
    character references, as S3 writes them (`&#13;` for CR, which every parser reads back
    as CR; the others only clients that ask for `encoding-type=url` can read safely)."""
    body: bytes = ET.tostring(element, encoding="utf-8")
    if _CONTROL.search(body):
        body = _CONTROL.sub(lambda m: b"&#%d;" % m[0][0], body)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + body


def response(
    element: ET.Element, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(render(element), status, headers=headers, media_type="application/xml")
