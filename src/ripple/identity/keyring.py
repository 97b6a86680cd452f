"""The gateway's view of the access keys: each key and its opened secret, looked up in the
metabase and kept in memory for a few seconds, so a revoked key stops working within that
time while a busy client costs no query per request."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from ripple.identity.errors import IdentityError
from ripple.identity.keys import AccessKey, is_access_key_id
from ripple.identity.sealing import MasterKey, master_key_path
from ripple.identity.users import load_key
from ripple.metabase.db import Metabase

log = logging.getLogger(__name__)

DEFAULT_TTL = 1.0  # every gateway refuses a revoked key within a second
MAX_CACHED = 10_000  # answers kept, unknown ids included; the oldest go first


class NotHeld(Exception):
    """The keyring would have to query the metabase to answer for this key."""


@dataclass(frozen=True)
class _Entry:
    expires: float  # time.monotonic()
    key: AccessKey | None
    secret: str | None = field(default=None, repr=False)


class Keyring:
    """Looks up access keys and their secrets; caches them in memory for `ttl` seconds
    (a revoked key stops working within ttl). Safe to share between threads.

    The master key is read when first needed; if `data_dir` has one already it is read
    (and checked) here, so a bad master key stops the gateway at start-up."""

    def __init__(self, db: Metabase, data_dir: Path, *, ttl: float = DEFAULT_TTL) -> None:
        self.db = db
        self.data_dir = data_dir
        self.ttl = ttl
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, _Entry] = OrderedDict()
        self._master: MasterKey | None = None
        if master_key_path(data_dir).exists():
            self._master = MasterKey.load(data_dir)

    def __repr__(self) -> str:
        return f"Keyring(data_dir={self.data_dir!r}, ttl={self.ttl!r}, cached={len(self._cache)})"

    def secret_of(self, access_key_id: str) -> str | None:
        """The secret key, for SigV4 verification; None if the key is unknown or revoked."""
        return self._entry(access_key_id).secret

    def key(self, access_key_id: str) -> AccessKey | None:
        """The access key; None if it is unknown or revoked."""
        return self._entry(access_key_id).key

    def held_secret_of(self, access_key_id: str) -> str | None:
        """`secret_of` from what is held in memory only; `NotHeld` when that would take a
        query (the key is not held, or no longer fresh)."""
        return self._held(access_key_id).secret

    def held_key(self, access_key_id: str) -> AccessKey | None:
        """`key` from what is held in memory only; `NotHeld` as `held_secret_of`."""
        return self._held(access_key_id).key

    def _held(self, access_key_id: str) -> _Entry:
        if not is_access_key_id(access_key_id):
            return _Entry(0.0, None)
        with self._lock:
            entry = self._cache.get(access_key_id)
        if entry is None or entry.expires <= time.monotonic():
            raise NotHeld(access_key_id)
        return entry

    def _entry(self, access_key_id: str) -> _Entry:
        if not is_access_key_id(access_key_id):
            return _Entry(0.0, None)  # malformed: not worth a query, nor a cache slot
        now = time.monotonic()
        with self._lock:
            entry = self._cache.get(access_key_id)
            if entry is not None and entry.expires > now:
                return entry
        entry = self._load(access_key_id, now + self.ttl)
        with self._lock:
            self._cache[access_key_id] = entry
            self._cache.move_to_end(access_key_id)
            while len(self._cache) > MAX_CACHED:
                self._cache.popitem(last=False)
        return entry

    def _load(self, access_key_id: str, expires: float) -> _Entry:
        with self.db.read() as conn:
            found = load_key(conn, access_key_id)
        if found is None:
            return _Entry(expires, None)
        key, sealed = found
        try:
            secret = self._master_key().open(access_key_id, sealed)
        except IdentityError as e:  # no master key, or not the one that sealed the secret
            # a misconfiguration, not a bad request: say so in the log, refuse the key
            log.error("access key %s is unusable: %s", access_key_id, e)
            return _Entry(expires, None)
        return _Entry(expires, key, secret)

    def _master_key(self) -> MasterKey:
        if self._master is None:
            self._master = MasterKey.load(self.data_dir)
        return self._master
