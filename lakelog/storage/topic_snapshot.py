"""A topic's state at one Delta version, derived from the Delta log.

A :class:`TopicSnapshot` holds what lakelog needs to read and write a topic
without scanning the table: the topic configs and partition count (table
properties), each partition's log end offset (the ``txn`` app id
``lakelog.leo.<P>``, which is also the fencing token of appends) and its
log-start-offset floor (``lakelog.lso.<P>``), the Arrow :class:`SegmentIndex`,
and the idempotent producers' state (``lakelog.producerBatches`` in each
commit's metadata).

It is persisted as one Arrow IPC file per Delta version under
``<topic>/_lakelog/index/<version>.arrow`` and advanced by replaying the Delta
log tail, so it can never disagree with the table: a reader loads the newest
persisted file and replays the commits after it.  If that tail was cleaned up,
it is rebuilt from a full delta-rs snapshot (producer state older than the
cleaned log is then lost, as Kafka loses state of expired producer ids).

Not thread-safe; :meth:`copy` gives an independent snapshot.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.ipc as ipc

from lakelog.storage.delta_log import Commit, LogTailGone, read_object, read_tail, retry_listing_gaps, txns_at
from lakelog.storage.producer_state import BatchMetadata, ProducerStateManager
from lakelog.storage.s3_objects import put_object
from lakelog.storage.segment_index import SEGMENT_NAME, Segment, SegmentIndex
from lakelog.storage.storage_root import StorageRoot, list_dir
from lakelog.storage.topic_config import TopicConfig

PARTITIONS_PROPERTY = "lakelog.partitions"
# Kafka's topic id: a new one for every incarnation of a topic name. A recreated topic continues its table's
# Delta log (so a writer holding the old incarnation loses its next commit's version and is fenced) under a
# new id; a deleted one is a commit that removes every segment and sets ``lakelog.deleted``.
TOPIC_ID_PROPERTY = "lakelog.topicId"
DELETED_PROPERTY = "lakelog.deleted"
LEO_APP = "lakelog.leo."
LSO_APP = "lakelog.lso."
CHECKPOINT_APP = "lakelog.cleaner."
PRODUCER_BATCHES_KEY = "lakelog.producerBatches"
COMMIT_ID_KEY = "lakelog.commitId"
# The commit ids of other fronts' commits that one front made for them (writer/commit_handoff.py): a JSON list.
HANDED_COMMIT_IDS_KEY = "lakelog.commitIds"
OPERATION_KEY = "lakelog.operation"
INDEX_DIR = "_lakelog/index"
INDEX_FILES_KEPT = 3


def leo_app(partition: int) -> str:
    return f"{LEO_APP}{partition}"


def lso_app(partition: int) -> str:
    return f"{LSO_APP}{partition}"


def parse_stats_timestamp(text: str | None, default: int) -> int:
    """Delta stats timestamp (ISO-8601) to epoch microseconds."""
    if not text:
        return default
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    delta = dt - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def segment_from_add(add: dict) -> Segment | None:
    """The index entry for a Delta add action (None for files that are not segments)."""
    path = add["path"]
    m = SEGMENT_NAME.match(path)
    if not m:
        return None
    stats = add.get("stats") or "{}"
    stats = json.loads(stats) if isinstance(stats, str) else stats
    mins, maxs = stats.get("minValues") or {}, stats.get("maxValues") or {}
    base = int(m.group(2))
    records = int(stats.get("numRecords") or 0)
    last = maxs.get("offset")  # absent (or null, from a full snapshot) for an empty segment
    return Segment(
        partition=int(m.group(1)),
        base_offset=base,
        last_offset=int(last) if last is not None else base + records - 1,
        records=records,
        bytes=int(add.get("size") or 0),
        min_timestamp=parse_stats_timestamp(mins.get("timestamp"), -(2**63)),
        max_timestamp=parse_stats_timestamp(maxs.get("timestamp"), 2**63 - 1),
        path=path,
        modification_time=int(add.get("modificationTime") or 0),
    )


class TopicSnapshot:
    """Configs, partition offsets, segments and producer state of a topic at ``version``."""

    def __init__(self, topic: str, version: int, configuration: dict[str, str], index: SegmentIndex,
                 txns: dict[str, int], producers: ProducerStateManager) -> None:
        self.topic = topic
        self.version = version
        self.configuration = configuration
        self.index = index
        self.txns = txns
        self.producers = producers
        self.recent_commit_ids: dict[str, int] = {}
        self.persisted_version = -1  # version of the index file this snapshot was loaded from
        #: the table schema as last committed (a ``metaData`` action's ``schemaString``); None: not read (the
        #: schema a topic is created with, :data:`~lakelog.storage.record_schema.TABLE_SCHEMA`, or older)
        self.schema_string: str | None = None

    # -- derived values -----------------------------------------------------------------
    @property
    def partition_count(self) -> int:
        return int(self.configuration.get(PARTITIONS_PROPERTY, "1"))

    @property
    def config(self) -> TopicConfig:
        return TopicConfig(self.configuration)

    @property
    def topic_id(self) -> str | None:
        """The incarnation's id (None for a table created before topic ids)."""
        return self.configuration.get(TOPIC_ID_PROPERTY)

    @property
    def deleted(self) -> bool:
        return self.configuration.get(DELETED_PROPERTY) == "true"

    def high_watermark(self, partition: int) -> int:
        """Log end offset = high watermark: every committed offset is below it."""
        return self.txns.get(leo_app(partition), 0)

    def log_start_offset(self, partition: int) -> int:
        """First offset still in the log: the delete-records floor or the first segment's base."""
        floor = self.txns.get(lso_app(partition), 0)
        first = self.index.earliest_offset(partition)
        hw = self.high_watermark(partition)
        candidates = [floor, first if first is not None else hw]
        return min(max(candidates), hw)

    def txn(self, app_id: str) -> int | None:
        return self.txns.get(app_id)

    # -- replay ---------------------------------------------------------------------------
    def apply(self, commit: Commit) -> None:
        """Advance by one commit (must be ``version + 1``)."""
        if commit.version != self.version + 1:
            raise ValueError(f"commit {commit.version} does not follow snapshot version {self.version}")
        if commit.configuration is not None:
            if commit.configuration.get(TOPIC_ID_PROPERTY) != self.configuration.get(TOPIC_ID_PROPERTY):
                # A new incarnation: nothing of the old one's offsets, producers or segments carries over.
                self.index, self.txns, self.producers = SegmentIndex(), {}, ProducerStateManager()
                self.recent_commit_ids = {}
            self.configuration = commit.configuration
        if commit.metadata is not None and commit.metadata.get("schemaString"):
            self.schema_string = commit.metadata["schemaString"]
        for rm in commit.removes:
            self.index.remove(rm["path"])
        for add in commit.adds:
            seg = segment_from_add(add)
            if seg is not None:
                self.index.add(seg)
        self.txns.update(commit.txns)
        rows = commit.commit_info.get(PRODUCER_BATCHES_KEY)
        if rows:
            for row in json.loads(rows) if isinstance(rows, str) else rows:
                self.producers.apply(BatchMetadata.from_row(row))
        handed = commit.commit_info.get(HANDED_COMMIT_IDS_KEY)
        for cid in [commit.commit_info.get(COMMIT_ID_KEY), *(handed if isinstance(handed, list) else ())]:
            if cid and isinstance(cid, str):
                self.recent_commit_ids[cid] = commit.version
        while len(self.recent_commit_ids) > 1000:
            self.recent_commit_ids.pop(next(iter(self.recent_commit_ids)))
        self.version = commit.version

    def copy(self) -> "TopicSnapshot":
        snap = TopicSnapshot(self.topic, self.version, dict(self.configuration), self.index.copy(),
                             dict(self.txns), ProducerStateManager.from_rows(self.producers.to_rows()))
        snap.recent_commit_ids = dict(self.recent_commit_ids)
        snap.schema_string = self.schema_string
        return snap

    # -- persistence ------------------------------------------------------------------
    def to_ipc_bytes(self) -> bytes:
        table = self.index.to_arrow()
        meta = {
            "lakelog.version": str(self.version),
            "lakelog.topic": self.topic,
            "lakelog.configuration": json.dumps(self.configuration),
            "lakelog.txns": json.dumps(self.txns),
            "lakelog.producers": json.dumps(self.producers.to_rows()),
        }
        if self.schema_string is not None:
            meta["lakelog.schemaString"] = self.schema_string
        table = table.replace_schema_metadata(meta)
        sink = pa.BufferOutputStream()
        with ipc.new_file(sink, table.schema) as w:
            w.write_table(table)
        return sink.getvalue().to_pybytes()

    @classmethod
    def from_ipc_bytes(cls, data: bytes) -> "TopicSnapshot":
        table = ipc.open_file(pa.BufferReader(data)).read_all()
        meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        snap = cls(
            topic=meta["lakelog.topic"],
            version=int(meta["lakelog.version"]),
            configuration=json.loads(meta["lakelog.configuration"]),
            index=SegmentIndex.from_arrow(table),
            txns={k: int(v) for k, v in json.loads(meta["lakelog.txns"]).items()},
            producers=ProducerStateManager.from_rows(json.loads(meta["lakelog.producers"])),
        )
        snap.schema_string = meta.get("lakelog.schemaString")
        return snap

    def persist(self, root: StorageRoot) -> str:
        """Write this snapshot as ``_lakelog/index/<version>.arrow``; keep the newest few."""
        return store_index(root, self.topic, self.version, self.to_ipc_bytes())


