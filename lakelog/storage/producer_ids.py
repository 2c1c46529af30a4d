"""Durable producer-id allocation and transactional-id epochs.

State lives only in Delta ``txn`` entries of the small table
``<root>/_lakelog/producers`` (its commits carry no data files):

- ``lakelog.pid.next``            next unallocated producer id; a process claims a
                                  block of :data:`BLOCK_SIZE` ids by committing
                                  ``next + BLOCK_SIZE`` (Kafka's ProducerIdManager);
- ``lakelog.tid.<transactional id>`` the id's producer id ``<< 16 | epoch``;
- ``lakelog.epoch.<producer id>``  the current epoch of a transactional producer id.

Two processes committing the same app id conflict (delta-rs refuses the
later commit), so blocks never overlap and epoch bumps are serialised: a second
``init`` with the same transactional id gets epoch + 1 and fences the first.
As Kafka's ProducerIdManager (KIP-730), a process claims its next block before it
needs it (:meth:`ProducerRegistry.prefetch`: a front at start-up, and whenever 90%
of the block is handed out), so ``InitProducerId`` is answered from memory instead
of waiting for a commit (one at object-store latency: a few hundred ms for a fresh front).
Thread-safe (one lock around the handle).  Writers have the table re-read in the
background at most once a second (:data:`EPOCH_CHECK_INTERVAL_S`,
:meth:`ProducerRegistry.refresh_soon`): a producer fenced by an init in another
process is refused by a partition once the new instance has written to it, and by
every writer within that interval plus one re-read otherwise.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import pyarrow as pa

from lakelog.errors import KafkaStorageError, ProducerFenced, UnknownProducerId
from lakelog.storage.delta_log import LogTailGone, commit_path, file_exists, read_tail, txns_at
from lakelog.storage.storage_root import StorageRoot

BLOCK_SIZE = 1000
PREFETCH_AT = BLOCK_SIZE // 10  # with this many ids left in its block, a process claims the next one
EPOCH_CHECK_INTERVAL_S = 1.0
MAX_EPOCH = 32767
NEXT_APP = "lakelog.pid.next"
_SCHEMA = pa.schema([("unused", pa.int64())])
_ATTEMPTS = 50
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProducerIdentity:
    """What ``InitProducerId`` returns."""

    producer_id: int
    producer_epoch: int
    transactional_id: str | None = None


class ProducerRegistry:
    """Allocates producer ids and answers epoch checks for one storage root."""

    def __init__(self, root: StorageRoot) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._dt = None
        self._block: list[int] = []  # [next, end) of the block this process owns
        self._spare: list[int] = []  # [start, end) of the next block, claimed ahead (prefetch)
        self._prefetching = False
        self._refreshed = 0.0  # when the latest background refresh began
        self._refreshing = False
        self._refresh_guard = threading.Lock()
        self._fresh = None  # the background refresher's own handle (only its thread touches it)
        self._txns: dict[str, int] = {}  # every app id's version at _txns_version (replaced, never changed)
        self._txns_version: int | None = None

    def _table(self):
        """The handle checks and commits use (caller holds ``_lock``)."""
        if self._dt is None:
            self._dt = self._open()
        return self._dt

    def _open(self):
        """A handle on the table at its latest version, created if missing."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        uri = self.root.uri_for("_lakelog", "producers")
        try:
            return DeltaTable(uri, storage_options=self.root.storage_options)
        except TableNotFoundError:
            try:
                if self.root.is_local:
                    self.root.filesystem.create_dir(self.root.path_for("_lakelog"), recursive=True)
                return DeltaTable.create(uri, schema=_SCHEMA, mode="ignore", storage_options=self.root.storage_options)
            except Exception:
                return DeltaTable(uri, storage_options=self.root.storage_options)

    def _commit(self, txns: dict[str, int]) -> bool:
        """Commit txn versions; False if a concurrent commit of the same app id won."""
        from deltalake import CommitProperties, Transaction
        from deltalake.exceptions import CommitFailedError

        dt = self._table()
        try:
            dt.create_write_transaction(
                [], mode="append", schema=_SCHEMA,
                commit_properties=CommitProperties(
                    app_transactions=[Transaction(k, v) for k, v in txns.items()],
                    custom_metadata={"lakelog.operation": "init-producer"}))
            return True
        except CommitFailedError:
            return False
        finally:
            dt.update_incremental()

    def _claim_block(self) -> list[int]:
        """Commit ``lakelog.pid.next`` one block further; the block claimed (caller holds ``_lock``)."""
        for _ in range(_ATTEMPTS):
            dt = self._table()
            dt.update_incremental()
            start = self._txns_of(dt).get(NEXT_APP, 0)
            if self._commit({NEXT_APP: start + BLOCK_SIZE}):
                return [start, start + BLOCK_SIZE]
        raise KafkaStorageError("could not allocate a producer id block after repeated commit conflicts")

    def _next_id(self) -> int:
        if not (self._block and self._block[0] < self._block[1]):
            self._block, self._spare = self._spare or self._claim_block(), []
        pid = self._block[0]
        self._block[0] += 1
        if self._block[1] - self._block[0] <= PREFETCH_AT and not self._spare and not self._prefetching:
            self._prefetching = True
            threading.Thread(target=self.prefetch, name="lakelog-producer-ids", daemon=True).start()
        return pid

    def prefetch(self) -> None:
        """Claim the next block now, unless the block in hand has more than :data:`PREFETCH_AT` ids left or the next
        one is claimed already.  Blocking (a commit to the producers table): call it off the request path.  A
        failure is logged, not raised: ``InitProducerId`` claims the block itself then."""
        with self._lock:
            try:
                if self._spare or self._block and self._block[1] - self._block[0] > PREFETCH_AT:
                    return
                block = self._claim_block()
                if self._block and self._block[0] < self._block[1]:
                    self._spare = block
                else:
                    self._block = block
            except Exception as e:  # a background claim: the request path claims it itself
                log.warning("claiming the next producer id block failed: %s: %s", type(e).__name__, e)
            finally:
                self._prefetching = False  # under the lock, where _next_id reads it

    def init_producer(self, transactional_id: str | None = None) -> ProducerIdentity:
        """A new producer id (epoch 0), or for a transactional id its stable id with the epoch bumped."""
        with self._lock:
            if transactional_id is None:
                return ProducerIdentity(self._next_id(), 0)
            app = f"lakelog.tid.{transactional_id}"
            for _ in range(_ATTEMPTS):
                dt = self._table()
                dt.update_incremental()
                packed = self._txns_of(dt).get(app)
                if packed is None or (packed & 0xFFFF) >= MAX_EPOCH:
                    pid, epoch = self._next_id(), 0
                else:
                    pid, epoch = packed >> 16, (packed & 0xFFFF) + 1
                if self._commit({app: (pid << 16) | epoch, f"lakelog.epoch.{pid}": epoch}):
                    return ProducerIdentity(pid, epoch, transactional_id)
            raise KafkaStorageError(f"could not initialise transactional id {transactional_id!r}: repeated conflicts")

    def refresh_soon(self, max_age_s: float = EPOCH_CHECK_INTERVAL_S) -> None:
        """Catch up with other processes' allocations and epoch bumps in the background, unless that began within
        ``max_age_s`` or is under way; never waits for the store.  Writers call it under a topic's lock, where a
        refresh in line (a LIST and GETs: tens of ms at S3's latency) would hold up every commit of the topic
        once a second.  Checks answer from the table as last loaded meanwhile."""
        with self._refresh_guard:  # not _lock, which a commit of InitProducerId holds through its I/O
            started = time.monotonic()
            if self._refreshing or started - self._refreshed < max_age_s:
                return
            self._refreshing, self._refreshed = True, started
        threading.Thread(target=self._refresh, name="lakelog-producer-epochs", daemon=True).start()

    def _refresh(self) -> None:
        """Bring a handle of the refresher's own up to date, off the lock, and let checks use it if it is newer
        than theirs; theirs is never touched here, and the refresher's is never touched once handed over."""
        try:
            fresh = self._fresh
            if fresh is None:
                fresh = self._open()
            elif not file_exists(self.root, self.root.path_for(commit_path("_lakelog/producers", fresh.version() + 1))):
                return  # nothing since (a Delta log has no gaps): one HEAD, where delta-rs would LIST and GET
            else:
                fresh.update_incremental()
            version = fresh.version()
            with self._lock:
                if self._dt is not None and version <= self._dt.version():
                    self._fresh = fresh
                    return
                base, base_version = self._txns, self._txns_version
            txns = self._read_txns(version, base, base_version)  # the checks' reads, done here
            with self._lock:
                if self._dt is None or version > self._dt.version():
                    self._dt, self._fresh = fresh, None
                    self._txns, self._txns_version = txns, version
                else:
                    self._fresh = fresh
        except Exception as e:  # the next call starts another; checks go on with what they have
            log.warning("refreshing producer epochs failed: %s: %s", type(e).__name__, e)
        finally:
            with self._refresh_guard:
                self._refreshing = False

    def _txns_of(self, dt) -> dict[str, int]:
        """Every app id's version at ``dt``'s version, read once per version (caller holds ``_lock``): delta-rs's
        ``transaction_version`` reads every commit since the checkpoint on each call (seen through the S3 proxy),
        which each check of a producer id paid twice."""
        version = dt.version()
        if self._txns_version != version:
            self._txns = self._read_txns(version, self._txns, self._txns_version)
            self._txns_version = version
        return self._txns

    def _read_txns(self, version: int, base: dict[str, int], base_version: int | None) -> dict[str, int]:
        """The app ids at ``version``: ``base`` (at ``base_version``) and the commits after it, else the whole log."""
        path = self.root.path_for("_lakelog", "producers")
        if base_version is not None and base_version <= version:
            txns = dict(base)
            try:
                for commit in read_tail(self.root, path, base_version, version):
                    txns.update(commit.txns)
                return txns
            except LogTailGone:  # cleaned up behind a checkpoint: read from the checkpoint
                pass
        return txns_at(self.root, path, version)

    def _versions(self, dt, producer_id: int) -> tuple[int, int | None]:
        """(next unallocated id, epoch of ``producer_id`` or None) at the table's loaded version (caller holds
        ``_lock``)."""
        txns = self._txns_of(dt)
        return txns.get(NEXT_APP, 0), txns.get(f"lakelog.epoch.{producer_id}")

    def check(self, producer_id: int, epoch: int) -> bool:
        """Validate a producer id/epoch pair; returns whether the id is transactional.

        Raises ``UNKNOWN_PRODUCER_ID`` for an id never allocated (or, in this process's block, never handed
        out: ids of other processes' blocks cannot be told apart from issued ones) and
        ``PRODUCER_FENCED`` for a transactional id whose epoch was bumped.
        """
        with self._lock:
            dt = self._table()
            allocated, current = self._versions(dt, producer_id)
            if producer_id >= allocated or current is not None and epoch > current:
                dt.update_incremental()
                allocated, current = self._versions(dt, producer_id)
            unissued = any(b and b[0] <= producer_id < b[1] for b in (self._block, self._spare))
        if producer_id < 0 or producer_id >= allocated:
            raise UnknownProducerId(f"producer id {producer_id} was never allocated (next id {allocated})")
        if unissued:  # in this process's own block, past the ids it has handed out: no producer holds it
            raise UnknownProducerId(f"producer id {producer_id} was never handed out by InitProducerId")
        if current is not None and epoch < current:
            raise ProducerFenced(f"producer {producer_id} epoch {epoch} is fenced by epoch {current}")
        return current is not None
