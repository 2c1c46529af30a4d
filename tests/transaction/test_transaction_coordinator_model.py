"""A real TransactionCoordinator over a real Log, driven by hypothesis against a small in-memory model.

Several transactional ids begin, widen, stage, commit and abort transactions; old epochs come back as zombies;
transactions time out under an injected clock; the process "crashes" (a fresh Log and coordinator on the same
root, then ``recover()``), also in the middle of a commit (the append fails for some topics after the decision
was written).  After every step each partition holds exactly the committed records, in commit order, at
contiguous offsets, with the high watermark (= the last stable offset) right after them; the committed group
offsets are the model's; and each id's stored state is the model's.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from lakelog import Log
from lakelog.errors import InvalidProducerIdMapping, InvalidTxnState, KafkaStorageError, ProducerFenced
from lakelog.group.consumer_offsets import OffsetStore
from lakelog.transaction.transaction_coordinator import TransactionCoordinator
from lakelog.transaction.transaction_state import TxnState
from lakelog.writer.records import PartitionBatch
from lakelog.writer.records import normalize_records

TOPICS = {"a": 2, "b": 1}
PARTS = [(t, p) for t, n in TOPICS.items() for p in range(n)]
TIDS = ["t1", "t2", "t3"]
GROUPS = ["g1", "g2"]
TIMEOUTS_MS = [1_000, 5_000, 60_000]
T0_S = 1_700_000_000


@dataclass
class Txn:
    """The model of one transactional id."""

    pid: int | None = None
    epoch: int = -1
    timeout_ms: int = 0
    open: bool = False
    last: str | None = None  # outcome of the last finished transaction: "commit", "abort", or None
    parts: set = field(default_factory=set)
    groups: set = field(default_factory=set)
    started_s: int = 0
    staged: dict = field(default_factory=dict)  # (topic, partition) -> [(key, value), ...] in sequence order
    offsets: dict = field(default_factory=dict)  # group -> {(topic, partition): (offset, metadata)}
    seq: dict = field(default_factory=dict)  # (topic, partition) -> next base sequence
    last_batch: tuple | None = None  # ((topic, partition), base sequence, records) of the last staged batch
    zombies: list = field(default_factory=list)  # (producer id, epoch) of fenced instances

    def begin(self, now_s: int) -> None:
        self.open, self.parts, self.groups, self.started_s = True, set(), set(), now_s
        self.staged, self.offsets, self.last_batch = {}, {}, None

    def finish(self, outcome: str) -> None:
        self.open, self.last = False, outcome
        self.parts, self.groups, self.staged, self.offsets, self.last_batch = set(), set(), {}, {}, None

    def fenced(self, epoch: int) -> None:
        """A newer epoch took over (InitProducerId, timeout)."""
        self.zombies.append((self.pid, self.epoch))
        self.epoch, self.seq = epoch, {}


records_st = st.lists(st.sampled_from([None, "k1", "k2"]), min_size=1, max_size=3)  # keys; values are unique
offsets_st = st.lists(st.tuples(st.sampled_from(PARTS), st.integers(0, 1000), st.sampled_from(["", "m1", "m2"])),
                      min_size=1, max_size=3)


class CoordinatorModel(RuleBasedStateMachine):
    @initialize(timeouts=st.lists(st.sampled_from(TIMEOUTS_MS), min_size=len(TIDS), max_size=len(TIDS)))
    def setup(self, timeouts):
        """A fresh root with the topics; every id is initialised (an id before that is unknown)."""
        self.dir = tempfile.mkdtemp(prefix="lakelog-txn-model-")
        self.root = f"{self.dir}/root"
        self.now_s = T0_S
        self.fail: dict[str, str] = {}  # topic -> "raise" | "return": the injected append failure
        self.counter = 0
        self.txns = {tid: Txn() for tid in TIDS}
        self.committed = {tp: [] for tp in PARTS}
        self.group_offsets = {g: {} for g in GROUPS}
        log = Log(self.root)
        for topic, n in TOPICS.items():
            log.create_topic(topic, n)
        self._start(log)
        for tid, timeout in zip(TIDS, timeouts):
            with pytest.raises(InvalidProducerIdMapping):
                self.coord.add_partitions(tid, 0, 0, [PARTS[0]])
            with pytest.raises(InvalidProducerIdMapping):
                self.coord.end_txn(tid, 0, 0, True)
            assert self.coord.describe(tid) is None
            self._init(tid, timeout)

    def teardown(self):
        if hasattr(self, "dir"):
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- the process ----------------------------------------------------------------------------------
    def _append(self, topic, batches):
        mode = self.fail.get(topic)
        if mode == "raise":
            raise KafkaStorageError(f"injected: appending to {topic} failed")
        if mode == "return":
            return [KafkaStorageError(f"injected: appending to {topic} failed")] * len(batches)
        return self.log.append_batches(topic, batches)

    def _start(self, log: Log) -> None:
        self.log = log
        self.coord = TransactionCoordinator(log, append=self._append, clock=lambda: float(self.now_s))

    def _crash(self) -> int:
        """Drop the process (no close) and start a fresh one on the same root."""
        self._start(Log(self.root))
        return self.coord.recover()

    def _records(self, keys):
        out = []
        for key in keys:
            self.counter += 1
            out.append((key.encode() if key else None, f"v{self.counter}".encode()))
        return out

    @staticmethod
    def _table(records):
        return normalize_records([{"key": k, "value": v} for k, v in records])

    def _commit_model(self, m: Txn) -> None:
        for tp in sorted(m.staged):
            if tp in m.parts:
                self.committed[tp].extend(m.staged[tp])
        for g in m.groups:
            self.group_offsets[g].update(m.offsets.get(g, {}))
        m.finish("commit")

    # -- the producer's requests ------------------------------------------------------------------------
    def _init(self, tid, timeout):
        m = self.txns[tid]
        ident = self.coord.init_producer_id(tid, timeout)
        if m.pid is None:
            assert ident.producer_epoch == 0
            m.pid, m.epoch = ident.producer_id, 0
        else:
            assert (ident.producer_id, ident.producer_epoch) == (m.pid, m.epoch + 1)
            m.fenced(ident.producer_epoch)
            if m.open:
                m.finish("abort")
        m.timeout_ms = timeout

    @rule(tid=st.sampled_from(TIDS), timeout=st.sampled_from(TIMEOUTS_MS))
    def init_producer_id(self, tid, timeout):
        """InitProducerId again: epoch + 1 (fencing the old one); an open transaction is aborted."""
        self._init(tid, timeout)

    @rule(tid=st.sampled_from(TIDS), parts=st.sets(st.sampled_from(PARTS), min_size=1, max_size=2))
    def add_partitions(self, tid, parts):
        m = self.txns[tid]
        self.coord.add_partitions(tid, m.pid, m.epoch, parts)
        if not m.open:
            m.begin(self.now_s)
        m.parts |= parts

    def _open(self, need=lambda m: True):
        return [t for t in TIDS if self.txns[t].open and need(self.txns[t])]

    @rule(tid=st.sampled_from(TIDS),
          batches=st.lists(st.tuples(st.sampled_from(PARTS), records_st), min_size=1, max_size=3))
    def produce(self, tid, batches):
        """A transactional producer: AddPartitionsToTxn for a new partition (beginning a transaction if none is
        open), then each batch is staged, with no offset yet."""
        m = self.txns[tid]
        for tp, items in batches:
            if not m.open or tp not in m.parts:
                self.coord.add_partitions(tid, m.pid, m.epoch, [tp])
                if not m.open:
                    m.begin(self.now_s)
                m.parts.add(tp)
            records = self._records(items)
            seq = m.seq.get(tp, 0)
            r = self.coord.stage_batch(tid, PartitionBatch(tp[1], self._table(records), m.pid, m.epoch, seq), tp[0])
            assert (r.partition, r.base_offset, r.record_count, r.duplicate) == (tp[1], -1, len(records), False)
            m.staged.setdefault(tp, []).extend(records)
            m.seq[tp] = seq + len(records)
            m.last_batch = (tp, seq, records)

    @precondition(lambda self: self._open(lambda m: m.last_batch))
    @rule(data=st.data())
    def retry_stage(self, data):
        """The producer retries its last batch (same base sequence): a duplicate, stored once."""
        tid = data.draw(st.sampled_from(self._open(lambda m: m.last_batch)))
        m = self.txns[tid]
        tp, seq, records = m.last_batch
        r = self.coord.stage_batch(tid, PartitionBatch(tp[1], self._table(records), m.pid, m.epoch, seq), tp[0])
        assert r.duplicate and r.record_count == len(records)

    @rule(data=st.data(), tid=st.sampled_from(TIDS), items=records_st)
    def stage_outside_transaction(self, data, tid, items):
        """A produce to a partition not added to an open transaction, or with no transaction open, is refused
        (INVALID_TXN_STATE), never acknowledged and then dropped."""
        m = self.txns[tid]
        outside = [tp for tp in PARTS if not (m.open and tp in m.parts)]
        if not outside:
            return
        tp = data.draw(st.sampled_from(outside))
        batch = PartitionBatch(tp[1], self._table(self._records(items)), m.pid, m.epoch, m.seq.get(tp, 0))
        with pytest.raises(InvalidTxnState):
            self.coord.stage_batch(tid, batch, tp[0])

    @rule(tid=st.sampled_from(TIDS), group=st.sampled_from(GROUPS), offsets=offsets_st)
    def commit_offsets(self, tid, group, offsets):
        """AddOffsetsToTxn (beginning a transaction if none is open), then TxnOffsetCommit."""
        m = self.txns[tid]
        self.coord.add_offsets(tid, m.pid, m.epoch, group)
        if not m.open:
            m.begin(self.now_s)
        m.groups.add(group)
        self.coord.txn_offset_commit(tid, m.pid, m.epoch, group, [(t, p, o, md) for (t, p), o, md in offsets])
        staged = m.offsets.setdefault(group, {})
        for tp, o, md in offsets:
            staged[tp] = (o, md)

    @rule(data=st.data(), tid=st.sampled_from(TIDS), commit=st.booleans(),
          failure=st.sampled_from([None, None, "raise", "return"]))
    def end_txn(self, data, tid, commit, failure):
        """EndTxn: decides an open transaction; repeats the last outcome as a no-op; else INVALID_TXN_STATE.
        With ``failure``, a commit's append fails for some of its topics (see :meth:`_failed_commit`)."""
        m = self.txns[tid]
        outcome = "commit" if commit else "abort"
        topics = sorted({t for (t, p) in m.staged if (t, p) in m.parts})
        if m.open and commit and failure and topics:
            failing = data.draw(st.sets(st.sampled_from(topics), min_size=1))
            self._failed_commit(tid, failing, failure,
                                data.draw(st.sampled_from(["recover", "periodic", "retry", "reinit"])))
        elif m.open:
            self.coord.end_txn(tid, m.pid, m.epoch, commit)
            if commit:
                self._commit_model(m)
            else:
                m.finish("abort")
        elif m.last == outcome:
            self.coord.end_txn(tid, m.pid, m.epoch, commit)
        else:
            with pytest.raises(InvalidTxnState):
                self.coord.end_txn(tid, m.pid, m.epoch, commit)

    def end_txn_plain(self, tid, commit=True):
        """EndTxn without failures (for the scenario tests)."""
        m = self.txns[tid]
        was_open = m.open
        self.coord.end_txn(tid, m.pid, m.epoch, commit)
        if was_open:
            self._commit_model(m) if commit else m.finish("abort")

    def _failed_commit(self, tid, failing, mode, then):
        """EndTxn(commit) writes PrepareCommit, then the append fails (raises, or answers errors) for some
        topics; then a restart (recover), the front's periodic task (abort_expired), a retried EndTxn, or the next
        InitProducerId of the id applies the commit, each record once."""
        m = self.txns[tid]
        self.fail = {t: mode for t in failing}
        try:
            with pytest.raises(KafkaStorageError):
                self.coord.end_txn(tid, m.pid, m.epoch, True)
        finally:
            self.fail = {}
        assert self.coord.describe(tid).state is TxnState.PREPARE_COMMIT
        for t in failing:  # nothing of the transaction reached a failing topic
            for p in range(TOPICS[t]):
                assert self._values(t, p) == [v for _, v in self.committed[(t, p)]]
        if then == "recover":
            assert self._crash() == 1
        elif then == "periodic":  # the front's periodic task, with no request from the producer
            assert self.coord.abort_expired() == []
        elif then == "retry":
            self.coord.end_txn(tid, m.pid, m.epoch, True)
        else:
            ident = self.coord.init_producer_id(tid, m.timeout_ms)
            assert (ident.producer_id, ident.producer_epoch) == (m.pid, m.epoch + 1)
        self._commit_model(m)
        if then == "reinit":
            m.fenced(m.epoch + 1)

    @precondition(lambda self: any(self.txns[t].zombies for t in TIDS))
    @rule(data=st.data(), op=st.sampled_from(["add", "offsets", "stage", "txn_offset", "commit", "abort"]),
          items=records_st)
    def zombie(self, data, op, items):
        """A request of a fenced epoch: PRODUCER_FENCED, and nothing changes."""
        tid = data.draw(st.sampled_from([t for t in TIDS if self.txns[t].zombies]))
        m = self.txns[tid]
        pid, epoch = data.draw(st.sampled_from(m.zombies))
        before = self.coord.describe(tid)
        tp = data.draw(st.sampled_from(PARTS))
        with pytest.raises(ProducerFenced):
            if op == "add":
                self.coord.add_partitions(tid, pid, epoch, [tp])
            elif op == "offsets":
                self.coord.add_offsets(tid, pid, epoch, GROUPS[0])
            elif op == "stage":
                batch = PartitionBatch(tp[1], self._table(self._records(items)), pid, epoch, 10**6)
                self.coord.stage_batch(tid, batch, tp[0])
            elif op == "txn_offset":
                self.coord.txn_offset_commit(tid, pid, epoch, GROUPS[0], [(tp[0], tp[1], 5, "zombie")])
            else:
                self.coord.end_txn(tid, pid, epoch, op == "commit")
        assert self.coord.describe(tid) == before

    @precondition(lambda self: self._open())
    @rule(seconds=st.sampled_from([0, 1, 2, 5, 30, 61]))
    def abort_expired(self, seconds):
        """Time passes; open transactions past transaction.timeout.ms are aborted under epoch + 1."""
        self.now_s += seconds
        expected = {t for t in TIDS if self.txns[t].open
                    and (self.now_s - self.txns[t].started_s) * 1000 > self.txns[t].timeout_ms}
        assert set(self.coord.abort_expired()) == expected
        for tid in expected:
            m = self.txns[tid]
            m.fenced(m.epoch + 1)
            m.finish("abort")

    @rule()
    def crash(self):
        """A restart: nothing was being decided, so recovery finishes nothing; open transactions stay open."""
        assert self._crash() == 0

    # -- invariants -----------------------------------------------------------------------------------------
    def _values(self, topic, partition):
        return self.log.read(topic, partition).column("value").to_pylist()

    @invariant()
    def topics_hold_exactly_the_committed_records(self):
        if not hasattr(self, "log"):
            return
        for t, n in TOPICS.items():
            latest = self.log.list_offsets(t, "latest")
            for p in range(n):
                rows = self.log.read(t, p)
                want = self.committed[(t, p)]
                assert rows.column("offset").to_pylist() == list(range(len(want)))
                assert list(zip(rows.column("key").to_pylist(), rows.column("value").to_pylist())) == want
                # no open transaction holds the last stable offset back: it is the high watermark
                fetched = self.log.fetch(t, p, 0)
                assert fetched.high_watermark == latest[p] == len(want)

    @invariant()
    def committed_offsets_are_the_models(self):
        if not hasattr(self, "log"):
            return
        store = OffsetStore(self.log)
        for g in GROUPS:
            got = {(e.topic, e.partition): (e.offset, e.metadata) for e in store.fetch(g)}
            assert got == self.group_offsets[g], g

    @invariant()
    def stored_states_are_the_models(self):
        if not hasattr(self, "log"):
            return
        for tid in TIDS:
            m, meta = self.txns[tid], self.coord.describe(tid)
            if m.pid is None:
                assert meta is None
                continue
            assert (meta.producer_id, meta.producer_epoch, meta.timeout_ms) == (m.pid, m.epoch, m.timeout_ms)
            if m.open:
                assert meta.state is TxnState.ONGOING
                assert (set(meta.partitions), set(meta.groups)) == (m.parts, m.groups)
                assert meta.started_ms == m.started_s * 1000
            else:
                assert meta.state is {None: TxnState.EMPTY, "commit": TxnState.COMPLETE_COMMIT,
                                      "abort": TxnState.COMPLETE_ABORT}[m.last]
                assert not meta.partitions and not meta.groups


