"""Events that AWS's own consumer libraries accept (issue 24).

With `events.source = "aws:s3"` every event type ripple emits parses as AWS Lambda
Powertools' S3 event model (`S3Model`, what `@event_parser(model=S3Model)` validates a
Lambda's event with). The events come from the real metabase operations with eventing on,
mapped both ways the pipeline maps change records: `s3_events`, and the transform's fast path
for one-change transactions (`BatchMapper`, `ripple.events.batch`). With the default source,
`ripple:s3`, the model refuses every one of them: the setting is what typed consumers need.

Powertools has no model of the `s3:TestEvent` message (it has none in 3.x: `S3Model` and the
EventBridge and SQS wrappers of event records only); the test message is no event record.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import orjson
import pytest
from aws_lambda_powertools.utilities.parser.models import S3Model
from pydantic import ValidationError

from ripple.changestream.reader import ChangeStreamReader
from ripple.changestream.tag import TransactionTag
from ripple.changestream.tail import transactions
from ripple.events import ALL_EVENT_NAMES, EventSettings, s3_events
from ripple.events.names import BUCKET_EVENT_NAMES
from ripple.metabase import (
    BucketLocation,
    Metabase,
    Versioning,
    commit_object,
    create_bucket,
    delete_bucket,
    delete_object,
)
from ripple.metabase.acl import put_object_acl
from ripple.metabase.copy_object import copy_object
from ripple.metabase.expire import expire_objects
from ripple.metabase.legal_hold import put_object_legal_hold
from ripple.metabase.lifecycle import put_bucket_lifecycle
from ripple.metabase.lifecycle_run import run_lifecycle
from ripple.metabase.object_tagging import delete_object_tagging, put_object_tagging
from ripple.metabase.rename_object import rename_object, rename_prefix
from ripple.metabase.retention import put_object_retention
from ripple.pipeline.source import read_ranges
from ripple.pipeline.transform import BatchMapper
from tests.metabase.objects import begin_object, commit_inline_object
from tests.metabase.steps import T0, World

AWS = EventSettings(event_source="aws:s3")  # and the default region, us-east-1
REQUEST = TransactionTag(
    request_id="C3D13FE58DE4C810",
    host_id="FMyUVURIY8/IgAtTv8xRjskZQpcIZ9KG4V5Wp6S7S",
    principal="1PublicProjectIdOfPhotos",
    source_ip="192.0.2.7",
)
STREAMS = (("bucket_eventing", "objects"), ("project_eventing", "buckets"))


def every_event_type(db: Metabase) -> World:
    """A world whose change streams hold every event type ripple makes, each from the
    metabase operation that makes it, as requests through the gateway would (a request's
    tag), and system transactions (lifecycle, TTL) as they run."""
    db.eventing = lambda _project, _bucket: True
    w = World(db)
    plain = w.bucket("plain")
    versioned = w.bucket("versioned", Versioning.ENABLED)
    locked = w.bucket("locked", lock=True)

    def put(bucket: BucketLocation, key: str, operation: str = "put") -> None:
        w.tick()
        data = key.encode()
        commit_inline_object(db, w.loc(bucket, key), data, etag=hashlib.md5(data).hexdigest(),
                   tag=replace(REQUEST, operation=operation))  # fmt: skip

    put(plain, "a.jpg")
    put(plain, "form.png", "post")
    put(versioned, "v.jpg")
    put(locked, "held.jpg")
    copy_object(db, w.loc(plain, "a.jpg"), w.loc(plain, "copy.jpg"), tag=REQUEST)
    copy_object(db, w.loc(plain, "a.jpg"), w.loc(plain, "a.jpg"), metadata_directive="REPLACE",
                user_metadata={"camera": "x100v"}, tag=REQUEST)  # fmt: skip
    pending = begin_object(db, w.loc(plain, "big.mp4"))
    upload = replace(REQUEST, operation="complete-multipart-upload")
    commit_object(db, pending, size=5 << 20, etag=f"{'0' * 32}-2", tag=upload)
    put_object_tagging(db, w.loc(plain, "a.jpg"), {"k": "v"}, tag=REQUEST)
    delete_object_tagging(db, w.loc(plain, "a.jpg"), tag=REQUEST)
    put_object_acl(db, w.loc(plain, "a.jpg"), "public-read", tag=REQUEST)
    put_object_legal_hold(db, w.loc(locked, "held.jpg"), True, tag=REQUEST)
    put_object_retention(db, w.loc(locked, "held.jpg"), w.governance(), tag=REQUEST)
    rename_object(db, w.loc(plain, "copy.jpg"), "renamed.jpg", tag=REQUEST)
    put(plain, "dir/x.txt")
    rename_prefix(db, plain, "dir/", "moved/", max_keys=10, tag=REQUEST)
    delete_object(db, w.loc(plain, "form.png"), tag=REQUEST)
    delete_object(db, w.loc(versioned, "v.jpg"), tag=REQUEST)  # a delete marker
    rule = {
        "ID": "old",
        "Status": "Enabled",
        "Filter": {"Prefix": "old/"},
        "Expiration": {"Days": 1},
    }
    for bucket in (plain, versioned):
        put_bucket_lifecycle(db, bucket, {"Rules": [rule]})
        put(bucket, "old/log.txt")
    w.now = T0 + timedelta(days=3)
    run_lifecycle(db)  # LifecycleExpiration:Delete and :DeleteMarkerCreated
    commit_inline_object(
        db, w.loc(plain, "tmp"), b"x", etag="e", expires_at=w.now + timedelta(hours=1)
    )
    w.tick(timedelta(hours=2))
    expire_objects(db)  # a TTL delete: LifecycleExpiration:Delete without a rule
    extra = BucketLocation(w.project.id, "new-bucket")
    create_bucket(db, extra, tag=REQUEST)
    delete_bucket(db, extra, tag=REQUEST)
    return w


def general(w: World, settings: EventSettings) -> list[dict[str, Any]]:
    """Every event record, through `s3_events`, transaction by transaction."""
    owners = {str(w.project.id): str(w.project.public_id)}
    out = []
    for stream, _ in STREAMS:
        reader = ChangeStreamReader(w.db.engine, stream, write_engine=w.db.writer)
        records = [r for p in range(reader.partitions()) for r in reader.drain(p)]
        records.sort(key=lambda r: (r["commit_timestamp"], r["partition"], r["position"]))
        for group in transactions(iter(records), strict=False):
            out.extend(e.message for e in s3_events(group, owners=owners, settings=settings))
    return out


def fast(w: World, settings: EventSettings) -> tuple[list[dict[str, Any]], int]:
    """Every event record as the pipeline's transform makes them from the source's Arrow
    batches (the fast path where it applies), and how many shapes took the fast path."""
    url = w.db.url.render_as_string(hide_password=False)
    owner = str(w.project.public_id)
    out, templates = [], 0
    for stream, table in STREAMS:
        reader = ChangeStreamReader(w.db.engine, stream, write_engine=w.db.writer)
        ranges = [(p, 0, reader.end(p)) for p in range(reader.partitions())]
        mapper = BatchMapper(lambda _project: owner, settings, table)
        for batch in read_ranges(url, stream, ranges):
            events = mapper.map(batch)
            out.extend(orjson.loads(m) for m in events.column("message").to_pylist())
        mapper.finish()
        templates += sum(t is not None for t in mapper.templates.known.values())
    return out, templates


@pytest.fixture
def world(db: Metabase) -> World:
    return every_event_type(db)


def test_every_event_type_is_made(world: World) -> None:
    """So the tests below see each type ripple emits (a new type must be made here too)."""
    names = {m["eventName"] for m in general(world, AWS)}
    assert names == {*ALL_EVENT_NAMES, *BUCKET_EVENT_NAMES}


def test_every_event_parses_in_powertools_s3_model_with_source_aws_s3(world: World) -> None:
    events = general(world, AWS)
    for event in events:
        parsed = S3Model.model_validate({"Records": [event]})
        [record] = parsed.Records
        assert record.eventSource == "aws:s3"
        assert record.awsRegion == "us-east-1"
        assert record.eventName == event["eventName"]
        assert record.s3.bucket.name == event["s3"]["bucket"]["name"]
    # and a message of several records
    assert len(S3Model.model_validate({"Records": events}).Records) == len(events)
    # no request made these: the system names itself as S3 does, principal and source
    system = [e for e in events if e["eventName"].startswith("LifecycleExpiration:")]
    assert len(system) == 3
    for event in system:
        assert event["userIdentity"]["principalId"] == "s3.amazonaws.com"
        assert event["requestParameters"]["sourceIPAddress"] == "s3.amazonaws.com"


def test_the_fast_path_makes_events_powertools_accepts(world: World) -> None:
    events, templates = fast(world, AWS)
    assert templates > 0  # some shapes did take the fast path
    assert sorted(map(canonical, events)) == sorted(map(canonical, general(world, AWS)))
    for event in events:
        S3Model.model_validate({"Records": [event]})


def test_the_default_source_is_refused_by_powertools(world: World) -> None:
    """Why docs/events.md says to set `events.source = "aws:s3"` for typed AWS consumers:
    the model's eventSource is the literal `aws:s3`."""
    events = general(world, EventSettings())
    assert {e["eventSource"] for e in events} == {"ripple:s3"}
    for event in events:
        with pytest.raises(ValidationError) as refused:
            S3Model.model_validate({"Records": [event]})
        wrong = {(*e["loc"], "")[2] for e in refused.value.errors()}  # "": the whole record
        if event["requestParameters"]["sourceIPAddress"] == "ripple":  # no request made it
            assert wrong == {"eventSource", "requestParameters"}
        else:
            assert wrong == {"eventSource"}


def canonical(event: dict[str, Any]) -> str:
    return json.dumps(event, sort_keys=True)
