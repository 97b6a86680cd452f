"""Object writes that arrive while a group is being committed wait and are committed
together (`ripple.gateway.together`, SQLite and PostgreSQL): each answered as if alone, the
data of what they replaced removed only once the group has committed."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import sqlalchemy as sa
from botocore.exceptions import ClientError

from tests.gateway.conftest import Running, unanswered_writes
from tests.gateway.wire import FILE_SIZE
from tests.metabase.hooks import before_commit
from tests.waiting import wait_for

WRITES = 9


class HeldCommits:
    """A `before_commit` hook (`tests.metabase.hooks`): the first commit waits until
    released (the writes that reach their commit meanwhile wait behind it); while `failing`,
    every commit fails."""

    def __init__(self) -> None:
        self.commits = 0
        self.release = threading.Event()
        self.failing = False

    def __call__(self, _conn: sa.Connection) -> None:
        self.commits += 1
        if self.commits == 1:
            self.release.wait(30)
        if self.failing:
            raise RuntimeError("the commit failed")


def _together(gateway: Running, calls: list[Callable[[Any], Any]], hook: HeldCommits) -> list[Any]:
    """Every call (given its own boto3 client) at once, the first commit held until the
    rest wait behind it; each call's answer, or its error."""
    db = gateway.services.db
    # one group at a time, as over SQLite (PostgreSQL sends a few): the rest wait behind it
    gateway.services.commits.flights = 1
    with before_commit(db, hook):
        # made here (making boto3 clients is not thread-safe); one attempt each
        clients = [gateway.client(retries={"total_max_attempts": 1}) for _ in calls]
        with ThreadPoolExecutor(len(calls)) as pool:

            def make(call: Callable[[Any], Any], client: Any) -> Any:
                try:
                    return call(client)
                except ClientError as e:
                    return e

            answers = pool.map(make, calls, clients)
            wait_for(
                lambda: unanswered_writes(gateway.services) == len(calls),
                what="every write to reach its commit",
            )
            hook.release.set()
            return list(answers)


def _put_together(gateway: Running, bodies: dict[str, bytes], hook: HeldCommits) -> list[Any]:
    return _together(
        gateway,
        [functools.partial(_put, key=key, body=body) for key, body in bodies.items()],
        hook,
    )


def _put(client: Any, key: str, body: bytes) -> Any:
    return client.put_object(Bucket="group", Key=key, Body=body)


def test_writes_that_wait_are_committed_together(gateway: Running, s3: Any) -> None:
    s3.create_bucket(Bucket="group")
    bodies = {f"k{i}": f"body {i}".encode() for i in range(WRITES)}
    hook = HeldCommits()
    answers = _put_together(gateway, bodies, hook)
    assert all(a["ResponseMetadata"]["HTTPStatusCode"] == 200 for a in answers)
    # those that came first (one, or a few at the same moment), then all that waited
    assert hook.commits <= 2
    for key, body in bodies.items():
        assert s3.get_object(Bucket="group", Key=key)["Body"].read() == body


def test_a_group_that_fails_keeps_the_data_it_would_have_replaced(
    gateway: Running, s3: Any
) -> None:
    """Stored in files (past the inline limit), so replacing them would remove files."""
    s3.create_bucket(Bucket="group")
    old = {f"k{i}": bytes([i]) * FILE_SIZE for i in range(WRITES)}
    for key, body in old.items():
        s3.put_object(Bucket="group", Key=key, Body=body)
    hook = HeldCommits()
    hook.failing = True
    answers = _put_together(gateway, {k: b"new" + v for k, v in old.items()}, hook)
    assert all(isinstance(a, ClientError) for a in answers)
    assert hook.commits <= 2
    for key, body in old.items():
        assert s3.get_object(Bucket="group", Key=key)["Body"].read() == body


def test_deletes_that_wait_are_committed_together(gateway: Running, s3: Any) -> None:
    """Each takes a token of the project's delete rate limit (a write of its own) and
    deletes, in the group's transaction."""
    s3.create_bucket(Bucket="group")
    keys = [f"k{i}" for i in range(WRITES)]
    for key in keys:
        s3.put_object(Bucket="group", Key=key, Body=b"x" * FILE_SIZE)
    hook = HeldCommits()
    answers = _together(
        gateway,
        [functools.partial(_delete, key=key) for key in keys],
        hook,
    )
    assert [a["ResponseMetadata"]["HTTPStatusCode"] for a in answers] == [204] * WRITES
    # alone, a delete is two transactions (its token, then the delete): the first delete's
    # two (or those of the few that came first, as one group), then one for all the rest
    assert hook.commits <= 3
    assert "Contents" not in s3.list_objects_v2(Bucket="group")


def _delete(client: Any, key: str) -> Any:
    return client.delete_object(Bucket="group", Key=key)
