"""Idempotent-producer state (pure, table-driven) and producer-id allocation (local root and moto S3)."""

from __future__ import annotations

import time

import pytest

from lakelog.errors import InvalidProducerEpoch, OutOfOrderSequenceNumber, ProducerFenced, UnknownProducerId
from lakelog.storage.producer_ids import BLOCK_SIZE, PREFETCH_AT, ProducerRegistry
from lakelog.storage.producer_state import (INT32_MAX, NUM_BATCHES_TO_RETAIN, BatchMetadata, ProducerStateManager,
                                    last_sequence, next_sequence)

PID, P = 42, 0


def committed(*batches: tuple[int, int, int]) -> ProducerStateManager:
    """A manager holding committed batches ``(epoch, first_seq, count)`` of PID in P, offsets laid end to end."""
    mgr, offset = ProducerStateManager(), 0
    for epoch, first, count in batches:
        mgr.apply(BatchMetadata(P, PID, epoch, first, last_sequence(first, count), offset, offset + count - 1, 0))
        offset += count
    return mgr


def check(mgr: ProducerStateManager, epoch: int, first: int, count: int, transactional: bool = False):
    return mgr.begin().check(topic="t", partition=P, producer_id=PID, epoch=epoch, first_seq=first, count=count,
                             transactional=transactional)


@pytest.mark.parametrize("seq,expected", [(0, 1), (5, 6), (INT32_MAX - 1, INT32_MAX), (INT32_MAX, 0)])
def test_next_sequence_wraps_at_int32_max(seq, expected):
    assert next_sequence(seq) == expected


@pytest.mark.parametrize("first,count,last", [(0, 1, 0), (0, 5, 4), (INT32_MAX, 1, INT32_MAX), (INT32_MAX, 2, 0),
                                              (INT32_MAX - 1, 5, 2)])
def test_last_sequence_wraps_at_int32_max(first, count, last):
    assert last_sequence(first, count) == last


# (committed batches, incoming (epoch, first_seq, count, transactional), expected: None = accept, "dup", or error)
CASES = {
    "new producer starts at 0": ([], (0, 0, 3, False), None),
    "new producer starting elsewhere": ([], (0, 1, 3, False), OutOfOrderSequenceNumber),
    "last + 1 accepted": ([(0, 0, 3)], (0, 3, 2, False), None),
    "gap rejected": ([(0, 0, 3)], (0, 4, 1, False), OutOfOrderSequenceNumber),
    "overlap that is no known batch": ([(0, 0, 3)], (0, 2, 2, False), OutOfOrderSequenceNumber),
    "sequence wraps to 0 after int32 max": ([(0, INT32_MAX - 2, 3)], (0, 0, 1, False), None),
    "batch spanning the wrap, then its successor": ([(0, INT32_MAX - 1, 3)], (0, 1, 1, False), None),
    "int32 max + 1 is not a sequence": ([(0, INT32_MAX - 2, 3)], (0, INT32_MAX + 1, 1, False),
                                        OutOfOrderSequenceNumber),
    "older epoch": ([(3, 0, 2)], (2, 2, 1, False), InvalidProducerEpoch),
    "older epoch, transactional": ([(3, 0, 2)], (2, 2, 1, True), ProducerFenced),
    "new epoch starts at 0": ([(3, 0, 2)], (4, 0, 1, False), None),
    "new epoch must start at 0": ([(3, 0, 2)], (4, 2, 1, False), OutOfOrderSequenceNumber),
    "exact duplicate": ([(0, 0, 3)], (0, 0, 3, False), "dup"),
    "same first sequence, other count": ([(0, 0, 3)], (0, 0, 2, False), OutOfOrderSequenceNumber),
    "duplicate under an older epoch": ([(0, 0, 3), (1, 0, 1)], (0, 0, 3, False), InvalidProducerEpoch),
}


@pytest.mark.parametrize("name", list(CASES))
def test_sequence_and_epoch_checks(name):
    history, (epoch, first, count, transactional), expected = CASES[name]
    mgr = committed(*history)
    if expected is None:
        assert check(mgr, epoch, first, count, transactional) is None
    elif expected == "dup":
        dup = check(mgr, epoch, first, count, transactional)
        assert dup is not None and (dup.first_seq, dup.last_seq) == (first, last_sequence(first, count))
    else:
        with pytest.raises(expected) as e:
            check(mgr, epoch, first, count, transactional)
        # the message names the producer, the partition and both sides of the check
        assert f"producer {PID}" in e.value.message and f"partition {P}" in e.value.message
        assert str(first) in e.value.message or str(epoch) in e.value.message


def test_error_codes_are_kafkas():
    assert (OutOfOrderSequenceNumber.code, InvalidProducerEpoch.code, ProducerFenced.code, UnknownProducerId.code) \
        == (45, 47, 90, 59)


def test_duplicates_of_each_of_the_last_five_batches_are_recognised_not_the_sixth():
    batches = [(0, 2 * i, 2) for i in range(7)]  # seqs 0-1, 2-3, ..., 12-13; offsets the same
    mgr = committed(*batches)
    for i in range(7):
        if i >= 7 - NUM_BATCHES_TO_RETAIN:
            dup = check(mgr, 0, 2 * i, 2)
            assert dup is not None and (dup.first_offset, dup.last_offset) == (2 * i, 2 * i + 1), i
        else:
            with pytest.raises(OutOfOrderSequenceNumber):  # too old to be recognised: Kafka's answer too
                check(mgr, 0, 2 * i, 2)
    assert check(mgr, 0, 14, 1) is None  # and the producer goes on


