"""Table-driven tests of the pure transaction state machine (lakelog/transaction/transaction_state.py).

Each row: the state a transactional id is in, an operation with its arguments, and what must come out: the
fields of the new metadata, ``SAME`` (the very same object: nothing to persist), or the Kafka error raised.
"""

from __future__ import annotations

from dataclasses import replace

import json

import pytest

from lakelog.errors import (ConcurrentTransactions, InvalidProducerEpoch, InvalidProducerIdMapping, InvalidTxnState,
                            KafkaError, ProducerFenced)
from lakelog.transaction import transaction_state as ts
from lakelog.transaction.transaction_state import TxnMetadata, TxnState as S

PID, EPOCH, TIMEOUT = 7, 3, 60_000
A, B, C = ("t", 0), ("t", 1), ("u", 0)
SAME = object()


def meta(state: S = S.EMPTY, *, partitions=(), groups=(), started_ms=-1, sequence=4, **kw) -> TxnMetadata:
    return TxnMetadata("tid", kw.pop("producer_id", PID), kw.pop("producer_epoch", EPOCH), TIMEOUT, state,
                       frozenset(partitions), frozenset(groups), started_ms, sequence, kw.pop("version", 2))


ONGOING = dict(partitions=[A], groups=["g"], started_ms=1_000, sequence=5)
IDLE = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)


def _add(m, pid=PID, epoch=EPOCH, now=5_000, partitions=(), groups=()):
    return ts.add(m, pid, epoch, now_ms=now, partitions=frozenset(partitions), groups=frozenset(groups))


def _end(m, commit, pid=PID, epoch=EPOCH):
    return ts.end(m, pid, epoch, commit)


def _fence(m, pid=PID, epoch=EPOCH + 1):
    return ts.fence(m, pid, epoch)


OPS = {"add": _add, "end": _end, "complete": ts.complete, "fence": _fence}

