"""One S3 request as the operation handlers see it: the bucket and key it addresses
(path-style or virtual-hosted-style), its query, headers, who signed it (nobody, for an
anonymous request), the project owning the bucket, and the services (metabase, object
data, keyring, rate limits, bucket owners) of the gateway serving it.

A request's bucket is the bucket owner's, whoever asks: another project's request (one the
bucket's ACLs allow, `auth.grant_access`) works on the owner's bucket, as S3 does.

What the handlers of several operations do with a request: `free` the data of the versions
its committed write or delete removed, and name its `principal` in the eventing
configuration's change log."""

from __future__ import annotations

import functools
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import parse_qsl, unquote

from starlette.requests import Request

from ripple.gateway import threads
from ripple.gateway.context import RequestContext
from ripple.gateway.data import ObjectData
from ripple.gateway.errors import S3Error
from ripple.gateway.ratelimit import RateLimit
from ripple.gateway.together import Together
from ripple.metabase import BucketLocation, Metabase, Object, ObjectLocation
from ripple.metabase.acl import BucketOwner, bucket_owner_by_name
from ripple.metabase.rows import MAX_KEY_BYTES
from ripple.notifications.journal import JournalStore
from ripple.notifications.registry import Registry
from ripple.notifications.store import EventingStore
from ripple.notifications.watcher import ConfigWatcher
from ripple.numbers import NumberError, whole_number

if TYPE_CHECKING:
    from ripple.gateway.sigv4 import SignedRequest
    from ripple.identity import AccessKey, Keyring

T = TypeVar("T")

# Objects up to this size are stored in their metabase row: one durable write (the
# transaction's) instead of a file's three (the data, its directory, the transaction), and
# a GET without opening a file. SQLite reads blobs under ~100 KB from the database faster
# than from files (sqlite.org/intern-v-extern-blob.html); MinIO inlines up to 128 KiB.
INLINE_LIMIT = 64 * 1024
OWNER_TTL = 10.0  # seconds a bucket name's owner is remembered
# how often a gateway looks for an eventing configuration another process changed: a
# notification put through one gateway applies to writes through every other within 1 s
CONFIG_POLL_S = 0.5


class BucketOwners:
    """Bucket name -> the project holding it, remembered for `ttl` seconds so a bucket's
    own requests cost no query to find that they are its owner's. Names this gateway
    creates or deletes are forgotten at once (`forget`); other projects' requests look the
    name up `fresh`, so a bucket deleted and made again by another project through another
    gateway is theirs at once, and only its former owner may be told NoSuchBucket (rather
    than AccessDenied) within `ttl`. Unknown names are not remembered. Safe to share
    between threads."""

    def __init__(self, db: Metabase, *, ttl: float = OWNER_TTL) -> None:
        self.db = db
        self.ttl = ttl
        self._lock = threading.Lock()
        self._owners: dict[str, tuple[float, BucketOwner]] = {}

    def cached(self, name: str) -> BucketOwner | None:
        """The remembered owner, if still fresh (no query)."""
        with self._lock:
            entry = self._owners.get(name)
        if entry is None or entry[0] <= time.monotonic():
            return None
        return entry[1]

    def lookup(self, name: str, *, fresh: bool = False) -> BucketOwner | None:
        """The owner of the name (a query unless remembered, or `fresh`); None if no
        project holds it."""
        owner = None if fresh else self.cached(name)
        if owner is None:
            owner = bucket_owner_by_name(self.db, name)
            if owner is None:
                self.forget(name)
            else:
                with self._lock:
                    if len(self._owners) > 100_000:
                        self._owners.clear()
                    self._owners[name] = (time.monotonic() + self.ttl, owner)
        return owner

    def forget(self, name: str) -> None:
        with self._lock:
            self._owners.pop(name, None)


