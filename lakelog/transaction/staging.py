"""A transaction's writes, held outside the topic tables until the coordinator commits or aborts it.

On-disk (under the storage root), per transactional id and producer epoch::

    _lakelog/transactions/<id key>/data/<producer id>.<epoch>/<topic>/<partition>/<base sequence, 10 digits>.arrow
        the records of one produced batch: an Arrow IPC stream of lakelog.writer.records.INPUT_SCHEMA
    _lakelog/transactions/<id key>/offsets/<producer id>.<epoch>/<group, hex>/<ns, 20 digits>-<uuid>.json
        one TxnOffsetCommit: [[topic, partition, offset, metadata], ...]; later files win per partition

A batch is created put-if-absent under its base sequence, so a retried produce (same sequence) is recognised
as a duplicate and stored once.  Nothing here is ever read by a consumer: on commit the coordinator appends the
records to the topics (through the normal append path, which assigns offsets) and the offsets to
``__consumer_offsets``; then, as on abort, the directory is deleted.  The records a process staged are also kept
in memory (up to :data:`CACHE_BYTES`), so a commit by the same process reads nothing back.

Thread-safe (one lock around the cache).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid

import pyarrow as pa

from lakelog.errors import InvalidRecord
from lakelog.storage.delta_commit import CommitConflict, put_if_absent
from lakelog.storage.delta_log import read_object
from lakelog.storage.storage_root import StorageRoot, list_dir
from lakelog.transaction.transaction_log import TRANSACTIONS_DIR, id_key
from lakelog.writer.records import INPUT_SCHEMA

CACHE_BYTES = 256 << 20
Offsets = list[tuple]  # (topic, partition, offset, metadata[, committed leader epoch])


class TransactionStaging:
    def __init__(self, root: StorageRoot) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._cache: dict[str, pa.Table] = {}  # path -> records staged by this process
        self._cached_bytes = 0

    def _producer_dir(self, kind: str, transactional_id: str, producer_id: int, epoch: int) -> str:
        return f"{TRANSACTIONS_DIR}/{id_key(transactional_id)}/{kind}/{producer_id}.{epoch}"

    def _put(self, rel: str, data: bytes | pa.Buffer) -> None:
        put_if_absent(self.root, rel, data, fsync=False)

    # -- writing -----------------------------------------------------------------------------------
    def stage(self, transactional_id: str, producer_id: int, epoch: int, topic: str, partition: int,
              base_sequence: int, records: pa.Table) -> bool:
        """Store a produced batch; False if the batch with this base sequence is already stored (a retry)."""
        rel = (f"{self._producer_dir('data', transactional_id, producer_id, epoch)}/{topic}/{partition}/"
               f"{base_sequence:010d}.arrow")
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, INPUT_SCHEMA) as w:
            w.write_table(records)
        data = sink.getvalue()  # a local file takes the Arrow buffer as it is; a PUT body is bytes
        try:
            self._put(rel, data if self.root.is_local else data.to_pybytes())
        except CommitConflict:
            return False
        with self._lock:
            if self._cached_bytes + records.nbytes <= CACHE_BYTES:
                self._cache[self.root.path_for(rel)] = records
                self._cached_bytes += records.nbytes
        return True

    def stage_offsets(self, transactional_id: str, producer_id: int, epoch: int, group: str, offsets: Offsets) -> None:
        rel = (f"{self._producer_dir('offsets', transactional_id, producer_id, epoch)}/{group.encode().hex()}/"
               f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.json")
        self._put(rel, json.dumps([list(o) for o in offsets]).encode())

    # -- reading (the coordinator, on commit) -------------------------------------------------------
    def records(self, transactional_id: str, producer_id: int, epoch: int) -> dict[tuple[str, int], list[pa.Table]]:
        """The staged batches per partition, in base-sequence order."""
        base = self._producer_dir("data", transactional_id, producer_id, epoch)
        out: dict[tuple[str, int], list[pa.Table]] = {}
        for t in list_dir(self.root, base):
            topic = os.path.basename(t.path)
            for p in list_dir(self.root, f"{base}/{topic}"):
                partition = int(os.path.basename(p.path))
                files = sorted(f.path for f in list_dir(self.root, f"{base}/{topic}/{partition}")
                               if f.path.endswith(".arrow"))
                out[(topic, partition)] = [self._read(path) for path in files]
        return out

    def _read(self, path: str) -> pa.Table:
        with self._lock:
            cached = self._cache.get(path)
        if cached is not None:
            return cached
        data = read_object(self.root, path)
        if data is None:
            raise FileNotFoundError(path)
        table = pa.ipc.open_stream(data).read_all()
        if table.schema != INPUT_SCHEMA:
            raise InvalidRecord(f"a staged batch of the transaction has schema {table.schema}")
        return table

    def offsets(self, transactional_id: str, producer_id: int, epoch: int) -> dict[str, dict[tuple[str, int], tuple]]:
        """The staged offset commits per group: ``{group: {(topic, partition): (offset, metadata, leader epoch)}}``
        (-1: no leader epoch was given)."""
        base = self._producer_dir("offsets", transactional_id, producer_id, epoch)
        out: dict[str, dict[tuple[str, int], tuple]] = {}
        for g in list_dir(self.root, base):
            group = bytes.fromhex(os.path.basename(g.path)).decode()
            merged = out.setdefault(group, {})
            for f in sorted(list_dir(self.root, f"{base}/{os.path.basename(g.path)}"), key=lambda f: f.path):
                data = read_object(self.root, f.path)
                for topic, partition, offset, metadata, *leader_epoch in json.loads(data or b"[]"):
                    merged[(topic, int(partition))] = (int(offset), metadata or "",
                                                       int(leader_epoch[0]) if leader_epoch else -1)
        return out

    # -- clean-up -----------------------------------------------------------------------------------
    def discard(self, transactional_id: str, producer_id: int | None = None, epoch: int | None = None) -> None:
        """Delete what was staged under one producer id and epoch (None: every one of the id)."""
        for kind in ("data", "offsets"):
            if producer_id is None:
                targets = [i.path for i in list_dir(self.root, f"{TRANSACTIONS_DIR}/{id_key(transactional_id)}/{kind}")]
            else:
                targets = [self.root.path_for(self._producer_dir(kind, transactional_id, producer_id, epoch))]
            for path in targets:
                try:
                    self.root.filesystem.delete_dir(path)
                except (FileNotFoundError, OSError):
                    pass
                with self._lock:
                    for k in [k for k in self._cache if k.startswith(path + "/")]:
                        self._cached_bytes -= self._cache.pop(k).nbytes