CoordinatorModel.TestCase.settings = settings(max_examples=25, stateful_step_count=25, deadline=None,
                                              suppress_health_check=list(HealthCheck), database=None)
test_transaction_coordinator_model = CoordinatorModel.TestCase


def _check(machine: CoordinatorModel) -> None:
    machine.topics_hold_exactly_the_committed_records()
    machine.committed_offsets_are_the_models()
    machine.stored_states_are_the_models()


@pytest.mark.parametrize("then", ["recover", "periodic", "retry", "reinit"])
@pytest.mark.parametrize("mode", ["raise", "return"])
@pytest.mark.parametrize("failing", [{"a"}, {"b"}, {"a", "b"}])
def test_commit_failing_part_way(failing, mode, then):
    """The model's scenario made certain: a commit to both topics whose append fails for ``failing`` (with "b"
    only, "a" is already appended), finished by ``then``: every record once, offsets committed once."""
    machine = CoordinatorModel()
    try:
        machine.setup(timeouts=[60_000] * len(TIDS))
        machine.produce("t1", [(("a", 0), ["k1", None]), (("b", 0), ["k2"])])
        machine.produce("t2", [(("a", 0), ["k1"])])
        machine.end_txn_plain("t2")
        machine.commit_offsets("t1", "g1", [(("a", 0), 7, "m1"), (("b", 0), 3, "")])
        machine.produce("t1", [(("a", 1), ["k1"]), (("a", 0), ["k2"])])
        _check(machine)
        machine._failed_commit("t1", failing, mode, then)
        _check(machine)
        assert len(machine.committed[("a", 0)]) == 4 and machine.group_offsets["g1"] == {("a", 0): (7, "m1"),
                                                                                           ("b", 0): (3, "")}
        # a late EndTxn retry and a second restart change nothing
        machine.end_txn_plain("t1")
        assert machine._crash() == 0
        _check(machine)
    finally:
        machine.teardown()