@dataclass
class Services:
    """What every request of one gateway shares."""

    db: Metabase
    data: ObjectData
    keyring: Keyring
    deletes: RateLimit
    region: str = "us-east-1"
    # requests must be signed for `region` when it was configured; any region otherwise
    enforce_region: bool = False
    domain: str = ""  # virtual-hosted-style: BUCKET.<domain>
    inline_limit: int = INLINE_LIMIT
    max_rename_keys: int = 1000  # keys a prefix rename may move (s3.max-rename-keys)
    # which buckets have eventing, as this process knows it: the metabase asks it for every
    # write, so the gateway keeps it current (`config_changed`, and a watcher thread)
    registry: Registry = field(default_factory=Registry)
    # topics may carry credentials in their push endpoint over plain HTTP
    allow_secrets_in_cleartext: bool = False
    eventing: EventingStore = field(init=False)
    journals: JournalStore = field(init=False)  # the buckets' journal configurations
    watcher: ConfigWatcher = field(init=False)
    owners: BucketOwners = field(init=False)  # who holds each bucket name
    workers: threads.Workers = field(init=False)  # the metabase threads (`S3Request.run`)
    commits: Together = field(init=False)  # object writes, committed together (`commit`)
    reads: Together = field(init=False)  # object reads, sent on together (`S3Request.read`)

    def __post_init__(self) -> None:
        self.workers = threads.Workers(threads.metabase_threads(self.db.dialect), "gateway")
        sqlite = self.db.dialect == "sqlite"
        flights = 1 if sqlite else threads.POSTGRES_GROUPS
        most = None if sqlite else threads.POSTGRES_GROUP_CALLS
        self.commits = Together(self.workers, self.db.write_together, flights=flights, most=most)
        self.reads = Together(self.workers, self.db.read_together, flights=flights)
        self.eventing = EventingStore(self.db)
        self.journals = JournalStore(self.db)
        self.owners = BucketOwners(self.db)
        self.watcher = ConfigWatcher.for_registry(
            self.eventing, self.registry, interval_s=CONFIG_POLL_S
        )

    def config_changed(self) -> None:
        """This gateway changed the eventing configuration: apply it before answering."""
        self.watcher.refresh()


def query_number(
    req: S3Request, name: str, *, least: int = 0, most: int, default: int | None = None
) -> int:
    """A whole-number query parameter, bounded (`ripple.numbers`): `InvalidArgument`
    naming it otherwise; `default` when it is absent (absent without one: refused too)."""
    value = req.query.get(name)
    if value is None and default is not None:
        return default
    return _bounded(value or "", name, least, most)


def header_number(
    req: S3Request, name: str, *, least: int = 0, most: int, default: int | None = None
) -> int:
    """A whole-number header, bounded as `query_number`."""
    value = req.http.headers.get(name)
    if value is None and default is not None:
        return default
    return _bounded(value or "", name, least, most)


def _bounded(text: str, name: str, least: int, most: int) -> int:
    try:
        return whole_number(text, name, least=least, most=most)
    except NumberError as e:
        raise S3Error("InvalidArgument", str(e), extra={"ArgumentName": name}) from None


def address_of(raw_path: str, host: str, domain: str) -> tuple[str | None, str | None]:
    """(bucket, key) a request addresses; None for a level it does not reach.

    Virtual-hosted-style when the Host is a subdomain of the configured domain; path-style
    otherwise. The key is the rest of the path, percent-decoded exactly once.
    """
    host = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    bucket: str | None = None
    path = raw_path
    if domain and host.endswith("." + domain):
        bucket = host[: -len(domain) - 1]
        rest = path[1:] if path.startswith("/") else path
    else:
        rest = path[1:] if path.startswith("/") else path
        if not rest:
            return None, None
        first, _, rest = rest.partition("/")
        bucket = unquote(first)
        if not bucket:
            return None, None
    if not rest:
        return bucket, None
    try:
        key = unquote(rest, errors="strict")
    except UnicodeDecodeError:
        raise S3Error(
            "InvalidURI", "couldn't parse the specified URI: the key is not UTF-8", status=400
        ) from None
    if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        raise S3Error(
            "KeyTooLongError", f"your key is too long: the limit is {MAX_KEY_BYTES} bytes"
        )
    return bucket, key


def raw_query(http: Request) -> str:
    """The query string as sent. Not `http.url.query`: Starlette rebuilds that URL from the
    decoded path, so a key holding `%3F` would lose its tail to the query."""
    return bytes(http.scope.get("query_string", b"")).decode("latin-1")