ROWS = [
    # -- add: begins a transaction from any idle state, widens an open one, waits for a completing one
    *[("add", meta(s, partitions=[B], groups=["old"]), dict(partitions=[A]),
       dict(state=S.ONGOING, partitions={A}, groups=set(), started_ms=5_000, sequence=5)) for s in IDLE],
    ("add", meta(S.EMPTY), dict(groups=["g"]),
     dict(state=S.ONGOING, partitions=set(), groups={"g"}, started_ms=5_000, sequence=5)),
    ("add", meta(S.ONGOING, **ONGOING), dict(partitions=[A]), SAME),
    ("add", meta(S.ONGOING, **ONGOING), dict(partitions=[A], groups=["g"]), SAME),
    ("add", meta(S.ONGOING, **ONGOING), dict(partitions=[B, C]),
     dict(state=S.ONGOING, partitions={A, B, C}, groups={"g"}, started_ms=1_000, sequence=5)),
    ("add", meta(S.ONGOING, **ONGOING), dict(groups=["h"]),
     dict(state=S.ONGOING, partitions={A}, groups={"g", "h"}, started_ms=1_000, sequence=5)),
    ("add", meta(S.PREPARE_COMMIT, **ONGOING), dict(partitions=[A]), ConcurrentTransactions),
    ("add", meta(S.PREPARE_ABORT, **ONGOING), dict(partitions=[B]), ConcurrentTransactions),
    ("add", meta(S.ONGOING, **ONGOING), dict(partitions=[B], pid=PID + 1), InvalidProducerIdMapping),
    ("add", meta(S.ONGOING, **ONGOING), dict(partitions=[B], epoch=EPOCH - 1), ProducerFenced),
    ("add", meta(S.EMPTY), dict(partitions=[B], epoch=EPOCH - 1), ProducerFenced),
    ("add", meta(S.ONGOING, **ONGOING), dict(partitions=[B], epoch=EPOCH + 1), InvalidProducerEpoch),
    ("add", meta(S.PREPARE_COMMIT, **ONGOING), dict(partitions=[A], epoch=EPOCH - 1), ProducerFenced),
    # -- end: decides an open transaction; a retry of the same outcome is a no-op; the other outcome waits or fails
    ("end", meta(S.ONGOING, **ONGOING), dict(commit=True), dict(state=S.PREPARE_COMMIT, partitions={A}, groups={"g"},
                                                               started_ms=1_000, sequence=5)),
    ("end", meta(S.ONGOING, **ONGOING), dict(commit=False), dict(state=S.PREPARE_ABORT, partitions={A}, groups={"g"},
                                                                started_ms=1_000, sequence=5)),
    ("end", meta(S.PREPARE_COMMIT, **ONGOING), dict(commit=True), SAME),
    ("end", meta(S.COMPLETE_COMMIT), dict(commit=True), SAME),
    ("end", meta(S.PREPARE_ABORT, **ONGOING), dict(commit=False), SAME),
    ("end", meta(S.COMPLETE_ABORT), dict(commit=False), SAME),
    ("end", meta(S.PREPARE_COMMIT, **ONGOING), dict(commit=False), ConcurrentTransactions),
    ("end", meta(S.PREPARE_ABORT, **ONGOING), dict(commit=True), ConcurrentTransactions),
    ("end", meta(S.EMPTY), dict(commit=True), InvalidTxnState),
    ("end", meta(S.EMPTY), dict(commit=False), InvalidTxnState),
    ("end", meta(S.COMPLETE_COMMIT), dict(commit=False), InvalidTxnState),
    ("end", meta(S.COMPLETE_ABORT), dict(commit=True), InvalidTxnState),
    ("end", meta(S.ONGOING, **ONGOING), dict(commit=True, epoch=EPOCH - 1), ProducerFenced),
    ("end", meta(S.COMPLETE_COMMIT), dict(commit=True, epoch=EPOCH - 1), ProducerFenced),
    ("end", meta(S.ONGOING, **ONGOING), dict(commit=False, epoch=EPOCH + 1), InvalidProducerEpoch),
    ("end", meta(S.ONGOING, **ONGOING), dict(commit=True, pid=PID + 1), InvalidProducerIdMapping),
    # -- complete: only from a prepared state; clears what the transaction covered, keeps its sequence
    ("complete", meta(S.PREPARE_COMMIT, **ONGOING), {},
     dict(state=S.COMPLETE_COMMIT, partitions=set(), groups=set(), started_ms=-1, sequence=5)),
    ("complete", meta(S.PREPARE_ABORT, **ONGOING), {},
     dict(state=S.COMPLETE_ABORT, partitions=set(), groups=set(), started_ms=-1, sequence=5)),
    *[("complete", meta(s, **ONGOING), {}, InvalidTxnState)
      for s in (S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)],
    # -- fence: a newer epoch (or producer id) takes over; only an open transaction turns into an abort
    ("fence", meta(S.ONGOING, **ONGOING), {},
     dict(state=S.PREPARE_ABORT, producer_epoch=EPOCH + 1, partitions={A}, groups={"g"}, sequence=5)),
    ("fence", meta(S.ONGOING, **ONGOING), dict(pid=99, epoch=0),
     dict(state=S.PREPARE_ABORT, producer_id=99, producer_epoch=0, partitions={A})),
    *[("fence", meta(s, **ONGOING), {}, dict(state=s, producer_id=PID, producer_epoch=EPOCH + 1, partitions={A}))
      for s in (S.EMPTY, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)],
]


@pytest.mark.parametrize("op,before,args,expected", ROWS,
                         ids=[f"{op}-{m.state.value}-{i}" for i, (op, m, _, _) in enumerate(ROWS)])
def test_transition(op, before, args, expected):
    """Every transition of the table yields the expected metadata, the same object, or the Kafka error."""
    if isinstance(expected, type) and issubclass(expected, KafkaError):
        with pytest.raises(expected):
            OPS[op](before, **args)
        return
    after = OPS[op](before, **args)
    if expected is SAME:
        assert after is before
        return
    assert after is not before
    for name, want in expected.items():
        got = getattr(after, name)
        assert (set(got) if isinstance(got, frozenset) else got) == want, name
    # what a transition does not mention stays
    assert (after.transactional_id, after.timeout_ms, after.version) == ("tid", TIMEOUT, before.version)
    for name in ("producer_id", "producer_epoch", "sequence"):
        if name not in expected:
            assert getattr(after, name) == getattr(before, name), name


CHECKS = [
    (PID, EPOCH, None),
    (PID, EPOCH - 1, ProducerFenced),
    (PID, 0, ProducerFenced),
    (PID, EPOCH + 1, InvalidProducerEpoch),
    (PID + 1, EPOCH, InvalidProducerIdMapping),
    (PID + 1, EPOCH - 1, InvalidProducerIdMapping),  # the id is checked before the epoch
]


