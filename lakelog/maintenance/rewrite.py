"""Committing a maintenance change (retention, compaction, merge): fenced, atomic, index kept in step.

A maintenance commit removes segment files (Delta ``remove``), adds the
rewritten ones (``add``) and moves per-partition offsets (``txn``: the log
start offset ``lakelog.lso.<P>``, the cleaner checkpoint
``lakelog.cleaner.<P>``), all in one Delta commit on top of the snapshot the
job planned from, so a reader sees either the old segments or the new ones.

**Fencing.**  Every maintenance commit also writes the ``txn`` app id
``lakelog.rewrite.<P>`` for each partition it touches.  delta-rs fails a commit
whose app id was committed by anyone since its read version, so two jobs that
rewrite the same partition (a merge racing a compaction, two retention runs)
cannot both land: the loser gets :class:`~lakelog.errors.ConcurrentTransactions`
and nothing of it is applied; it deletes its new files and replans (:func:`replan_on_conflict`).  Appends
write only ``lakelog.leo.<P>`` and never remove files, so they never conflict
with maintenance: delta-rs rebases the maintenance commit over them, and the
appended segments (newer than anything planned) stay untouched.

**Data change.**  Merge and compaction commit with ``dataChange=false``: they
move records between files (compaction also drops superseded ones, which Kafka
consumers never observe as new data), so a Delta streaming reader must not read
their files again.  Retention commits its removes with ``dataChange=true``: data
is gone (a Delta stream reading the table needs ``ignoreDeletes``).

After the commit the job's :class:`~lakelog.storage.topic_snapshot.TopicSnapshot` is
advanced and persisted as the new Arrow index.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Callable, Iterable, Mapping, Sequence, TypeVar

from lakelog.maintenance import crash_points
from lakelog.errors import ConcurrentTransactions, KafkaStorageError
from lakelog.storage.catalog import Catalog
from lakelog.storage.record_schema import PARTITION_COLUMN, TABLE_SCHEMA
from lakelog.storage.segment_index import Segment
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_snapshot import COMMIT_ID_KEY, OPERATION_KEY, TopicSnapshot, advance

log = logging.getLogger(__name__)

REWRITE_APP = "lakelog.rewrite."
T = TypeVar("T")


def rewrite_app(partition: int) -> str:
    """The ``txn`` app id fencing maintenance commits on one partition."""
    return f"{REWRITE_APP}{partition}"


def commit_rewrite(root: StorageRoot, snapshot: TopicSnapshot, *, operation: str, removed: Sequence[Segment] = (),
                   added: Sequence = (), txns: Mapping[str, int] | None = None, partitions: Iterable[int] = (),
                   data_change: bool = False, metadata: Mapping[str, object] | None = None) -> TopicSnapshot:
    """Commit ``removed``/``added`` (AddActions)/``txns`` on top of ``snapshot``; return the advanced snapshot.

    Raises :class:`ConcurrentTransactions` if another maintenance commit touched
    one of the partitions since ``snapshot`` (nothing applied; the caller owns
    and deletes ``added`` files), :class:`KafkaStorageError` if the store failed
    and the commit is not visible (the files are kept: a stalled write may
    still land, and vacuum removes true orphans).
    """
    from deltalake import CommitProperties, DeltaTable, Transaction
    from deltalake.exceptions import CommitFailedError
    from deltalake.transaction import RemoveAction

    now = int(time.time() * 1000)
    touched = set(partitions) | {s.partition for s in removed}
    touched |= {int(a.partition_values[PARTITION_COLUMN]) for a in added}
    apps = dict(txns or {})
    for p in sorted(touched):
        apps[rewrite_app(p)] = snapshot.txns.get(rewrite_app(p), 0) + 1
    actions = [RemoveAction(path=s.path, data_change=data_change, deletion_timestamp=now, size=s.bytes,
                            partition_values={PARTITION_COLUMN: str(s.partition)}) for s in removed]
    actions.extend(added)
    commit_id = uuid.uuid4().hex
    custom = {OPERATION_KEY: operation, COMMIT_ID_KEY: commit_id}
    for k, v in (metadata or {}).items():
        custom[k] = v if isinstance(v, str) else json.dumps(v)
    crash_points.reach("files-written")
    try:
        dt = DeltaTable(root.uri_for("topics", snapshot.topic), version=snapshot.version,
                        storage_options=root.storage_options)
        dt.create_write_transaction(
            actions, mode="append", schema=TABLE_SCHEMA, partition_by=[PARTITION_COLUMN],
            commit_properties=CommitProperties(
                custom_metadata=custom,
                app_transactions=[Transaction(app, int(v), last_updated=now) for app, v in sorted(apps.items())]))
    except CommitFailedError as e:
        raise ConcurrentTransactions(
            f"{operation} of topic {snapshot.topic} partitions {sorted(touched)} planned at version "
            f"{snapshot.version} lost to a concurrent maintenance commit: {e}") from None
    except Exception as e:  # the store failed: did our commit land anyway?
        snap = _advanced(root, snapshot)
        if commit_id not in snap.recent_commit_ids:
            raise KafkaStorageError(f"{operation} commit to topic {snapshot.topic} failed and is not visible: "
                                    f"{type(e).__name__}: {e}") from e
        log.warning("%s commit to %s reported %s but landed", operation, snapshot.topic, e)
        return _persisted(root, snap)
    crash_points.reach("committed")
    return _persisted(root, _advanced(root, snapshot))


def replan_on_conflict(root: StorageRoot, snapshot: TopicSnapshot, job: str, attempts: int,
                       attempt: Callable[[TopicSnapshot], T]) -> T:
    """``attempt(snapshot)`` -- plan a job's change of one topic and commit it -- and, each time it loses a commit
    race to another maintenance job (:class:`ConcurrentTransactions`), again on the topic's latest snapshot, up
    to ``attempts`` times in all; then :class:`ConcurrentTransactions`."""
    for n in range(attempts):
        try:
            return attempt(snapshot)
        except ConcurrentTransactions as e:
            log.info("%s of %s: %s; replanning (attempt %d)", job, snapshot.topic, e, n + 1)
            snapshot = Catalog(root).snapshot(snapshot.topic)
    raise ConcurrentTransactions(f"{job} of topic {snapshot.topic} lost {attempts} commit races in a row; "
                                 f"another maintenance job keeps rewriting it")


def _advanced(root: StorageRoot, snapshot: TopicSnapshot) -> TopicSnapshot:
    return advance(root, snapshot.copy())


def _persisted(root: StorageRoot, snap: TopicSnapshot) -> TopicSnapshot:
    try:
        snap.persist(root)
    except OSError as e:  # the index is a cache of the Delta log: losing it loses nothing
        log.warning("could not persist the index of %s: %s", snap.topic, e)
    return snap