@dataclass
class S3Request:
    http: Request
    services: Services
    context: RequestContext
    bucket: str | None
    key: str | None
    query: dict[str, str]
    access_key: AccessKey | None = None  # None: an anonymous request
    signed: SignedRequest | None = None
    # the project holding the bucket (set by `auth.grant_access` when the bucket exists)
    owner: BucketOwner | None = None
    # the requester (or nobody) is not the bucket's owner: an ACL let the request through
    cross_project: bool = False

    @classmethod
    def of(cls, http: Request, services: Services, context: RequestContext) -> S3Request:
        raw_path = http.scope.get("raw_path", b"").decode("latin-1").split("?", 1)[0]
        if not raw_path:
            raw_path = http.url.path
        bucket, key = address_of(raw_path, http.headers.get("host", ""), services.domain)
        query = dict(parse_qsl(raw_query(http), keep_blank_values=True))
        return cls(http, services, context, bucket, key, query)

    # --- what handlers ask ---------------------------------------------------------------

    @property
    def method(self) -> str:
        return self.http.method

    @property
    def headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.http.headers.items()}

    def header(self, name: str, default: str = "") -> str:
        """The first value of a header (names are case-insensitive), or `default`."""
        return self._first_values.get(name.lower(), default)

    @functools.cached_property
    def _first_values(self) -> dict[str, str]:
        """Each header's first value, by lower-case name: built once, where Starlette's
        `Headers.get` walks and decodes every header for each look-up (a PUT makes ~17)."""
        found: dict[str, str] = {}
        for name, value in self.http.scope["headers"]:
            found.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
        return found

    @property
    def db(self) -> Metabase:
        return self.services.db

    @property
    def project_id(self) -> uuid.UUID:
        """The requester's project (for an anonymous request: the bucket owner's)."""
        if self.access_key is not None:
            return self.access_key.project_id
        return self.bucket_owner.project_id

    @property
    def authenticated_key(self) -> AccessKey:
        """The requester's access key, for what only authenticated requests reach."""
        if self.access_key is None:
            raise RuntimeError("an anonymous request reached what needs an access key")
        return self.access_key

    @property
    def bucket_owner(self) -> BucketOwner:
        """The project holding the bucket, as `auth.grant_access` found it (an anonymous
        request reaches a handler only once it has been)."""
        if self.owner is None:
            raise RuntimeError("the bucket's owner is asked for before it was found")
        return self.owner

    @property
    def bucket_location(self) -> BucketLocation:
        """The bucket in its owner's project (the requester's own, for its own buckets)."""
        if self.bucket is None:
            raise S3Error("InvalidRequest", "this operation needs a bucket in the path or host")
        project = self.owner.project_id if self.owner is not None else self.project_id
        return BucketLocation(project, self.bucket)

    @property
    def owner_id(self) -> str:
        """The public id of the bucket owner (of its objects too), for responses."""
        if self.owner is not None:
            return self.owner.public_id
        return str(self.authenticated_key.project_public_id)

    @property
    def owner_name(self) -> str:
        if self.owner is not None:
            return self.owner.name
        return self.authenticated_key.user

    @property
    def can_bypass_governance(self) -> bool:
        """Only the bucket owner's own keys may bypass governance retention: an unrestricted
        one, or a restricted one made with `--allow-bypass-governance`."""
        key = self.access_key
        return key is not None and not self.cross_project and key.may_bypass_governance

    @property
    def object_location(self) -> ObjectLocation:
        if self.key is None:
            raise S3Error("InvalidRequest", "this operation needs an object key")
        bucket = self.bucket_location
        return ObjectLocation(bucket.project_id, bucket.bucket_name, self.key)

    @property
    def resource(self) -> str:
        if self.bucket is None:
            return "/"
        return f"/{self.bucket}" + (f"/{self.key}" if self.key is not None else "")

    @property
    def has_copy_source(self) -> bool:
        """Is this a copy (CopyObject, UploadPartCopy)? An empty `x-amz-copy-source` is one
        too, refused as such, never taken for a plain write of the body."""
        return "x-amz-copy-source" in self.http.headers

    def version_id(self) -> str | None:
        """`?versionId=`, None when absent; an empty one is `InvalidArgument`, as in S3
        (never the latest version)."""
        value = self.query.get("versionId")
        if value == "":
            raise S3Error(
                "InvalidArgument",
                "Version id cannot be the empty string",
                extra={"ArgumentName": "versionId", "ArgumentValue": ""},
            )
        return value

    async def run(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        """Call a blocking metabase operation off the event loop (`threads`: the metabase
        threads). File work goes to `run_data`."""
        return await self.services.workers.run(fn, *args, **kwargs)

    async def commit(self, write: Callable[[], T], then: Callable[[T], None] | None = None) -> T:
        """Make an object write (`write()`, a metabase write) on the metabase threads,
        committed together with others waiting now (`ripple.gateway.together`), then
        `then(result)` once it is committed."""
        return await self.services.commits.run(write, then)

    async def read(self, fn: Callable[..., T], *args: object) -> T:
        """`fn(*args)`, an object read (metabase reads, opening its data), on the metabase
        threads with others waiting now (`ripple.gateway.together`)."""
        return await self.services.reads.run(functools.partial(fn, *args))

    async def run_data(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        """Call blocking work that may take long or wait for another request (a copy,
        concatenating parts, a lock another request holds, removing files) off the event
        loop, on the data threads."""
        return await threads.run_data(fn, *args, **kwargs)


def free(req: S3Request, removed: list[Object]) -> None:
    """Remove the data of versions a committed transaction deleted."""
    req.services.data.remove(o.stream_id for o in removed)


def principal(req: S3Request) -> str:
    """Who made a change to the eventing configuration, as its change log records it: the
    access key and its user (authenticated requests only)."""
    key = req.authenticated_key
    return f"{key.access_key_id} ({key.user})"
