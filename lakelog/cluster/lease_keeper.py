"""Keeps this front's share of partition leases: every ``interval`` it reads the live fronts, computes the
balanced assignment (:func:`~lakelog.storage.partition_lease.assign`) and takes the leases assigned to it
that another front holds (or nobody does).  A front that died stops beating and, one session timeout later,
its partitions are assigned to the others, which take them; a front that joins is dealt its share at once
and takes it, fencing the previous holders' next appends.  The previous holder of a moved partition answers
``NOT_LEADER_OR_FOLLOWER`` with the new leader from then on.

The heartbeat has a thread of its own, beating every ``interval`` whatever the lease pass is doing (Kafka's
consumer does the same since KIP-62): a pass waits for this front's appends to take leases, and under load it
can outlast the session timeout, which must not make the others take this live front's partitions.

A topic created (or grown) through this front's Log has this front's share of its leases taken before the
create call returns (dealt with the last pass's view of the fronts and the other topics), as Kafka's controller
elects a new topic's leaders as it creates it; the other fronts take theirs at their next pass, within
``interval``.

The keeper is the Log's :class:`~lakelog.log.LeaseView`: it is built first, given to the Log, and started with
that Log (:meth:`LeaseKeeper.start`); a pass can also be run directly on a Log (:meth:`LeaseKeeper.run_pass`).

Thread safety: one background thread takes the leases, another beats the heartbeat, and a topic's creator takes
its share on its own thread, one of them at a time. :meth:`front`, :meth:`live` and :meth:`assigned` read a
snapshot of the last pass.
"""

from __future__ import annotations

import logging
import threading

from lakelog.cluster.membership import FrontInfo, Membership
from lakelog.errors import KafkaError
from lakelog.log import Log
from lakelog.storage.partition_lease import assign, lease_app, unpack
from lakelog.storage.topic_name import is_internal

log = logging.getLogger(__name__)


