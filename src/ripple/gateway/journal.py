"""The bucket journal's configuration on the wire: `PUT`, `GET` and `DELETE /bucket?journal`
(ripple's own operations, modelled on S3 Metadata's journal table; docs/journal.md).

PUT enables the journal (or changes its record expiration: an enabled journal keeps its
start) and answers 200; GET answers the `JournalConfiguration` document with its
`EnabledTime`, or `404 NoSuchJournalConfiguration`; DELETE stops journaling and answers 204,
journal or not, as S3 deletes a bucket's subresources. The document is read before the
bucket is looked at (`MalformedXML`, then `InvalidArgument`), nothing is stored when it is
refused; only the bucket's owner may do any of this (`AccessDenied` for everyone else).

The configuration is stored in the metabase (`JournalStore`), logged in the eventing
configuration's change log and applied to this gateway's registry before the answer, so the
bucket's next write already records its change for the pipeline, which writes the journal.
"""

from __future__ import annotations

from starlette.responses import Response

from ripple.gateway.auth import own_bucket
from ripple.gateway.body import read_document
from ripple.gateway.errors import S3Error
from ripple.gateway.journal_xml import (
    MAX_BODY_BYTES,
    journal_configuration_xml,
    parse_journal_configuration,
)
from ripple.gateway.request import S3Request, principal
from ripple.gateway.routes import operation


@operation("PUT", "bucket", "journal", "PutBucketJournalConfiguration", "write")
async def put_bucket_journal_configuration(req: S3Request) -> Response:
    body = await read_document(req, MAX_BODY_BYTES)
    expiration_days = parse_journal_configuration(body)
    await req.run(own_bucket, req)
    await req.run(
        req.services.journals.put, req.project_id, req.bucket, expiration_days, principal(req)
    )
    await req.run(req.services.config_changed)
    return Response(status_code=200)


@operation("GET", "bucket", "journal", "GetBucketJournalConfiguration", "read")
async def get_bucket_journal_configuration(req: S3Request) -> Response:
    await req.run(own_bucket, req)
    journal = await req.run(req.services.journals.get, req.project_id, req.bucket)
    if journal is None:
        raise S3Error(
            "NoSuchJournalConfiguration",  # ripple's, named as S3's NoSuchLifecycleConfiguration
            f"bucket {req.bucket!r} has no journal configuration",
        )
    return Response(journal_configuration_xml(journal), media_type="application/xml")


@operation("DELETE", "bucket", "journal", "DeleteBucketJournalConfiguration", "write")
async def delete_bucket_journal_configuration(req: S3Request) -> Response:
    await req.run(own_bucket, req)
    await req.run(req.services.journals.delete, req.project_id, req.bucket, principal(req))
    await req.run(req.services.config_changed)
    return Response(status_code=204)
