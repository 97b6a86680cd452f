"""Who is asking, and may they: SigV4 authentication against the keyring, then the access
key's restrictions (bucket, prefix, denied actions) for the operation's action.

ripple has no public buckets: an unsigned request is `AccessDenied`.
"""

from __future__ import annotations

from datetime import UTC, datetime

from ripple.gateway import sigv4
from ripple.gateway.errors import S3Error
from ripple.gateway.request import S3Request, raw_query


def authenticate(req: S3Request, *, service: str = "s3", payload_sha256: str | None = None) -> None:
    """Verify the request's signature; sets `req.access_key`, `req.signed` and the principal.

    S3 requests are signed for `s3`; the topic API passes `sns` and the body's SHA-256
    (`sigv4.verify`)."""
    http = req.http
    raw_path = http.scope.get("raw_path", b"").decode("latin-1").split("?", 1)[0] or "/"
    headers: dict[str, str] = {}
    for name, value in http.headers.items():
        name = name.lower()
        headers[name] = f"{headers[name]},{value}" if name in headers else value
    keyring = req.services.keyring
    signed = sigv4.verify(
        http.method,
        raw_path,
        raw_query(http),
        headers,
        keyring.secret_of,
        datetime.now(UTC),
        service=service,
        payload_sha256=payload_sha256,
    )
    if signed is None:
        raise S3Error(
            "AccessDenied",
            "anonymous requests are not allowed: sign the request with an access key "
            "(create one with `ripple user create NAME`)",
        )
    services = req.services
    if services.enforce_region and signed.region != services.region:
        raise S3Error(
            "AuthorizationHeaderMalformed",
            f"the authorization header is malformed; the region {signed.region!r} is wrong; "
            f"expecting {services.region!r}: configure your client for region {services.region}",
        )
    key = keyring.key(signed.access_key_id)
    if key is None:  # revoked between the two look-ups
        raise S3Error("InvalidAccessKeyId", "the AWS access key ID you provided does not exist")
    req.signed = signed
    req.access_key = key
    req.context.principal = str(key.project_public_id)


def authorize(req: S3Request, action: str, *, key: str | None = None) -> None:
    """Refuse with `AccessDenied` unless the access key may do `action` here.

    `key` overrides the request's object key (a list prefix, a DeleteObjects item).
    """
    assert req.access_key is not None
    target = key if key is not None else req.key
    if not req.access_key.permits(action, req.bucket, target):
        raise S3Error(
            "AccessDenied", f"this access key may not {action} here", resource=req.resource
        )
