"""The transaction tag (`ripple.changestream.tag`): every member the writer encodes is
decoded back, and the operation names are the strings stored records hold."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ripple.changestream.capture import Capture
from ripple.changestream.tag import Operation, TransactionTag
from tests.changestream.tags import MEMBERS, sample, with_member


@pytest.mark.parametrize("member", MEMBERS)
def test_each_member_is_decoded_as_encoded(member: str) -> None:
    tag = with_member(member)
    decoded = TransactionTag.decode(tag.encode())
    assert getattr(decoded, member) == sample(member)
    assert decoded == tag


@pytest.mark.parametrize("member", MEMBERS)
def test_each_member_is_decoded_from_a_captured_transaction(member: str) -> None:
    """What the writer stores (`Capture.tag_json`: the request's tag with the versioning
    states the transaction noted) decodes to that tag."""
    tag = with_member(member)
    capture = Capture(tag)
    capture.note_bucket("noted", "Enabled")
    capture.note_bucket("off", None)
    versioning = {**tag.bucket_versioning, "noted": "Enabled"}
    assert TransactionTag.decode(capture.tag_json()) == replace(tag, bucket_versioning=versioning)


def test_every_member_at_once_is_decoded_as_encoded() -> None:
    tag = TransactionTag(**{member: sample(member) for member in MEMBERS})
    assert TransactionTag.decode(tag.encode()) == tag


def test_an_empty_tag_is_stored_as_nothing() -> None:
    assert TransactionTag().encode() == ""
    assert Capture().tag_json() == ""
    assert TransactionTag.decode("") == TransactionTag.decode(None) == TransactionTag()


def test_the_operations_are_the_names_records_hold() -> None:
    """Stored records and the pipeline's searches name operations by these strings."""
    assert [op.value for op in Operation] == [
        "put",
        "post",
        "copy",
        "complete-multipart-upload",
        "delete",
        "delete-objects",
        "ttl-delete",
        "put-object-tagging",
        "delete-object-tagging",
        "put-object-acl",
        "put-object-retention",
        "put-object-legal-hold",
        "rename",
        "rename-prefix",
        "lifecycle-expiration",
        "create-bucket",
        "delete-bucket",
    ]
    assert TransactionTag(Operation.PUT).encode() == '{"operation":"put"}'


def test_an_operation_is_named_or_refused() -> None:
    assert TransactionTag("rename-prefix").operation is Operation.RENAME_PREFIX
    with pytest.raises(ValueError, match="unknown operation 'rename-folder'"):
        TransactionTag("rename-folder")


def test_a_newer_writers_operation_and_members_are_left_out() -> None:
    decoded = TransactionTag.decode('{"operation":"restore","request_id":"R","colour":"red"}')
    assert decoded == TransactionTag(request_id="R")


@pytest.mark.parametrize(
    "bad", ["{", "[1]", '{"etag": 5}', '{"operation": 1}', '{"bucket_versioning": ["x"]}']
)
def test_a_malformed_tag_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="transaction_tag"):
        TransactionTag.decode(bad)


@pytest.mark.parametrize("operation", list(Operation))
def test_member_text_finds_an_operation_in_the_stored_text(operation: Operation) -> None:
    text = TransactionTag(operation, request_id="R").encode()
    found = [op for op in Operation if TransactionTag.member_text("operation", op) in text]
    assert found == [operation]
