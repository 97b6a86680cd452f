"""RenameObject on the wire (`PUT /bucket/newkey?renameObject` with `x-amz-rename-source`),
and ripple's prefix rename (the same request with `x-ripple-rename-prefix: true`).

`x-amz-rename-source` is `[/]bucket/key`, URL-encoded, as S3's reference gives its pattern
(`\\/?.+\\/.+`); the bucket must be the request's (S3 renames within one bucket). The
conditions are S3's: `If-Match`, `If-None-Match`, `If-Modified-Since`,
`If-Unmodified-Since` on the destination, `x-amz-rename-source-if-*` on the source. The
answer is 200 with an empty body. The access key needs `write` on the destination and
`delete` on the source. The rename is the metabase's (`ripple.metabase.rename_object`): no
data is copied; the data of a destination it replaced is freed after the commit.

`x-amz-client-token` (which boto3 always sends) makes a rename idempotent in every gateway
over the metabase, for 10 minutes (`ripple.metabase.client_tokens`): a retry with the same
token and the same request answers 200 again without renaming anything (the source is gone
by then); the same token with another request is `IdempotencyParameterMismatch`; a retry
that arrives while the first is still renaming waits for it (up to 10 s, then
`OperationAborted`: try again). Tokens are at most 64 printable ASCII characters.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime
from urllib.parse import unquote

from starlette.responses import Response

from ripple import metabase
from ripple.changestream.tag import Operation
from ripple.gateway.auth import authorize
from ripple.gateway.errors import S3Error
from ripple.gateway.headers import parse_http_date
from ripple.gateway.request import S3Request, free
from ripple.gateway.routes import operation
from ripple.metabase import ObjectLocation, RenameConditions
from ripple.metabase.client_tokens import Claim, claim, finish, release

PREFIX_HEADER = "x-ripple-rename-prefix"
_CONDITIONS = (
    "if-match",
    "if-none-match",
    "if-modified-since",
    "if-unmodified-since",
    "x-amz-rename-source-if-match",
    "x-amz-rename-source-if-none-match",
    "x-amz-rename-source-if-modified-since",
    "x-amz-rename-source-if-unmodified-since",
)


def rename_source(req: S3Request) -> str:
    """The source key of `x-amz-rename-source`: `[/]bucket/key`, URL-encoded, in the
    request's bucket."""
    raw = req.header("x-amz-rename-source")
    if not raw:
        raise S3Error(
            "InvalidArgument", "RenameObject needs x-amz-rename-source: /bucket/sourcekey"
        )
    try:
        path = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        raise S3Error("InvalidArgument", "x-amz-rename-source is not URL-encoded UTF-8") from None
    bucket, _, key = path.removeprefix("/").partition("/")
    if not bucket or not key:
        raise S3Error(
            "InvalidArgument",
            f"x-amz-rename-source must be /bucket/sourcekey (URL-encoded), got {raw!r}",
        )
    if bucket != req.bucket:
        raise S3Error(
            "InvalidRequest",
            f"RenameObject renames within one bucket: the source bucket {bucket!r} is not "
            f"{req.bucket!r}",
        )
    return key


def _date(req: S3Request, header: str) -> datetime | None:
    value = req.header(header)
    if not value:
        return None
    parsed = parse_http_date(value)
    if parsed is None:
        raise S3Error("InvalidArgument", f"{header} must be an HTTP date, got {value!r}")
    return parsed


def conditions_of(req: S3Request) -> RenameConditions:
    return RenameConditions(
        if_match=req.header("if-match"),
        if_none_match=req.header("if-none-match"),
        if_modified_since=_date(req, "if-modified-since"),
        if_unmodified_since=_date(req, "if-unmodified-since"),
        source_if_match=req.header("x-amz-rename-source-if-match"),
        source_if_none_match=req.header("x-amz-rename-source-if-none-match"),
        source_if_modified_since=_date(req, "x-amz-rename-source-if-modified-since"),
        source_if_unmodified_since=_date(req, "x-amz-rename-source-if-unmodified-since"),
    )