@pytest.mark.parametrize("state", list(S))
@pytest.mark.parametrize("pid,epoch,error", CHECKS)
def test_check_producer(state, pid, epoch, error):
    """The current producer passes in every state; another id, an older or a newer epoch never does."""
    m = meta(state, **ONGOING)
    if error is None:
        assert ts.check_producer(m, pid, epoch) is None
    else:
        with pytest.raises(error):
            ts.check_producer(m, pid, epoch)


EXPIRY = [
    (S.ONGOING, 1_000, 61_000, False),  # exactly the timeout: not yet
    (S.ONGOING, 1_000, 61_001, True),
    (S.ONGOING, 1_000, 1_000, False),
    (S.ONGOING, 1_000, 10**12, True),
    *[(s, 1_000, 10**12, False) for s in (S.EMPTY, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT,
                                          S.COMPLETE_ABORT)],
]


@pytest.mark.parametrize("state,started,now,want", EXPIRY)
def test_expired(state, started, now, want):
    """Only an open transaction past its timeout (strictly) has expired."""
    assert ts.expired(meta(state, partitions=[A], started_ms=started), now) is want


@pytest.mark.parametrize("state", list(S))
def test_state_predicates(state):
    """``preparing`` and ``idle`` partition the states with Ongoing (neither)."""
    assert state.preparing is (state in (S.PREPARE_COMMIT, S.PREPARE_ABORT))
    assert state.idle is (state in IDLE)


MARKERS = [
    (0, 0, 0),
    (0, 1, 1),
    (1, 0, 1 << 32),
    (3, 5, (3 << 32) | 5),
    (32767, 2**31, (32767 << 32) | 2**31),
]


@pytest.mark.parametrize("epoch,sequence,want", MARKERS)
def test_marker(epoch, sequence, want):
    """The Delta txn version of a commit: the epoch above the sequence, so it only grows across a fence."""
    assert meta(producer_epoch=epoch, sequence=sequence).marker == want


def test_marker_grows_through_every_transition():
    """Begin, commit, fence, begin again: each new transaction's marker is above every earlier one."""
    m = meta(S.EMPTY, sequence=0)
    markers = []
    for step in range(3):
        m = _add(m, partitions=[A], epoch=m.producer_epoch)
        markers.append(m.marker)
        m = ts.complete(_end(m, step % 2 == 0, epoch=m.producer_epoch))
        m = _fence(_add(m, partitions=[B], epoch=m.producer_epoch), epoch=m.producer_epoch + 1)
        markers.append(m.marker)  # the aborted (fenced) transaction's marker
        m = ts.complete(m)
    assert markers == sorted(markers) and len(set(markers)) == len(markers)


JSON_ROWS = [
    meta(S.EMPTY, sequence=0, version=-1),
    meta(S.ONGOING, **ONGOING),
    meta(S.ONGOING, partitions=[A, B, C, ("ü-topic", 12)], groups=["g", "h", "ü"], started_ms=123, sequence=9),
    meta(S.PREPARE_COMMIT, partitions=[A, C], groups=["g"], started_ms=5, sequence=2**40),
    meta(S.PREPARE_ABORT, partitions=[B], started_ms=5, producer_epoch=32767),
    meta(S.COMPLETE_COMMIT, producer_id=2**40),
    meta(S.COMPLETE_ABORT, sequence=1),
    TxnMetadata("x" * ts.MAX_TRANSACTIONAL_ID_LENGTH, 0, 0, 1),
    TxnMetadata('quote"s\\and\nnewline', 1, 2, 900_000, S.ONGOING, frozenset({("t", 0)}), frozenset(), 0, 1),
]


@pytest.mark.parametrize("m", JSON_ROWS, ids=[f"{m.state.value}-{i}" for i, m in enumerate(JSON_ROWS)])
def test_json_round_trip(m):
    """from_json(to_json(m), v) gives m back with version v; the encoding is canonical (sorted, compact)."""
    data = m.to_json()
    back = TxnMetadata.from_json(data, 17)
    assert back == replace(m, version=17)
    assert back.to_json() == data
    assert data == json.dumps(json.loads(data), separators=(",", ":")).encode()  # compact
    assert json.loads(data)["partitions"] == sorted([t, p] for t, p in m.partitions)
    assert json.loads(data)["groups"] == sorted(m.groups)
    assert b'"version"' not in data  # the version is the file's name, not its content
