"""The Delta commit of an append: one topic's table as its writer knows it (:class:`TopicTable`), and the commits
the writer makes to it.

A commit file is written directly (:meth:`TopicTable.commit_direct`), put-if-absent on a local root or S3, with
the actions and conflict rule delta-rs would use, and applied to the writer's snapshot from what it wrote;
delta-rs commits only for a table whose protocol asks more of a writer (:meth:`TopicTable.commit_with_delta_rs`).

Every commit carries a unique ``lakelog.commitId``, so a commit whose outcome is unknown (the store failed after
the write) is recognised on refresh and never applied twice (:meth:`TopicTable.unknown_outcome`). After each of
its own commits the writer checkpoints as delta-rs would (:mod:`lakelog.writer.checkpointer`).

Not thread-safe: callers hold the topic's lock.
"""

from __future__ import annotations

import json
import logging
import time

from lakelog.errors import KafkaError, KafkaStorageError, RequestTimedOut, UnknownTopicOrPartition
from lakelog.storage.delta_commit import CommitConflict, put_if_absent
from lakelog.storage.delta_log import Commit, LogTailGone, commit_path, encode_actions, read_tail, retry_listing_gaps
from lakelog.storage.storage_failure import storage_failure
from lakelog.storage.record_schema import PARTITION_COLUMN
from lakelog.storage.storage_root import StorageRoot
from lakelog.storage.topic_snapshot import (COMMIT_ID_KEY, HANDED_COMMIT_IDS_KEY, OPERATION_KEY, PRODUCER_BATCHES_KEY,
                                            TopicSnapshot, advance, load_snapshot)
from lakelog.writer.checkpointer import Checkpointer
from lakelog.writer.typed_segments import table_arrow_schema

log = logging.getLogger(__name__)

# A commit is written directly (put_if_absent, on local roots and S3): delta-rs's commit re-derives
# the table snapshot after every commit and our refresh derives it again -- two log replays that grow
# with live files and commits since the checkpoint (BENCHMARKS.md, "Append throughput").  False: always delta-rs.
DIRECT_COMMITS = True
MAX_COMMIT_RETRIES = 50  # commits by others that do not conflict with ours (as delta-rs's max_commit_retries)
RETRY = "retry"  # after_conflict: the same commit at the next version
ENGINE = "lakelog-direct-commit"

#: The outcome of a commit: True when it landed; None when it lost to a commit that forces a re-plan; a
#: KafkaError to answer (its outcome unknown, or the store failed).
Outcome = bool | KafkaError | None


