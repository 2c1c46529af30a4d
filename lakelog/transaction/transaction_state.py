"""A transactional id's state and the pure rules that move it (Kafka's ``TransactionMetadata``).

::

    Empty --add--> Ongoing --end(commit)--> PrepareCommit --complete--> CompleteCommit --add--> Ongoing ...
                          \\--end(abort)---> PrepareAbort  --complete--> CompleteAbort
    Ongoing --fence (timeout, or a new InitProducerId)--> PrepareAbort under epoch + 1

Every function here is pure: it takes a :class:`TxnMetadata` and returns a new one (the same object when nothing
changes, so a caller knows there is nothing to persist), or raises the error a Kafka broker would answer with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from enum import Enum

from lakelog.errors import (ConcurrentTransactions, InvalidProducerEpoch, InvalidProducerIdMapping, InvalidTxnState,
                            ProducerFenced)

MAX_TRANSACTIONAL_ID_LENGTH = 255


class TxnState(str, Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def idle(self) -> bool:
        """No transaction is open: the next add begins one."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


@dataclass(frozen=True)
class TxnMetadata:
    """What the coordinator keeps per transactional id.

    ``sequence`` counts the transactions begun under the id (never reset): with the epoch it makes
    :attr:`marker`, the version of the Delta ``txn`` entry a commit's records carry into each partition, so a
    commit applied twice (a retry after a crash) lands once.  ``version`` is the number of the state file this
    was read from or written as (-1: never written).
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: frozenset[tuple[str, int]] = field(default_factory=frozenset)
    groups: frozenset[str] = field(default_factory=frozenset)
    started_ms: int = -1
    sequence: int = 0
    version: int = -1

    @property
    def marker(self) -> int:
        return (self.producer_epoch << 32) | self.sequence

    def to_json(self) -> bytes:
        return json.dumps({
            "transactional_id": self.transactional_id, "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch, "timeout_ms": self.timeout_ms, "state": self.state.value,
            "partitions": sorted([t, p] for t, p in self.partitions), "groups": sorted(self.groups),
            "started_ms": self.started_ms, "sequence": self.sequence}, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, version: int) -> "TxnMetadata":
        d = json.loads(data)
        return cls(d["transactional_id"], int(d["producer_id"]), int(d["producer_epoch"]), int(d["timeout_ms"]),
                   TxnState(d["state"]), frozenset((t, int(p)) for t, p in d["partitions"]),
                   frozenset(d["groups"]), int(d["started_ms"]), int(d["sequence"]), version)


def check_producer(meta: TxnMetadata, producer_id: int, producer_epoch: int) -> None:
    """The request's producer must be the id's current one (Kafka's ``PRODUCER_FENCED`` for an older epoch)."""
    if producer_id != meta.producer_id:
        raise InvalidProducerIdMapping(f"producer id {producer_id} is not the producer id of transactional id "
                                       f"{meta.transactional_id!r}")
    if producer_epoch < meta.producer_epoch:
        raise ProducerFenced(f"producer {producer_id} epoch {producer_epoch} of transactional id "
                             f"{meta.transactional_id!r} is fenced by epoch {meta.producer_epoch}")
    if producer_epoch > meta.producer_epoch:
        raise InvalidProducerEpoch(f"producer epoch {producer_epoch} is newer than the coordinator's "
                                   f"{meta.producer_epoch} for transactional id {meta.transactional_id!r}")


def add(meta: TxnMetadata, producer_id: int, producer_epoch: int, *, now_ms: int,
        partitions: frozenset[tuple[str, int]] = frozenset(), groups: frozenset[str] = frozenset()) -> TxnMetadata:
    """AddPartitionsToTxn / AddOffsetsToTxn: begin a transaction if none is open, and widen it."""
    check_producer(meta, producer_id, producer_epoch)
    if meta.state.preparing:
        raise ConcurrentTransactions(f"the last transaction of {meta.transactional_id!r} is still completing; retry")
    if meta.state.idle:
        return replace(meta, state=TxnState.ONGOING, partitions=frozenset(partitions), groups=frozenset(groups),
                       started_ms=now_ms, sequence=meta.sequence + 1)
    if partitions <= meta.partitions and groups <= meta.groups:
        return meta
    return replace(meta, partitions=meta.partitions | partitions, groups=meta.groups | groups)


def end(meta: TxnMetadata, producer_id: int, producer_epoch: int, commit: bool) -> TxnMetadata:
    """EndTxn: the decision.  A retried EndTxn of the same outcome returns ``meta`` unchanged (prepared: the
    caller finishes it; complete: nothing is left to do)."""
    check_producer(meta, producer_id, producer_epoch)
    want = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    if meta.state is TxnState.ONGOING:
        return replace(meta, state=want)
    if meta.state in (want, done):
        return meta
    if meta.state.preparing:
        raise ConcurrentTransactions(f"the transaction of {meta.transactional_id!r} is completing with the other "
                                     f"outcome; retry")
    verb = "commit" if commit else "abort"
    raise InvalidTxnState(f"cannot {verb}: transactional id {meta.transactional_id!r} has no open transaction "
                          f"(state {meta.state.value})")


def complete(meta: TxnMetadata) -> TxnMetadata:
    """PrepareCommit/PrepareAbort -> CompleteCommit/CompleteAbort, once every partition and group has it."""
    if not meta.state.preparing:
        raise InvalidTxnState(f"transactional id {meta.transactional_id!r} is not preparing (state "
                              f"{meta.state.value})")
    state = TxnState.COMPLETE_COMMIT if meta.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
    return replace(meta, state=state, partitions=frozenset(), groups=frozenset(), started_ms=-1)


def fence(meta: TxnMetadata, producer_id: int, producer_epoch: int) -> TxnMetadata:
    """A newer epoch takes the id over (a timeout, or InitProducerId): an open transaction is to be aborted."""
    state = TxnState.PREPARE_ABORT if meta.state is TxnState.ONGOING else meta.state
    return replace(meta, producer_id=producer_id, producer_epoch=producer_epoch, state=state)


def expired(meta: TxnMetadata, now_ms: int) -> bool:
    """An open transaction older than its ``transaction.timeout.ms``: the coordinator aborts it."""
    return meta.state is TxnState.ONGOING and now_ms - meta.started_ms > meta.timeout_ms