def store_index(root: StorageRoot, topic: str, version: int, data: bytes) -> str:
    """Write a serialized snapshot (:meth:`TopicSnapshot.to_ipc_bytes`) of ``version``; keep the newest few.

    Needs no snapshot object, so a writer can serialize on its commit thread and store from another.
    """
    fs = root.filesystem
    index_dir = root.path_for("topics", topic, INDEX_DIR)
    final = f"{index_dir}/{version:020d}.arrow"
    if root.is_local:
        fs.create_dir(index_dir, recursive=True)
        tmp = f"{index_dir}/.{uuid.uuid4().hex}.tmp"
        with fs.open_output_stream(tmp) as f:
            f.write(data)
        fs.move(tmp, final)
    else:  # one PUT, atomic (a filesystem stream would be a multipart upload: three requests)
        put_object(root, final, data)
    for old in _index_versions(root, topic)[:-INDEX_FILES_KEPT]:
        try:
            fs.delete_file(f"{index_dir}/{old:020d}.arrow")
        except OSError:
            pass
    return final


def _index_versions(root: StorageRoot, topic: str) -> list[int]:
    out = []
    for info in list_dir(root, f"topics/{topic}/{INDEX_DIR}"):
        name = info.base_name
        if name.endswith(".arrow") and name[:-6].isdigit():
            out.append(int(name[:-6]))
    return sorted(out)