class LeaseKeeper:
    def __init__(self, membership: Membership, interval_s: float | None = None) -> None:
        self.membership = membership
        self.log: Log | None = None  # the Log whose leases it keeps, from start()
        self.interval_s = interval_s if interval_s is not None else membership.session_timeout_ms / 3000
        self._fronts: dict[int, FrontInfo] = {membership.me.node_id: membership.me}
        self._assignment: dict[tuple[str, int], int] = {}
        self._partitions: dict[str, dict[int, int | None]] = {}  # topic -> partition -> lease holder, as last read
        self._stop = threading.Event()
        self._pass_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.passes = 0  # completed passes (tests wait on it)

    def start(self, log_: Log) -> "LeaseKeeper":
        """A heartbeat and a pass, then keep ``log_``'s leases (built with this keeper) in the background."""
        self.run_once(log_)
        self.log = log_
        self._threads = [threading.Thread(target=self._beat, name="lakelog-front-heartbeat", daemon=True),
                         threading.Thread(target=self._run, name="lakelog-lease-keeper", daemon=True)]
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        self.membership.leave()

    def live(self) -> list[FrontInfo]:
        return sorted(self._fronts.values(), key=lambda f: f.node_id)

    def front(self, node_id: int) -> FrontInfo | None:
        return self._fronts.get(node_id)

    def assigned(self, topic: str, partition: int) -> int | None:
        """The front the last pass assigned the partition to (it holds the lease, or takes it at its next pass);
        None for a topic the last pass did not see."""
        return self._assignment.get((topic, partition))

    def locate(self, node_id: int) -> tuple[str, str | None]:
        """How an error names front ``node_id`` (with its addresses while it is live), and its HTTP URL."""
        f = self._fronts.get(node_id)
        if f is None:
            return f"node {node_id}", None
        kafka = f", Kafka {f.kafka_host}:{f.kafka_port}" if f.kafka_host else ""
        return f"node {node_id} ({f.http_url}{kafka})", f.http_url

    def _beat(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.membership.heartbeat()
            except Exception as e:  # storage trouble: the next beat may land within the session timeout
                log.warning("front heartbeat failed: %s", e)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.run_pass(self.log)
            except Exception as e:  # storage trouble: try again next pass; leases expire only with heartbeats
                log.warning("lease keeper pass failed: %s", e)
            self.open_writers(self.log)

    def open_writers(self, log_: Log) -> None:
        """Open the writer of every topic the last pass assigned this front a partition of (Kafka's broker
        loads the logs it leads as it becomes their leader): the first produce to it then pays no table read.
        Not at start-up (:meth:`start` returns after one pass) but from the next pass on, in the background."""
        me = log_.node_id
        for topic in dict.fromkeys(t for (t, _), node in self._assignment.items() if node == me):
            if self._stop.is_set():
                return
            try:
                log_.open_writer(topic)
            except Exception as e:  # deleted meanwhile, or storage trouble: the first append opens it
                log.warning("opening the writer of %s: %s", topic, e)

    def new_partitions(self, log_: Log, topic: str) -> None:
        """Take this front's share of the partitions its started Log just created: the assignment over the fronts
        and the other topics' holders seen by the last pass, with only this topic read again (a full pass reads
        every topic's log, which under S3 latency would make creating a topic slower the more topics there are).
        The topic exists whatever this meets; what fails is taken at the next pass."""
        # internal topics are not leased (as list_topics leaves them)
        if log_ is not self.log or self._stop.is_set() or is_internal(topic):
            return
        try:
            with self._pass_lock:
                self._look(log_, topic)
                self._deal(log_, [topic])
        except Exception as e:
            log.warning("taking the leases of the new partitions of %s: %s", topic, e)

    def run_once(self, log_: Log) -> None:
        """A heartbeat, then a lease pass."""
        self.membership.heartbeat()
        self.run_pass(log_)

    def run_pass(self, log_: Log) -> None:
        """Read the live fronts and every topic, and take the leases assigned to this front that ``log_`` (of
        this front's node id) does not hold, one commit per topic."""
        if log_.node_id is None or log_.node_id != self.membership.me.node_id:
            raise ValueError("the Log and the membership must name the same node id")
        with self._pass_lock:
            live = self.membership.live()
            self._fronts = {f.node_id: f for f in live} | {self.membership.me.node_id: self.membership.me}
            self._partitions.clear()
            for t in log_.list_topics():
                self._look(log_, t)
            self._deal(log_, list(self._partitions))
            self.passes += 1

    def _look(self, log_: Log, topic: str) -> None:
        """Note the topic's partitions and who holds their leases, from its snapshot."""
        snap = log_.snapshot(topic)
        self._partitions[topic] = {p: None if (held := unpack(snap.txn(lease_app(p)))) is None else held.node_id
                                   for p in range(snap.partition_count)}

    def _deal(self, log_: Log, topics: list[str]) -> None:
        """Assign every partition noted over the fronts known, and take those of ``topics`` assigned to this
        front that it does not hold."""
        me = log_.node_id
        holders = {(t, p): node for t, parts in self._partitions.items() for p, node in parts.items()
                   if node is not None}
        pairs = [(t, p) for t, parts in self._partitions.items() for p in parts]
        self._assignment = assign(pairs, list(self._fronts), holders)
        for topic in topics:
            parts = self._partitions[topic]
            partitions = [p for p, node in parts.items() if node != me and self._assignment[(topic, p)] == me]
            if not partitions:
                continue
            try:
                log_.take_leases(topic, partitions)
                log.warning("node %d took the leases of %s partitions %s (were %s)", me, topic, partitions,
                            [parts[p] for p in partitions])
            except KafkaError as e:  # deleted meanwhile, or lost to commits: the next pass tries again
                log.warning("taking the leases of %s partitions %s: %s", topic, partitions, e)