def _prefix_mode(req: S3Request) -> bool:
    value = req.header(PREFIX_HEADER).strip().lower()
    if value not in ("", "true", "false"):
        raise S3Error("InvalidArgument", f"{PREFIX_HEADER} must be true or false, got {value!r}")
    return value == "true"


def _token(req: S3Request) -> str:
    """The request's `x-amz-client-token`, checked ("" without one)."""
    token = req.header("x-amz-client-token")
    if token and (len(token) > _MAX_TOKEN or not all(33 <= ord(c) <= 126 for c in token)):
        raise S3Error(
            "InvalidArgument",
            f"x-amz-client-token must be 1 to {_MAX_TOKEN} printable ASCII characters",
        )
    return token


_MAX_TOKEN = 64
_BUSY_WAIT_S = 10.0  # a retry waits this long for a rename in progress with its token


def _claim(req: S3Request, token: str, asked: str) -> bool:
    """Claim the token for this rename; False if a request with it already made the same
    rename (waiting while one is making it)."""
    bucket = req.bucket_location
    deadline = time.monotonic() + _BUSY_WAIT_S
    while True:
        claimed = claim(req.db, bucket.project_id, bucket.bucket_name, token, asked)
        if claimed is Claim.CLAIMED:
            return True
        if claimed is Claim.DONE:
            return False
        if claimed is Claim.MISMATCH:
            raise S3Error(
                "IdempotencyParameterMismatch",
                "x-amz-client-token was used for another rename: use a new token",
            )
        if time.monotonic() > deadline:
            raise S3Error(
                "OperationAborted",
                "a rename with this x-amz-client-token is still in progress: try again",
            )
        time.sleep(0.05)


@operation("PUT", "object", "renameObject", "RenameObject", "write")
async def rename_object(req: S3Request) -> Response:
    source = rename_source(req)
    authorize(req, "delete", key=source)  # the app checked `write` on the destination
    destination = req.object_location
    prefix = _prefix_mode(req)
    token = _token(req)
    if prefix:
        given = [h for h in _CONDITIONS if req.header(h)]
        if given:
            raise S3Error(
                "InvalidRequest",
                f"a prefix rename takes no conditional headers ({', '.join(given)}): "
                "they apply to one object",
            )
    conditions = None if prefix else conditions_of(req)
    # claim, rename and finish in one thread hop: a request cancelled between them could
    # otherwise rename and leave its token claimed, not done. On a data thread: the claim
    # may wait up to _BUSY_WAIT_S for another request's rename with the same token
    await req.run_data(_rename_once, req, token, source, destination, prefix, conditions)
    return Response(status_code=200)


def _rename_once(
    req: S3Request,
    token: str,
    source: str,
    destination: ObjectLocation,
    prefix: bool,
    conditions: RenameConditions | None,
) -> None:
    """The rename, once per client token (none: every time)."""
    if not token:
        _rename(req, source, destination, prefix, conditions)
        return
    bucket = req.bucket_location
    if not _claim(req, token, f"{source}\n{req.key or ''}\n{prefix}"):
        return  # a retry of a rename already made
    try:
        _rename(req, source, destination, prefix, conditions)
    except Exception:  # refused or failed: not made
        release(req.db, bucket.project_id, bucket.bucket_name, token)
        raise
    finish(req.db, bucket.project_id, bucket.bucket_name, token)


def _rename(
    req: S3Request,
    source: str,
    destination: ObjectLocation,
    prefix: bool,
    conditions: RenameConditions | None,
) -> None:
    if prefix:
        metabase.rename_prefix(
            req.db,
            req.bucket_location,
            source,
            destination.object_key,
            max_keys=req.services.max_rename_keys,
            tag=req.context.tag(Operation.RENAME_PREFIX),
        )
        return
    result = metabase.rename_object(
        req.db,
        replace(destination, object_key=source),
        destination.object_key,
        conditions=conditions,
        tag=req.context.tag(Operation.RENAME),
    )
    free(req, result.removed)