def load_persisted(root: StorageRoot, topic: str) -> TopicSnapshot | None:
    """The newest persisted snapshot of ``topic`` that can be read, or None."""
    for v in reversed(_index_versions(root, topic)):
        try:
            data = read_object(root, root.path_for("topics", topic, INDEX_DIR, f"{v:020d}.arrow"))
            if data is not None:  # else removed since the listing, by a writer keeping the newest few
                return TopicSnapshot.from_ipc_bytes(data)
        except (OSError, KeyError, ValueError, pa.ArrowInvalid):
            continue
    return None


def rebuild_from_delta(root: StorageRoot, topic: str) -> TopicSnapshot:
    """Build a snapshot from a full delta-rs snapshot of the table (no log tail needed)."""
    from deltalake import DeltaTable

    dt = retry_listing_gaps(lambda: DeltaTable(root.uri_for("topics", topic), storage_options=root.storage_options))
    configuration = dict(dt.metadata().configuration)
    adds = pa.table(dt.get_add_actions(flatten=False)).to_pylist()
    index = SegmentIndex()
    for a in adds:
        add = {"path": a["path"], "size": a["size_bytes"], "stats": _stats_from_struct(a),
               "modificationTime": _epoch_ms(a.get("modification_time"))}
        seg = segment_from_add(add)
        if seg is not None:
            index.add(seg)
    n = int(configuration.get(PARTITIONS_PROPERTY, "1"))
    try:  # every app id, e.g. the markers of committed transactions (lakelog.tx.*), so none is applied twice
        txns = txns_at(root, root.path_for("topics", topic), dt.version())
    except (LogTailGone, OSError, ValueError, KeyError, pa.ArrowInvalid):
        txns = {}  # only the ones named below
    for p in range(n):
        for app in (leo_app(p), lso_app(p), f"{CHECKPOINT_APP}{p}"):  # the cleaner checkpoint too
            v = dt.transaction_version(app)
            if v is not None:
                txns[app] = int(v)
    snap = TopicSnapshot(topic, dt.version(), configuration, index, txns, ProducerStateManager())
    snap.schema_string = dt.schema().to_json()
    return snap


def _epoch_ms(value) -> int:
    if value is None:
        return 0
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(value)


def _stats_from_struct(a: dict) -> dict:
    def fmt(v):
        if isinstance(v, datetime):
            return v.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
        return v

    mins = {k: fmt(v) for k, v in (a.get("min") or {}).items() if k in ("offset", "timestamp")}
    maxs = {k: fmt(v) for k, v in (a.get("max") or {}).items() if k in ("offset", "timestamp")}
    return {"numRecords": a.get("num_records"), "minValues": mins, "maxValues": maxs}


def load_snapshot(root: StorageRoot, topic: str, *, base: TopicSnapshot | None = None) -> TopicSnapshot:
    """The topic's state at its latest Delta version: ``base`` (or the persisted index) plus the log tail."""
    snap = base.copy() if base is not None else load_persisted(root, topic)
    table_path = root.path_for("topics", topic)
    if snap is None:
        snap = TopicSnapshot(topic, -1, {}, SegmentIndex(), {}, ProducerStateManager())
    elif base is None:
        snap.persisted_version = snap.version
    try:
        for commit in read_tail(root, table_path, snap.version):
            snap.apply(commit)
    except LogTailGone:
        snap = rebuild_from_delta(root, topic)
        for commit in read_tail(root, table_path, snap.version):
            snap.apply(commit)
    return snap


def advance(root: StorageRoot, snap: TopicSnapshot, until_version: int | None = None) -> TopicSnapshot:
    """Advance ``snap`` in place to the latest version (or ``until_version``)."""
    table_path = root.path_for("topics", snap.topic)
    try:
        for commit in read_tail(root, table_path, snap.version, until_version):
            snap.apply(commit)
    except LogTailGone:
        fresh = load_snapshot(root, snap.topic)
        snap.__dict__.update(fresh.__dict__)
    return snap


def now_ms() -> int:
    return int(time.time() * 1000)