class TopicTable:
    """One topic's Delta table as its writer knows it: ``snapshot``, the latest version it has applied."""

    def __init__(self, root: StorageRoot, topic: str) -> None:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        self.root, self.topic = root, topic
        snap = load_snapshot(root, topic)
        if snap.version < 0 or snap.deleted:
            raise UnknownTopicOrPartition(f"topic {topic} does not exist under {root.uri}")
        try:
            self._dt = retry_listing_gaps(
                lambda: DeltaTable(root.uri_for("topics", topic), storage_options=root.storage_options))
        except TableNotFoundError:
            raise UnknownTopicOrPartition(f"topic {topic} does not exist under {root.uri}") from None
        self.snapshot: TopicSnapshot = advance(root, snap, until_version=self._dt.version())
        #: True until the snapshot is known to be the log as committed (a commit not applied, a refresh failed)
        self.stale = False
        #: commit files written here (False: through delta-rs, for a protocol that asks more of a writer)
        self.direct = DIRECT_COMMITS and _direct_commits_supported(self._dt)
        self.checkpointer = Checkpointer(root, topic, self._dt, snap.persisted_version)
        if self.checkpointer.index_stale(self.snapshot):
            self.checkpointer.persist(self.snapshot)  # spare the next reader replaying the same long tail

    def refresh(self) -> None:
        """Catch up with every commit made since our snapshot (ours and other writers'). Pipelined commits still
        staged are not read back: they are applied from what we wrote, in order, when they land."""
        # Stale until handle and snapshot agree: committing through a handle newer than the
        # snapshot would skip delta-rs's conflict check against the commits in between.
        self.stale = True
        if self.direct:  # no delta-rs handle to keep in step: our commits do not go through it
            advance(self.root, self.snapshot)
        else:
            retry_listing_gaps(self._dt.update_incremental)
            advance(self.root, self.snapshot, until_version=self._dt.version())
        self.stale = False
        self.checkpointer.start(self.snapshot)

    def refresh_or(self, outcome):
        """:meth:`refresh`, then ``outcome``; or the storage error that stopped the refresh."""
        try:
            self.refresh()
        except Exception as e:
            return storage_failure(f"refreshing {self.topic} after a commit", e, log)
        return outcome

    def commit_direct(self, adds, txns: dict[str, int], meta: dict, metadata: dict | None = None) -> Outcome:
        """Commit by creating ``_delta_log/<snapshot version + 1>.json`` ourselves: put-if-absent (a rename
        without replace locally, a conditional PUT, ``If-None-Match: *``, on S3).

        The actions are the ones delta-rs would write, and so is the conflict rule:
        when another commit took the version, it is replayed and we retry at the
        next version -- unless it set one of our app ids (``lakelog.leo.<P>``, ``lakelog.lease.<P>``) or
        changed the table's metadata or protocol; then the caller re-plans
        (None).  On success our own commit is applied to the snapshot from what we
        wrote: nothing is re-read, and no delta-rs snapshot is rebuilt. ``metadata``: a ``metaData`` action
        that widens the table schema (typed columns).
        """
        added = [add_action(a) for a in adds]
        body, info = commit_body(added, txns, meta, metadata)
        for _ in range(MAX_COMMIT_RETRIES):
            version = self.snapshot.version + 1
            try:
                put_if_absent(self.root, commit_path(f"topics/{self.topic}", version), body, fsync=False)
            except CommitConflict:
                outcome = self.after_conflict(meta[COMMIT_ID_KEY], txns, version)
                if outcome is RETRY:
                    continue
                return outcome
            except OSError as e:
                if self.root.is_local:  # the link was not made: nothing became visible
                    return storage_failure(f"committing to {self.topic} failed (not visible; retry)", e, log)
                return self.unknown_outcome(e, meta[COMMIT_ID_KEY])
            except Exception as e:  # an object store's PUT whose response was lost may still have landed
                return self.unknown_outcome(e, meta[COMMIT_ID_KEY])
            self.landed(version, added, txns, info, body, metadata)
            return True
        return None

    def landed(self, version: int, added: list[dict], txns: dict[str, int], info: dict, body: bytes,
               metadata: dict | None = None) -> None:
        """Our commit ``version`` landed: apply it to the snapshot from what we wrote, and checkpoint as due."""
        try:
            self.snapshot.apply(Commit(version, adds=added, txns=txns, commit_info=info, metadata=metadata,
                                       configuration=None if metadata is None else metadata["configuration"]))
        except Exception as e:  # committed all the same; re-read it from the log before the next append
            log.warning("applying our commit %d of %s failed: %s", version, self.topic, e)
            self.stale = True
            return
        self.checkpointer.committed(version, body, self.snapshot)

    def after_conflict(self, commit_id: str, txns: dict[str, int], version: int):
        """Another commit took our ``version``: replay the commits up to it into the snapshot (no probe past it:
        a later version taken too costs the next PUT its own 412, a probe would cost every conflict a GET) and
        apply Delta's conflict rule. True: ours is among them (a PUT the store retried); :data:`RETRY`: none set
        one of our app ids (``lakelog.leo.<P>``, ``lakelog.lease.<P>``) or changed the metadata or protocol, so
        the same commit -- files, offsets -- may go at the next version; otherwise None, or a KafkaError if the
        log could not be read (the caller re-plans on what landed)."""
        try:
            winners = list(read_tail(self.root, self.root.path_for("topics", self.topic), self.snapshot.version,
                                     version))
            for commit in winners:
                self.snapshot.apply(commit)
        except (LogTailGone, OSError, ValueError) as e:
            log.debug("replaying the commits that beat ours on %s: %s", self.topic, e)
            return self.refresh_or(None)
        if commit_id in self.snapshot.recent_commit_ids:
            return True
        if any(c.protocol is not None for c in winners):
            self.direct = False  # a protocol we may not speak: leave it to delta-rs
            return self.refresh_or(None)
        if any(c.configuration is not None or txns.keys() & c.txns.keys() for c in winners):
            return self.refresh_or(None)  # our offsets or validation may be stale: re-plan on the latest state
        return RETRY

    def unknown_outcome(self, e: Exception, commit_id: str) -> bool | KafkaError:
        """A commit whose store call failed without saying whether it landed: look for it by its id."""
        log.warning("commit of %s failed ambiguously: %s", self.topic, e)
        outcome = self.refresh_or(None)
        if isinstance(outcome, KafkaError):
            return outcome
        if commit_id in self.snapshot.recent_commit_ids:
            return True  # it landed; only the response was lost
        text = str(e).lower()
        error = RequestTimedOut if "timed out" in text or "timeout" in text else KafkaStorageError
        # The exception's kind only: its text names the store's URLs and paths, which clients must not see.
        return error(f"committing to {self.topic} failed (not visible; retry): {type(e).__name__}")

    def commit_with_delta_rs(self, adds, txns: dict[str, int], meta: dict, metadata: dict | None = None) -> Outcome:
        """Commit through delta-rs (a table whose protocol asks more of a writer than plain adds)."""
        from deltalake import CommitProperties, Transaction
        from deltalake.exceptions import CommitFailedError

        props = CommitProperties(
            custom_metadata=meta,
            app_transactions=[Transaction(app, v) for app, v in txns.items()],
            max_commit_retries=MAX_COMMIT_RETRIES,
        )
        try:
            self._dt.create_write_transaction(adds, mode="append", schema=table_arrow_schema(self.snapshot, metadata),
                                              partition_by=[PARTITION_COLUMN], commit_properties=props)
        except CommitFailedError as e:
            log.debug("commit conflict on %s: %s", self.topic, e)
            return self.refresh_or(None)
        except Exception as e:  # the outcome is unknown: the commit may have landed
            return self.unknown_outcome(e, meta[COMMIT_ID_KEY])
        try:
            self.refresh()
        except Exception as e:  # committed; catch up before the next append
            log.warning("refresh of %s after a commit failed: %s", self.topic, e)
            self.stale = True
        return True

    def close(self) -> None:
        """Let a running checkpoint or index store finish, then persist the index as it is now."""
        self.checkpointer.close()
        self.persist()

    def persist(self) -> None:
        """Store the index as it is now, on this thread."""
        self.checkpointer.persist(self.snapshot)