def test_batches_prepared_in_one_commit_validate_against_each_other():
    mgr = committed((0, 0, 2))
    info = mgr.begin()
    for first, count, offset in [(2, 3, 10), (5, 1, 13)]:
        assert info.check(topic="t", partition=P, producer_id=PID, epoch=0, first_seq=first, count=count) is None
        info.record(BatchMetadata(P, PID, 0, first, last_sequence(first, count), offset, offset + count - 1, 0))
    dup = info.check(topic="t", partition=P, producer_id=PID, epoch=0, first_seq=2, count=3)
    assert dup is not None and dup.first_offset == 10  # a duplicate within the same commit
    with pytest.raises(OutOfOrderSequenceNumber):
        info.check(topic="t", partition=P, producer_id=PID, epoch=0, first_seq=7, count=1)
    # nothing reaches the manager until the commit is applied
    assert mgr.entries[(PID, P)].last_seq == 1
    assert check(mgr, 0, 2, 1) is None


def test_state_is_per_partition_and_per_producer():
    mgr = committed((0, 0, 3))
    assert mgr.begin().check(topic="t", partition=1, producer_id=PID, epoch=0, first_seq=0, count=1) is None
    with pytest.raises(OutOfOrderSequenceNumber):
        mgr.begin().check(topic="t", partition=0, producer_id=PID + 1, epoch=0, first_seq=3, count=1)


def test_apply_resets_on_a_newer_epoch_and_ignores_older_ones_and_replays():
    mgr = committed((0, 0, 2), (0, 2, 2))
    mgr.apply(BatchMetadata(P, PID, 0, 2, 3, 2, 3, 0))  # a replayed commit is not recorded twice
    assert len(mgr.entries[(PID, P)].batches) == 2
    mgr.apply(BatchMetadata(P, PID, 1, 0, 0, 4, 4, 0))
    assert mgr.entries[(PID, P)].epoch == 1 and len(mgr.entries[(PID, P)].batches) == 1
    mgr.apply(BatchMetadata(P, PID, 0, 4, 4, 5, 5, 0))  # a zombie's batch of the old epoch changes nothing
    assert mgr.entries[(PID, P)].epoch == 1 and mgr.entries[(PID, P)].last_seq == 0


def test_rows_round_trip_keeps_only_the_last_five():
    mgr = committed(*[(0, i, 1) for i in range(8)])
    rows = mgr.to_rows()
    assert len(rows) == NUM_BATCHES_TO_RETAIN and rows[0][3] == 3
    again = ProducerStateManager.from_rows(rows)
    assert again.to_rows() == rows
    assert check(again, 0, 8, 1) is None and check(again, 0, 7, 1) is not None


# -- producer ids (storage) --------------------------------------------------------------------------------
def test_producer_ids_are_unique_across_registries_and_survive_a_restart(root):
    a, b = ProducerRegistry(root), ProducerRegistry(root)
    ids = [a.init_producer().producer_id, b.init_producer().producer_id, a.init_producer().producer_id,
           b.init_producer().producer_id]
    assert len(set(ids)) == 4
    assert ids[0] // BLOCK_SIZE != ids[1] // BLOCK_SIZE  # each registry owns its own block
    restarted = ProducerRegistry(root)
    assert restarted.init_producer().producer_id not in ids  # blocks are durable: never handed out twice
    assert restarted.check(ids[1], 0) is False  # allocated, not transactional
    with pytest.raises(UnknownProducerId):
        restarted.check(10 * BLOCK_SIZE, 0)


def _producers_version(root) -> int:
    from deltalake import DeltaTable

    return DeltaTable(root.uri_for("_lakelog", "producers"), storage_options=root.storage_options).version()


def test_init_producer_id_is_answered_from_a_block_claimed_ahead(root):
    """KIP-730: a block is claimed before InitProducerId needs it, and the next one when 90% is handed out; ids
    of a block claimed ahead are not yet issued, so they are refused."""
    registry = ProducerRegistry(root)
    registry.prefetch()  # what a front does at start-up
    claimed = _producers_version(root)
    first = registry.init_producer().producer_id
    assert _producers_version(root) == claimed  # answered without a commit
    for _ in range(BLOCK_SIZE - PREFETCH_AT - 1):
        registry.init_producer()
    deadline = time.monotonic() + 30
    while _producers_version(root) == claimed:  # the next block, claimed in the background
        assert time.monotonic() < deadline, "the next block was not claimed ahead"
        time.sleep(0.05)
    ahead = _producers_version(root)
    spare = first + BLOCK_SIZE  # nobody else claims blocks on this root
    with pytest.raises(UnknownProducerId):
        registry.check(spare, 0)  # claimed, never handed out
    rest = [registry.init_producer().producer_id for _ in range(PREFETCH_AT + 1)]
    assert rest[-2] == first + BLOCK_SIZE - 1 and rest[-1] == spare  # the block ends, the spare follows
    assert registry.check(spare, 0) is False
    assert _producers_version(root) == ahead  # the spare block's first id cost no commit either


def test_transactional_id_keeps_its_producer_id_and_bumps_its_epoch(root):
    a = ProducerRegistry(root)
    first = a.init_producer("tx")
    second = ProducerRegistry(root).init_producer("tx")  # another process initialising the same id
    assert second.producer_id == first.producer_id and second.producer_epoch == first.producer_epoch + 1
    assert a.check(second.producer_id, second.producer_epoch) is True
    with pytest.raises(ProducerFenced):
        a.check(first.producer_id, first.producer_epoch)
