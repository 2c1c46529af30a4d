"""Idempotent-producer state: per (producer id, partition), the last 5 batches.

Mirrors Kafka's ``ProducerStateManager`` / ``ProducerAppendInfo``: a commit
first *prepares* every incoming batch against the state through an
:class:`AppendInfo` overlay (so several batches of one producer inside one
group commit validate against each other), and the overlay is *applied* only
after the Delta commit succeeded.  The state itself is derived from the Delta
log: every lakelog commit records its batches in the commit's metadata
(``lakelog.producerBatches``), so state and data are committed atomically and
rebuilt after a restart by replaying commits.

Not thread-safe: owned by one committer (or one snapshot) at a time.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from lakelog.errors import InvalidProducerEpoch, OutOfOrderSequenceNumber, ProducerFenced

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1


def next_sequence(seq: int) -> int:
    """Sequence after ``seq``, wrapping from int32 max to 0 as Kafka does."""
    return 0 if seq == INT32_MAX else seq + 1


def last_sequence(first_seq: int, count: int) -> int:
    """Last sequence of a batch of ``count`` records starting at ``first_seq`` (int32 wrap)."""
    last = first_seq + count - 1
    return last - (INT32_MAX + 1) if last > INT32_MAX else last


@dataclass(frozen=True)
class BatchMetadata:
    """One committed batch of one producer in one partition."""

    partition: int
    producer_id: int
    epoch: int
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp_ms: int

    def to_row(self) -> list[int]:
        return [self.partition, self.producer_id, self.epoch, self.first_seq, self.last_seq,
                self.first_offset, self.last_offset, self.timestamp_ms]

    @classmethod
    def from_row(cls, row: list[int]) -> "BatchMetadata":
        return cls(*[int(x) for x in row])


@dataclass
class ProducerStateEntry:
    """State of one producer id in one partition: its epoch and last batches (oldest first)."""

    producer_id: int
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for b in self.batches:
            if b.epoch == epoch and b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def copy(self) -> "ProducerStateEntry":
        return ProducerStateEntry(self.producer_id, self.epoch, deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN))


class ProducerStateManager:
    """All producer entries of one topic, keyed by (producer id, partition)."""

    def __init__(self) -> None:
        self.entries: dict[tuple[int, int], ProducerStateEntry] = {}

    def apply(self, batch: BatchMetadata) -> None:
        """Record a committed batch (a newer epoch resets the entry, as in Kafka)."""
        key = (batch.producer_id, batch.partition)
        entry = self.entries.get(key)
        if entry is None or batch.epoch > entry.epoch:
            entry = ProducerStateEntry(batch.producer_id, batch.epoch)
            self.entries[key] = entry
        elif batch.epoch < entry.epoch:
            return
        if entry.find_duplicate(batch.epoch, batch.first_seq, batch.last_seq) is None:
            entry.batches.append(batch)

    def to_rows(self) -> list[list[int]]:
        return [b.to_row() for e in self.entries.values() for b in e.batches]

    @classmethod
    def from_rows(cls, rows: list[list[int]]) -> "ProducerStateManager":
        mgr = cls()
        for row in rows:
            mgr.apply(BatchMetadata.from_row(row))
        return mgr

    def begin(self) -> "AppendInfo":
        return AppendInfo(self)


class AppendInfo:
    """Validates incoming batches against the state plus the batches already prepared in this commit."""

    def __init__(self, manager: ProducerStateManager) -> None:
        self._manager = manager
        self._overlay: dict[tuple[int, int], ProducerStateEntry] = {}

    def _entry(self, producer_id: int, partition: int) -> ProducerStateEntry | None:
        key = (producer_id, partition)
        if key in self._overlay:
            return self._overlay[key]
        base = self._manager.entries.get(key)
        return base.copy() if base is not None else None

    def check(self, *, topic: str, partition: int, producer_id: int, epoch: int, first_seq: int,
              count: int, transactional: bool = False) -> BatchMetadata | None:
        """Validate a batch; return the original batch if it is a duplicate, else None.

        Raises ``INVALID_PRODUCER_EPOCH`` / ``PRODUCER_FENCED`` for an older epoch and
        ``OUT_OF_ORDER_SEQUENCE_NUMBER`` for a gap, naming both sides of the check.
        """
        last_seq = last_sequence(first_seq, count)
        where = f"topic {topic} partition {partition} producer {producer_id}"
        entry = self._entry(producer_id, partition)
        if entry is None:
            if first_seq != 0:
                raise OutOfOrderSequenceNumber(
                    f"{where}: first batch of a new producer must start at sequence 0, got {first_seq}")
            return None
        if epoch < entry.epoch:
            err = ProducerFenced if transactional else InvalidProducerEpoch
            raise err(f"{where}: epoch {epoch} is older than the current epoch {entry.epoch}")
        if epoch > entry.epoch:
            if first_seq != 0:
                raise OutOfOrderSequenceNumber(
                    f"{where}: first batch of new epoch {epoch} must start at sequence 0, got {first_seq}")
            return None
        dup = entry.find_duplicate(epoch, first_seq, last_seq)
        if dup is not None:
            return dup
        expected = next_sequence(entry.last_seq)
        if first_seq != expected:
            raise OutOfOrderSequenceNumber(
                f"{where} epoch {epoch}: incoming sequence {first_seq}, expected {expected} "
                f"(last committed sequence {entry.last_seq})")
        return None

    def record(self, batch: BatchMetadata) -> None:
        """Add a prepared batch to the overlay (not yet to the manager)."""
        key = (batch.producer_id, batch.partition)
        entry = self._entry(batch.producer_id, batch.partition)
        if entry is None or batch.epoch > entry.epoch:
            entry = ProducerStateEntry(batch.producer_id, batch.epoch)
        entry.batches.append(batch)
        self._overlay[key] = entry