def commit_meta(producer_rows: list, commit_id: str, handed_ids: list[str] = ()) -> dict:
    """An append's commitInfo keys of lakelog's own: its commit id, the producer state rows, the handoffs it
    carries."""
    meta: dict = {COMMIT_ID_KEY: commit_id, OPERATION_KEY: "append"}
    if producer_rows:
        meta[PRODUCER_BATCHES_KEY] = json.dumps(producer_rows)
    if handed_ids:
        meta[HANDED_COMMIT_IDS_KEY] = list(handed_ids)
    return meta


def add_action(a) -> dict:
    """A deltalake AddAction as the add action of a commit file."""
    return {"path": a.path, "partitionValues": dict(a.partition_values), "size": a.size,
            "modificationTime": a.modification_time, "dataChange": a.data_change, "stats": a.stats}


def commit_body(added: list[dict], txns: dict[str, int], meta: dict,
                metadata: dict | None = None) -> tuple[bytes, dict]:
    """An append's commit file -- the actions delta-rs would write, with ``metadata`` when it widens the table
    schema -- and its commitInfo."""
    now = int(time.time() * 1000)
    info = {"timestamp": now, "operation": "WRITE",
            "operationParameters": {"mode": "Append", "partitionBy": json.dumps([PARTITION_COLUMN])},
            "engineInfo": ENGINE, "clientVersion": ENGINE, "isBlindAppend": True, **meta}
    body = encode_actions([{"commitInfo": info}, *([{"metaData": metadata}] if metadata else []),
                           *({"add": a} for a in added),
                           *({"txn": {"appId": app, "version": v, "lastUpdated": now}} for app, v in txns.items())])
    return body, info


def _direct_commits_supported(dt) -> bool:
    """Whether the table's protocol asks nothing of an appender beyond plain adds (writer version <= 2)."""
    protocol = dt.protocol()
    return protocol.min_writer_version <= 2 and not protocol.writer_features
