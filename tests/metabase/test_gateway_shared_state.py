"""What gateways over one metabase share: the rate limit's token buckets, RenameObject's
client tokens, and the commit deadline that keeps `ripple data gc` off data whose commit
is still to come."""

from __future__ import annotations

import time
import uuid

import pytest
import sqlalchemy as sa

from ripple.metabase import BucketLocation, Metabase, ObjectLocation, create_bucket, get_object
from ripple.metabase.client_tokens import Claim, claim, finish, release
from ripple.metabase.errors import CommitTooLate, ObjectNotFound
from ripple.metabase.projects import create_project
from ripple.metabase.rate_limits import take_token
from ripple.metabase.schema import client_tokens, rate_limits
from tests.metabase.objects import commit_inline_object


def test_a_token_bucket_holds_its_burst_then_refills_by_the_database_clock(db: Metabase) -> None:
    project, other = uuid.uuid4(), uuid.uuid4()
    taken = [take_token(db, project, "delete", rate=0.5, burst=3) for _ in range(5)]
    assert taken == [True, True, True, False, False]
    assert take_token(db, other, "delete", rate=0.5, burst=3)  # a budget per project
    assert take_token(db, project, "rename", rate=0.5, burst=3)  # and per limit
    with db.write() as conn:  # as if the last take was 4 s ago: 2 tokens back
        conn.execute(
            sa.update(rate_limits)
            .where(rate_limits.c.project_id == project, rate_limits.c.name == "delete")
            .values(updated_s=rate_limits.c.updated_s - 4)
        )
    taken = [take_token(db, project, "delete", rate=0.5, burst=3) for _ in range(3)]
    assert taken == [True, True, False]
    with db.write() as conn:  # a long pause refills to the burst, no further
        conn.execute(sa.update(rate_limits).values(updated_s=rate_limits.c.updated_s - 3600))
    taken = [take_token(db, project, "delete", rate=0.5, burst=3) for _ in range(4)]
    assert taken == [True, True, True, False]


def test_a_client_token_is_claimed_once_and_answers_its_retries(db: Metabase) -> None:
    project = uuid.uuid4()
    assert claim(db, project, "b", "t", "rename a b") is Claim.CLAIMED
    assert claim(db, project, "b", "t", "rename a b") is Claim.BUSY
    assert claim(db, project, "b", "t", "rename a c") is Claim.MISMATCH
    assert claim(db, project, "other", "t", "rename a b") is Claim.CLAIMED  # per bucket
    finish(db, project, "b", "t")
    assert claim(db, project, "b", "t", "rename a b") is Claim.DONE
    release(db, project, "b", "t")  # a done token is kept
    assert claim(db, project, "b", "t", "rename a b") is Claim.DONE


def test_a_failed_or_abandoned_claim_frees_the_token(db: Metabase) -> None:
    project = uuid.uuid4()
    assert claim(db, project, "b", "t", "first") is Claim.CLAIMED
    release(db, project, "b", "t")
    assert claim(db, project, "b", "t", "second", in_progress_s=0) is Claim.CLAIMED
    # its gateway died: the claim lapses, and another request may take the token
    assert claim(db, project, "b", "t", "third") is Claim.CLAIMED
    finish(db, project, "b", "t", ttl_s=0)
    assert claim(db, project, "b", "t", "fourth") is Claim.CLAIMED  # done, and expired


def test_a_commit_after_its_deadline_is_rolled_back(db: Metabase) -> None:
    project = create_project(db, "p")
    create_bucket(db, BucketLocation(project.id, "bkt"))
    late = ObjectLocation(project.id, "bkt", "late")
    on_time = ObjectLocation(project.id, "bkt", "ok")
    with db.commit_deadline(time.monotonic() - 1), pytest.raises(CommitTooLate):
        commit_inline_object(db, late, b"x", etag="e")
    with pytest.raises(ObjectNotFound):
        get_object(db, late)
    with db.commit_deadline(time.monotonic() + 60):
        commit_inline_object(db, on_time, b"x", etag="e")
    commit_inline_object(db, late, b"x", etag="e")  # the deadline ended with its block
    assert get_object(db, on_time).etag == "e"
    assert get_object(db, late).etag == "e"


def test_a_claim_removes_its_buckets_lapsed_tokens(db: Metabase) -> None:
    """boto3 sends a new token with every rename: without this the table would only grow."""
    project = uuid.uuid4()
    for token in ("t1", "t2"):
        assert claim(db, project, "b", token, "r") is Claim.CLAIMED
    finish(db, project, "b", "t1", ttl_s=0)  # lapsed
    finish(db, project, "b", "t2")
    assert claim(db, project, "other", "t1", "r") is Claim.CLAIMED  # another bucket's
    assert claim(db, project, "b", "t3", "r") is Claim.CLAIMED
    with db.read() as conn:
        kept = conn.execute(
            sa.select(client_tokens.c.bucket_name, client_tokens.c.token).order_by(
                client_tokens.c.bucket_name, client_tokens.c.token
            )
        ).all()
    assert [tuple(row) for row in kept] == [("b", "t2"), ("b", "t3"), ("other", "t1")]
