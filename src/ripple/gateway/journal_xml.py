"""ripple's `JournalConfiguration` document (`?journal`, docs/journal.md): read from a PUT
body into the record expiration the journal store takes, and written for the GET. Modelled
on S3 Metadata's journal table configuration:

    <JournalConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
      <RecordExpiration><Expiration>ENABLED</Expiration><Days>30</Days></RecordExpiration>
    </JournalConfiguration>

- `RecordExpiration` is optional: absent, or `Expiration` DISABLED, keeps the journal's rows;
  ENABLED needs `Days` (7 or more, as S3's journal tables); an empty body or
  `<JournalConfiguration/>` enables the journal with its rows kept.
- The document's shape is checked before what it says, as the notification configuration's
  is: an unknown or repeated element, text between elements, a `RecordExpiration` without
  `Expiration` or an element inside `Expiration` or `Days` is `MalformedXML`, whatever else
  is wrong. Then an `Expiration` other than ENABLED or DISABLED, `Days` that are not a
  whole number (of any length: bounded, `ripple.numbers`), out of bounds, missing with
  ENABLED or given with DISABLED are `InvalidArgument` naming the element.
- GET answers the configuration and `EnabledTime`, from when the bucket's events are
  journaled, as S3 writes times in XML.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Final

from ripple.gateway import xml
from ripple.gateway.errors import S3Error, from_notifications
from ripple.gateway.notification_xml import MALFORMED_XML
from ripple.notifications.errors import NotificationError, invalid
from ripple.notifications.journal import MAX_EXPIRATION_DAYS, MIN_EXPIRATION_DAYS, Journal
from ripple.numbers import NumberError, whole_number

__all__ = ["MAX_BODY_BYTES", "journal_configuration_xml", "parse_journal_configuration"]

# the document holds three short elements; room for generous whitespace, no more
MAX_BODY_BYTES: Final = 64 * 1024
ENABLED: Final = "ENABLED"
DISABLED: Final = "DISABLED"


def parse_journal_configuration(body: bytes) -> int | None:
    """The record expiration (days; None: rows kept) a PUT body asks for; S3Error if the
    document is invalid. An empty body asks for a journal with its rows kept."""
    if not body.strip():
        return None
    try:
        return _expiration_days(_parse(body))
    except NotificationError as e:
        raise from_notifications(e) from None


def journal_configuration_xml(journal: Journal) -> bytes:
    """The GET document of a bucket's journal configuration."""
    root = xml.document("JournalConfiguration")
    expiration = xml.add(root, "RecordExpiration")
    if journal.expiration_days is None:
        xml.add(expiration, "Expiration", DISABLED)
    else:
        xml.add(expiration, "Expiration", ENABLED)
        xml.add(expiration, "Days", journal.expiration_days)
    xml.add(root, "EnabledTime", journal.enabled_at)
    return xml.render(root)


def _parse(body: bytes) -> ET.Element:
    """The document's root, parsed as every S3 request document is (`gateway.xml.parse`:
    defusedxml, no DTD, bounded), refused with S3's own message."""
    try:
        return xml.parse(body, root="JournalConfiguration", limit=MAX_BODY_BYTES)
    except S3Error:
        raise S3Error("MalformedXML", MALFORMED_XML) from None


def _expiration_days(root: ET.Element) -> int | None:
    # the whole shape first: MalformedXML before any other refusal
    found = _children(root, {"RecordExpiration"})
    if not found:
        return None
    [record_expiration] = found
    members = {child.tag: child for child in _children(record_expiration, {"Expiration", "Days"})}
    if "Expiration" not in members:
        raise S3Error("MalformedXML", MALFORMED_XML)
    if any(len(member) for member in members.values()):  # text only
        raise S3Error("MalformedXML", MALFORMED_XML)
    expiration = (members["Expiration"].text or "").strip()
    days_text = None if "Days" not in members else (members["Days"].text or "").strip()

    if expiration not in (ENABLED, DISABLED):
        raise invalid(f"Expiration is {ENABLED} or {DISABLED}", "Expiration", _shown(expiration))
    if expiration == DISABLED:
        if days_text is not None:
            raise invalid(
                f"Days is given only with Expiration {ENABLED}", "Days", _shown(days_text)
            )
        return None
    if days_text is None:
        raise invalid(f"Expiration {ENABLED} needs Days", "Days", "")
    try:
        return whole_number(days_text, "Days", least=MIN_EXPIRATION_DAYS, most=MAX_EXPIRATION_DAYS)
    except NumberError as e:
        raise invalid(str(e), "Days", _shown(days_text)) from None


def _children(element: ET.Element, allowed: set[str]) -> list[ET.Element]:
    """The element's children; MalformedXML if one is unknown or repeated, or if there is
    text besides whitespace around them."""
    found = list(element)
    tags = [child.tag for child in found]
    if any(tag not in allowed or tags.count(tag) > 1 for tag in tags):
        raise S3Error("MalformedXML", MALFORMED_XML)
    texts = [element.text, *(child.tail for child in found)]
    if any((text or "").strip() for text in texts):
        raise S3Error("MalformedXML", MALFORMED_XML)
    return found


def _shown(text: str) -> str:
    """A value as an error may repeat it: at most 40 characters."""
    return text if len(text) <= 40 else text[:40] + "…"