def test_a_late_end_txn_at_a_stale_front_appends_no_record_twice(tmp_path):
    """Front A decides a commit but its append fails; front B (restarted, or now the coordinator) finishes it and
    the producer begins its next transaction there, staging to a partition the first one had added but not
    written and to one it had not added.  A late retry of the first EndTxn reaching A must act on the stored
    state, not on A's stale PrepareCommit, which would apply the next transaction's records only where the first
    one had partitions and discard the rest: acknowledged records lost, a transaction half committed.  (With one
    epoch per producer session, as in Kafka's transactions v1, an EndTxn(commit) of the same epoch commits
    whatever transaction is open: here, the second, whole.)"""
    from lakelog.errors import ConcurrentTransactions

    root = str(tmp_path / "root")
    log_a = Log(root)
    log_a.create_topic("a", 2)
    log_a.create_topic("b", 1)
    failing = [True]

    def append(topic, batches):
        if failing[0]:
            raise KafkaStorageError("injected")
        return log_a.append_batches(topic, batches)

    front_a = TransactionCoordinator(log_a, append=append)
    ident = front_a.init_producer_id("x")
    pid, epoch = ident.producer_id, ident.producer_epoch
    front_a.add_partitions("x", pid, epoch, [("a", 0), ("b", 0)])  # b: added, nothing produced to it
    front_a.stage_batch("x", PartitionBatch(0, [{"key": "k", "value": "first"}], pid, epoch, 0), "a")
    with pytest.raises(KafkaStorageError):
        front_a.end_txn("x", pid, epoch, True)
    front_b = TransactionCoordinator(Log(root))
    assert front_b.recover() == 1
    front_b.add_partitions("x", pid, epoch, [("b", 0), ("a", 1)])
    front_b.stage_batch("x", PartitionBatch(0, [{"key": "k", "value": "second"}], pid, epoch, 0), "b")
    front_b.stage_batch("x", PartitionBatch(1, [{"key": "k", "value": "second-a1"}], pid, epoch, 0), "a")
    failing[0] = False
    try:
        front_a.end_txn("x", pid, epoch, True)  # the late retry
    except ConcurrentTransactions:
        pass
    try:
        front_b.end_txn("x", pid, epoch, True)  # the producer's own EndTxn of the second transaction
    except ConcurrentTransactions:
        front_b.end_txn("x", pid, epoch, True)  # retried, as the client does
    reader = Log(root)
    assert reader.read("a", 0).column("value").to_pylist() == [b"first"]
    assert reader.read("b", 0).column("value").to_pylist() == [b"second"]  # once
    assert reader.read("a", 1).column("value").to_pylist() == [b"second-a1"]  # not lost
    assert front_b.describe("x").state is TxnState.COMPLETE_COMMIT
