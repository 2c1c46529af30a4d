"""A writer's checkpoints and index storage, off the commit path.

After its own commits a writer does what delta-rs's post-commit hook would: a Delta checkpoint every
``delta.checkpointInterval`` versions, and expired-log cleanup; and it stores the topic's Arrow index
(:func:`~lakelog.storage.topic_snapshot.store_index`) every :data:`PERSIST_EVERY` versions, so the next reader
replays a short tail. Both run on one background thread per topic, one run at a time, niced, so neither delays
the appends acknowledged meanwhile.

On an object store the checkpoint is written from a local copy of the log that the writer's own commit bodies
fill (:func:`~lakelog.storage.delta_checkpoint.write_checkpoint`): only other writers' commits are read back. The
bodies held also answer handoffs with the commits since their sender's snapshot.

Not thread-safe: called with the topic's lock held; the background thread gets copies.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from lakelog.storage.delta_checkpoint import write_checkpoint
from lakelog.storage.delta_log import retry_listing_gaps
from lakelog.storage.storage_failure import describe
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_snapshot import TopicSnapshot, store_index

log = logging.getLogger(__name__)

PERSIST_EVERY = 64  # versions between stored indexes
DEFAULT_CHECKPOINT_INTERVAL = 100  # Delta's delta.checkpointInterval default
MAX_HELD_BODIES = 4096  # commit bodies kept for the next checkpoint on an object store (a few KB each)
# Of our commits' bodies, the latest this many stay after a checkpoint took them: they answer handoffs with the
# commits since their sender's snapshot (the sender reads older ones from the store).
RECENT_BODIES = 256
# On object stores: a checkpoint at most this often per topic. delta-rs reads the log tail since the last checkpoint
# twice (to bring its handle up to date, then again to write): a burst of GETs at S3's latency, which with a commit
# per PUT round trip under load would otherwise recur every few seconds (BENCHMARKS.md, "Produce on object storage").
CHECKPOINT_MIN_INTERVAL_S = 10.0
# On object stores: expired-log cleanup (Delta's delta.logRetentionDuration, 30 days by default) at most this often
# per writer, not after every checkpoint: it loads the table afresh and lists its log, a burst of requests in
# produce's latency tail (BENCHMARKS.md, "Produce on object storage"), to find files that expire by the day.
LOG_CLEANUP_MIN_INTERVAL_S = 3600.0
BACKGROUND_NICE = 10  # checkpoints and index storage run at this niceness (Linux: per thread)


class Checkpointer:
    """Checkpoints and index storage of one topic, for its writer. ``dt``: the writer's delta-rs handle (local
    roots checkpoint through it); ``persisted_version``: the version of the index stored last."""

    def __init__(self, root: StorageRoot, topic: str, dt, persisted_version: int) -> None:
        self.root, self.topic = root, topic
        self._dt = dt
        self._persisted_version = persisted_version
        self._maintainer: threading.Thread | None = None
        self._checkpoint_due: int | None = None  # the version a checkpoint fell due at, until one starts
        self._checkpointed = (-1, 0.0)  # (version, monotonic time) of this writer's last checkpoint
        # object stores: our commits' bodies since the last checkpoint began, and the latest RECENT_BODIES
        self._bodies: dict[int, bytes] = {}
        self._mirror: Path | None = None  # object stores: the local copy of the log checkpoints are written from
        self._cleaned_at = time.monotonic()  # object stores: when expired log files were last looked for

    def index_stale(self, snap: TopicSnapshot) -> bool:
        """Whether the stored index is :data:`PERSIST_EVERY` versions or more behind ``snap``."""
        return snap.version - self._persisted_version >= PERSIST_EVERY

    def committed(self, version: int, body: bytes, snap: TopicSnapshot) -> None:
        """Our commit ``version`` landed (``snap`` includes it): what delta-rs's post-commit hook would do
        (checkpoint, log cleanup), and our index storage. On an object store its body is kept for the next
        checkpoint."""
        if not self.root.is_local:
            self._bodies[version] = body
            if len(self._bodies) > MAX_HELD_BODIES:  # no checkpoint for long: the oldest will be read back
                del self._bodies[next(iter(self._bodies))]  # versions come in order
        interval = int(snap.configuration.get("delta.checkpointInterval", DEFAULT_CHECKPOINT_INTERVAL))
        now = time.monotonic()
        last_version, last_time = self._checkpointed
        # Delta's rule (every interval-th version) until this writer checkpoints, then interval versions on
        due = version % interval == 0 if last_version < 0 else version - last_version >= interval
        min_s = 0.0 if self.root.is_local else CHECKPOINT_MIN_INTERVAL_S
        if due and now - last_time >= min_s:
            self._checkpoint_due = version
            self._checkpointed = (version, now)
        self.start(snap)

    def held(self, after: int, upto: int) -> list[tuple[int, str]]:
        """Our commits after version ``after`` up to ``upto`` whose bodies are still held: (version, body)."""
        return [(v, body.decode()) for v, body in self._bodies.items() if after < v <= upto]

    def start(self, snap: TopicSnapshot) -> None:
        """Start what is due -- a checkpoint, storing the index -- on one background thread, off the commit path.

        One run at a time: while one runs, what is due stays due and starts after a later commit.  A
        checkpoint replays the table's log and storing the index creates, renames and deletes files; only
        the index's serialization (an in-memory copy of the snapshot as it is now) stays on this thread.
        """
        if self._maintainer is not None and self._maintainer.is_alive():
            return
        checkpoint, self._checkpoint_due = self._checkpoint_due, None
        bodies = {}
        if checkpoint is not None:
            bodies = {v: b for v, b in self._bodies.items() if v <= checkpoint}
            for v in [v for v in bodies if v <= snap.version - RECENT_BODIES]:
                del self._bodies[v]
        index = None
        if self.index_stale(snap):
            index = (snap.version, snap.to_ipc_bytes())
            self._persisted_version = snap.version
        if checkpoint is not None or index:
            # Not a daemon thread, so the interpreter lets a started checkpoint finish before it exits.
            self._maintainer = threading.Thread(target=self._maintain, args=(checkpoint, bodies, index),
                                                name=f"lakelog-maintain-{self.topic}")
            self._maintainer.start()

    def persist(self, snap: TopicSnapshot) -> None:
        """Store the index as it is now, on this thread."""
        if self._store_index(snap.version, snap.to_ipc_bytes()):
            self._persisted_version = snap.version

    def close(self) -> None:
        """Let a running checkpoint or index store finish."""
        if self._maintainer is not None:
            self._maintainer.join()
        if self._mirror is not None:
            shutil.rmtree(self._mirror, ignore_errors=True)

    def _store_index(self, version: int, data: bytes) -> bool:
        try:
            store_index(self.root, self.topic, version, data)
            return True
        except OSError as e:  # the index is a cache of the log: failing to save it loses nothing
            log.warning("could not persist the index of %s: %s", self.topic, e)
            return False

    def _maintain(self, checkpoint: int | None, bodies: dict[int, bytes], index: tuple[int, bytes] | None) -> None:
        _lower_thread_priority()  # a checkpoint's CPU must not delay the appends acknowledged meanwhile
        if index is not None:
            self._store_index(*index)
        if checkpoint is not None:
            self._checkpoint(checkpoint, bodies)

    def _checkpoint(self, version: int, bodies: dict[int, bytes]) -> None:
        """A Delta checkpoint, then expired-log cleanup. Locally: delta-rs through ``_dt``, at the latest
        version. On an object store, where delta-rs would read every commit since the last checkpoint twice
        (four GETs each), at ``version``, from a local copy of the log that our own commits' ``bodies`` fill
        (:func:`write_checkpoint`); the cleanup, at most every :data:`LOG_CLEANUP_MIN_INTERVAL_S`, through a
        handle loaded from that checkpoint."""
        from deltalake import DeltaTable

        try:
            if self.root.is_local:
                retry_listing_gaps(self._dt.update_incremental)
                retry_listing_gaps(self._dt.create_checkpoint)
                self._dt.cleanup_metadata()
                return
            if self._mirror is None:
                self._mirror = Path(tempfile.mkdtemp(prefix="lakelog-checkpoint-"))
            fetched = write_checkpoint(self.root, self.root.path_for("topics", self.topic), version, bodies,
                                       self._mirror)
            log.debug("checkpoint of %s at version %d: %d commits read back", self.topic, version, fetched)
            if time.monotonic() - self._cleaned_at >= LOG_CLEANUP_MIN_INTERVAL_S:
                self._cleaned_at = time.monotonic()
                retry_listing_gaps(lambda: DeltaTable(self.root.uri_for("topics", self.topic),
                                                      storage_options=self.root.storage_options,
                                                      without_files=True)).cleanup_metadata()
        except Exception as e:  # a checkpoint only speeds up readers; the commits stand
            log.warning("checkpoint of %s after version %d failed: %s", self.topic, version, describe(e))


def _lower_thread_priority() -> None:
    """Nice the calling thread (Linux schedules threads individually); elsewhere a no-op."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)
    except (AttributeError, OSError):
        pass
