"""One lifecycle rule applied to one bucket (`RuleRun`), for `lifecycle_run`.

The rule is applied action by action (AbortIncompleteMultipartUpload, Expiration of current
versions, NoncurrentVersionExpiration, ExpiredObjectDeleteMarker) over the places
`lifecycle_scan` reads outside any write. The versions due are gathered into batches of at
most `batch` rows, each one *system* transaction tagged `lifecycle-expiration` with the
rule's ID, which locks the batch's keys, reads the versions' places again and re-applies the
rule to what it finds, so a write in between is never undone. `now` only judges ages:
object lock is judged, and new delete markers stamped, by the metabase clock (`db.now()`),
so a run "in the future" never deletes a retained version. The metabase owns no object data:
`removed` is told, after each batch commits, which rows went.

What each action does per versioning state, and ages: docs/lifecycle.md, "What each action
does" and "Transactions and events".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa

from ripple.changestream.tag import Operation, TransactionTag
from ripple.metabase.db import Metabase
from ripple.metabase.delete_object import delete_marker
from ripple.metabase.errors import ObjectLocked
from ripple.metabase.lifecycle import LifecycleRule
from ripple.metabase.lifecycle_scan import (
    Cancelled,
    Due,
    cap_of,
    current_due,
    cutoff,
    marker_due,
    noncurrent_due,
    places,
    places_now,
)
from ripple.metabase.listing import past
from ripple.metabase.objectlock import check_deletable
from ripple.metabase.rows import (
    METADATA_COLUMNS,
    at_bucket,
    delete_rows,
    get_bucket,
    insert_rows,
    key_bytes,
    key_version_in,
    lock_keys,
    next_version,
    note_bucket,
    object_from_row,
    remove_null_version,
    select_rows,
)
from ripple.metabase.schema import objects
from ripple.metabase.types import Bucket, BucketLocation, Object, Status, Versioning

Removed = Callable[[list[Object]], None]
Write = Callable[[sa.Connection, Bucket, list[Object]], list[Object]]


@dataclass
class LifecycleResult:
    """What a run did, per action."""

    expired: int = 0  # current versions deleted (unversioned, or a suspended null version)
    delete_markers_created: int = 0  # current versions expired in a versioned bucket
    noncurrent_deleted: int = 0  # NoncurrentVersionExpiration
    delete_markers_removed: int = 0  # ExpiredObjectDeleteMarker
    uploads_aborted: int = 0  # AbortIncompleteMultipartUpload
    kept_locked: int = 0  # due, but object lock protects them
    transactions: int = 0
    rules_failed: int = 0  # rules refused by today's checks or failing; logged, skipped
    failed: int = 0  # buckets with a failed rule (or a configuration that is no list)
    cancelled: bool = False  # `cancelled` said stop before every rule was applied

    @property
    def changed(self) -> int:
        """Rows deleted or inserted."""
        return (
            self.expired
            + self.delete_markers_created
            + self.noncurrent_deleted
            + self.delete_markers_removed
            + self.uploads_aborted
        )


@dataclass
class Job:
    """What every rule of a run shares."""

    db: Metabase
    now: datetime
    batch: int
    result: LifecycleResult
    progress: Callable[[int], None] | None
    removed: Removed | None
    cancelled: Callable[[], bool] = field(default=lambda: False)

    def check(self) -> None:
        if self.cancelled():
            raise Cancelled


class RuleRun:
    """One rule applied to one bucket."""

    def __init__(self, job: Job, bucket: Bucket, rule: LifecycleRule) -> None:
        self.job, self.db, self.rule, self.now = job, job.db, rule, job.now
        self.loc = BucketLocation(bucket.project_id, bucket.name)
        self.tag = TransactionTag(operation=Operation.LIFECYCLE_EXPIRATION, lifecycle_rule=rule.id)
        self._counts = _Counts()  # of the transaction being run

    def apply(self) -> None:
        rule, now, batch = self.rule, self.now, self.job.batch
        if rule.abort_days is not None:
            begun = cutoff(now, rule.abort_days)
            if begun is not None:  # else no upload is that old
                self._abort_uploads(begun)
        actions: list[tuple[Due | None, Write]] = []
        if rule.expires_current:
            actions.append((current_due(rule, now), self._expire_current))
        if rule.noncurrent_days is not None:
            actions.append((noncurrent_due(rule, now), self._delete_noncurrent))
        if rule.expired_object_delete_marker:
            actions.append((marker_due(rule), self._delete_markers))
        for due, write in actions:
            if due is None:  # nothing can be due at `now`
                continue
            planned: list[Object] = []
            scan = places(self.db, self.loc, rule.filter.prefix, cap_of(rule), self.job.cancelled)
            for place in scan:
                if due(place):
                    planned.append(place.row)
                    if len(planned) >= batch:
                        self._commit(planned, due, write)
                        planned = []
            if planned:
                self._commit(planned, due, write)

    # --- the writes ----------------------------------------------------------------------

    def _commit(self, planned: list[Object], due: Due, write: Write) -> None:
        """One transaction: lock the keys, read the planned versions' places again, apply
        the rule to what is there now and write."""
        self.job.check()
        keys = sorted({key_bytes(r.object_key) for r in planned})

        def tx(conn: sa.Connection) -> list[Object]:
            self._counts = _Counts()  # a retried attempt starts again
            bucket = get_bucket(conn, self.loc, lock="share")
            note_bucket(conn, bucket)
            lock_keys(conn, self.loc, keys)
            targets = [p.row for p in places_now(conn, self.loc, planned) if due(p)]
            return write(conn, bucket, targets)

        # not excluded as a transaction: like a TTL delete it is the database's own change,
        # which only a stream's `exclude_ttl_deletes` leaves out
        gone = self.db.run_write(tx, self.tag, system=True, exclude_txn_from_change_streams=False)
        self._finish(gone)

    def _finish(self, gone: list[Object]) -> None:
        counts = self._counts
        r = self.job.result
        r.transactions += 1
        r.expired += counts.expired
        r.delete_markers_created += counts.markers
        r.noncurrent_deleted += counts.noncurrent
        r.delete_markers_removed += counts.markers_removed
        r.uploads_aborted += counts.aborted
        r.kept_locked += counts.locked
        if self.job.removed is not None and gone:
            self.job.removed(gone)
        if self.job.progress is not None:
            self.job.progress(counts.changed)

    def _deletable(self, rows: list[Object]) -> list[Object]:
        """The rows object lock lets go (judged by the metabase clock, never by the run's
        `now`); the others are counted as kept."""
        clock = self.db.now()
        free = []
        for row in rows:
            try:
                check_deletable(row, clock, bypass=False)
            except ObjectLocked:
                self._counts.locked += 1
                continue
            free.append(row)
        return free

    def _expire_current(
        self, conn: sa.Connection, bucket: Bucket, targets: list[Object]
    ) -> list[Object]:
        """Expire the current versions: DeleteObject without a version ID, as S3's
        lifecycle does it (no governance bypass)."""
        if bucket.versioning is Versioning.UNVERSIONED:
            doomed = self._deletable(targets)
            delete_rows(conn, doomed)
            self._counts.expired += len(doomed)
            return doomed
        clock = self.db.now()  # object lock and the markers' created_at: never the run's `now`
        gone: list[Object] = []
        markers = []
        for target in targets:
            loc = target.location
            try:
                old = remove_null_version(conn, bucket, loc, clock, bypass=False)
            except ObjectLocked:
                self._counts.locked += 1
                continue
            gone += old
            self._counts.expired += len(old)
            markers.append(delete_marker(bucket, loc, next_version(conn, loc), clock))
        insert_rows(conn, markers)
        self._counts.markers += len(markers)
        return gone

    def _delete_noncurrent(
        self, conn: sa.Connection, _bucket: Bucket, targets: list[Object]
    ) -> list[Object]:
        doomed = self._deletable(targets)
        delete_rows(conn, doomed)
        self._counts.noncurrent += len(doomed)
        return doomed

    def _delete_markers(
        self, conn: sa.Connection, _bucket: Bucket, targets: list[Object]
    ) -> list[Object]:
        delete_rows(conn, targets)  # a delete marker is never locked
        self._counts.markers_removed += len(targets)
        return targets

    def _abort_uploads(self, begun: datetime) -> None:
        """Remove the uploads under the rule's prefix begun at or before `begun`, `batch`
        at a time (a filter's tags and sizes cannot apply to an upload)."""
        prefix = self.rule.filter.prefix.encode("utf-8")
        position = sa.tuple_(objects.c.object_key, objects.c.version)
        after: tuple[bytes, int] | None = None
        while True:
            self.job.check()
            where = [
                at_bucket(self.loc),
                objects.c.status == int(Status.PENDING),
                objects.c.created_at <= begun,
            ]
            if prefix:
                where += [objects.c.object_key >= prefix, objects.c.object_key < past(prefix)]
            if after is not None:
                where.append(position > sa.tuple_(*(sa.literal(v) for v in after)))
            query = (
                sa.select(*METADATA_COLUMNS)
                .where(*where)
                .order_by(*position.clauses)
                .limit(self.job.batch)
            )
            with self.db.read() as conn:
                found = [object_from_row(r) for r in conn.execute(query)]
            if not found:
                return
            after = (key_bytes(found[-1].object_key), found[-1].version)
            self._abort(found, begun)
            if len(found) < self.job.batch:
                return

    def _abort(self, found: list[Object], begun: datetime) -> None:
        self.job.check()

        def tx(conn: sa.Connection) -> list[Object]:
            self._counts = _Counts()
            get_bucket(conn, self.loc, lock="share")
            lock_keys(conn, self.loc, sorted({key_bytes(r.object_key) for r in found}))
            rows = select_rows(
                conn,
                sa.and_(
                    at_bucket(self.loc),
                    key_version_in(
                        conn, [key_bytes(r.object_key) for r in found], [r.version for r in found]
                    ),
                    objects.c.status == int(Status.PENDING),
                    objects.c.created_at <= begun,
                ),
                lock=True,
                data=False,
            )
            stream_ids = {r.stream_id for r in found}
            rows = [r for r in rows if r.stream_id in stream_ids]
            delete_rows(conn, rows)
            self._counts.aborted += len(rows)
            return rows

        # as abort_upload: excluded from the change streams that allow it
        gone = self.db.run_write(tx, self.tag, system=True)
        self._finish(gone)


@dataclass
class _Counts:
    expired: int = 0
    markers: int = 0
    noncurrent: int = 0
    markers_removed: int = 0
    aborted: int = 0
    locked: int = 0

    @property
    def changed(self) -> int:
        return self.expired + self.markers + self.noncurrent + self.markers_removed + self.aborted
