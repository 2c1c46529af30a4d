"""Group rebalances beside Apache Kafka: the time for N consumers to join and settle, and to rebalance when one leaves.

Side by side in one run: ``lakelog serve --kafka-listener`` and Apache Kafka 4.1.1 (one KRaft node,
``reference/kafka.py``), both up for the whole run.  On each, a topic of ``PARTITIONS`` partitions and, per event,
a fresh group of ``MEMBERS`` confluent-kafka (librdkafka) consumers, each polling (50 ms) in its own thread of this
process.  After every poll a member publishes ``assignment()``; the group has *settled* at the first moment every live
member has polled since the event and the assignments are disjoint, cover every partition and are balanced (sizes
differ by at most one): every member consuming with its final assignment.

* **join** -- all members subscribe at once to a new group, timed from the first ``subscribe``;
* **leave** -- one member closes (LeaveGroup, or ConsumerGroupHeartbeat with epoch -1) and the others take its
  partitions over, timed from the ``close`` call.

Three ways to be a group member, each against both systems:

* ``classic range`` -- the classic protocol with librdkafka's default eager assignor (every member revokes
  everything, rejoins, and is given its share by the leader member);
* ``classic cooperative-sticky`` -- KIP-429: partitions that move are revoked first, then assigned in a second round;
* ``consumer`` -- KIP-848: the coordinator assigns (``uniform``), members reconcile on their heartbeats.

Both systems run with the same group configs: Kafka's defaults (``group.consumer.heartbeat.interval.ms`` 5000,
librdkafka's ``heartbeat.interval.ms`` 3000 and ``session.timeout.ms`` 45000) except
``group.initial.rebalance.delay.ms`` = 0 on both, so that a join measures the coordinators rather than Kafka's
fixed 3 s wait for a new group.  One untimed join and leave per system and way warms both up first (Kafka creates
its 50-partition ``__consumer_offsets`` on the first group).  The systems take turns within each repeat (interleaved), so the machine's load
falls on both alike; every figure is the median of ``repeats`` events, and each ratio is lakelog's time over
Kafka's (lower is faster).  The floor of a leave is a heartbeat: the survivors learn of the rebalance only on
their next heartbeat (up to 3 s classic, 5 s on KIP-848, on both systems).
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid

from bench import BenchContext, BenchResult, md_table
from bench.http_produce import FrontProcess, _free_port

TITLE = "Group rebalances beside Apache Kafka 4.1.1: join and leave with librdkafka"
MEMBERS = 8
PARTITIONS = 16
POLL_S = 0.05
SETTLE_TIMEOUT_S = 60.0
VARIANTS = {  # name -> the consumer's group configs
    "classic range": {"partition.assignment.strategy": "range"},
    "classic cooperative-sticky": {"partition.assignment.strategy": "cooperative-sticky"},
    "consumer": {"group.protocol": "consumer"},
}
SAME_GROUP_CONFIGS = {"group.initial.rebalance.delay.ms": "0"}


class Board:
    """What each member holds after its latest poll: name -> (poll time, frozenset of (topic, partition))."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.state: dict[str, tuple[float, frozenset]] = {}

    def publish(self, name: str, at: float, assignment: frozenset) -> None:
        with self.lock:
            self.state[name] = (at, assignment)

    def forget(self, name: str) -> None:
        with self.lock:
            self.state.pop(name, None)

    def settled(self, live: set[str], since: float, partitions: int) -> bool:
        with self.lock:
            seen = {n: self.state.get(n) for n in live}
        if any(s is None or s[0] < since for s in seen.values()):
            return False
        sizes = [len(s[1]) for s in seen.values()]
        union = frozenset().union(*(s[1] for s in seen.values()))
        return sum(sizes) == len(union) == partitions and max(sizes) - min(sizes) <= 1


class Member(threading.Thread):
    """One confluent-kafka consumer polling in its own thread (a librdkafka handle is used by one thread only)."""

    def __init__(self, bootstrap: str, group: str, topic: str, configs: dict, board: Board, name: str) -> None:
        super().__init__(daemon=True, name=name)
        self.conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                     "enable.auto.commit": False, "auto.offset.reset": "latest", **configs}
        self.topic, self.board = topic, board
        self.leave = threading.Event()
        self.subscribed_at = 0.0
        self.closed_at = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        from confluent_kafka import Consumer

        try:
            c = Consumer(self.conf)
            self.subscribed_at = time.perf_counter()
            c.subscribe([self.topic])
            while not self.leave.is_set():
                c.poll(POLL_S)
                self.board.publish(self.name, time.perf_counter(),
                                   frozenset((tp.topic, tp.partition) for tp in c.assignment()))
            self.board.forget(self.name)
            c.close()
            self.closed_at = time.perf_counter()
        except BaseException as e:  # reported by the driver
            self.error = e


def _wait_settled(board: Board, members: list[Member], since: float, partitions: int) -> float:
    live = {m.name for m in members}
    deadline = time.perf_counter() + SETTLE_TIMEOUT_S
    while time.perf_counter() < deadline:
        errors = [m.error for m in members if m.error is not None]
        if errors:
            raise RuntimeError(f"a member failed: {errors[0]!r}")
        if board.settled(live, since, partitions):
            return time.perf_counter() - since
        time.sleep(0.005)
    raise TimeoutError(f"the group did not settle within {SETTLE_TIMEOUT_S} s")


def join_and_leave(bootstrap: str, topic: str, configs: dict, members: int, partitions: int) -> tuple[float, float]:
    """One fresh group: (seconds for ``members`` to join and settle, seconds to settle after one leaves)."""
    group = f"bench-{uuid.uuid4().hex[:10]}"
    board = Board()
    crew = [Member(bootstrap, group, topic, configs, board, f"m{i}") for i in range(members)]
    t0 = time.perf_counter()
    try:
        for m in crew:
            m.start()
        join = _wait_settled(board, crew, t0, partitions)
        leaving, rest = crew[-1], crew[:-1]
        t1 = time.perf_counter()
        leaving.leave.set()
        leave = _wait_settled(board, rest, t1, partitions)
        return join, leave
    finally:
        for m in crew:
            m.leave.set()
        for m in crew:
            m.join(timeout=30)


def _create_topic(bootstrap: str, partitions: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"rebalance-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(60)
    deadline = time.monotonic() + 60
    while len(admin.list_topics(name, timeout=30).topics[name].partitions) != partitions:
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {name} has no metadata on {bootstrap}")
        time.sleep(0.2)
    return name


def run(ctx: BenchContext) -> BenchResult:
    from reference.kafka import KafkaBroker

    members = MEMBERS if not ctx.quick else 3
    partitions = PARTITIONS if not ctx.quick else 6
    variants = dict(VARIANTS) if not ctx.quick else {"consumer": VARIANTS["consumer"]}
    repeats = ctx.repeats
    kafka = KafkaBroker(ctx.workdir / "kafka", overrides=SAME_GROUP_CONFIGS)
    bootstrap = f"127.0.0.1:{_free_port()}"
    front = None
    try:
        ctx.progress("starting Apache Kafka and a lakelog front")
        kafka.start()
        front = FrontProcess(str(ctx.workdir / "root"), ctx.workdir, args=("--kafka-listener", bootstrap),
                             env={"LAKELOG_GROUP_INITIAL_REBALANCE_DELAY_MS": SAME_GROUP_CONFIGS[
                                 "group.initial.rebalance.delay.ms"]})
        systems = {"lakelog": bootstrap, "kafka": kafka.bootstrap}
        topics = {name: _create_topic(addr, partitions) for name, addr in systems.items()}
        for system, addr in systems.items():  # untimed: the first group creates __consumer_offsets (Kafka: 50
            ctx.progress(f"warm-up on {system}")  # partitions), and every process loads its code paths
            for configs in variants.values():
                join_and_leave(addr, topics[system], configs, members, partitions)
        times: dict[tuple[str, str, str], list[float]] = {}
        for i in range(repeats):
            for variant, configs in variants.items():
                for system, addr in (systems.items() if i % 2 == 0 else reversed(systems.items())):
                    ctx.progress(f"repeat {i + 1}/{repeats}: {variant} on {system}")
                    join, leave = join_and_leave(addr, topics[system], configs, members, partitions)
                    times.setdefault((variant, system, "join"), []).append(join)
                    times.setdefault((variant, system, "leave"), []).append(leave)
    finally:
        if front is not None:
            front.close()
        kafka.stop()
    return _report(times, variants, members, partitions, repeats)


def _report(times, variants, members: int, partitions: int, repeats: int) -> BenchResult:
    med = {k: statistics.median(v) for k, v in times.items()}
    rows, metrics, summary = [], {}, []
    for variant in variants:
        for event in ("join", "leave"):
            ours, theirs = med[(variant, "lakelog", event)], med[(variant, "kafka", event)]
            ratio = ours / theirs
            key = f"{variant.replace(' ', '_').replace('-', '_')}_{event}"
            metrics[f"{key}_lakelog_s"], metrics[f"{key}_kafka_s"], metrics[f"{key}_ratio"] = ours, theirs, ratio
            spread = lambda s: f"{min(times[(variant, s, event)]):.2f}-{max(times[(variant, s, event)]):.2f}"  # noqa: E731
            rows.append([variant, event, f"{ours:.2f}", spread("lakelog"), f"{theirs:.2f}", spread("kafka"),
                         f"{ratio:.2f}"])
            summary.append(f"{variant} {event}: lakelog {ours:.2f} s, Kafka {theirs:.2f} s ({ratio:.2f}x)")
    table = md_table(["protocol", "event", "lakelog p50 s", "lakelog range s", "Kafka 4.1.1 p50 s",
                      "Kafka range s", "lakelog / Kafka"], rows)
    markdown = (f"{members} confluent-kafka consumers, one topic of {partitions} partitions, a fresh group per "
                f"event, median of {repeats} interleaved runs per system; `group.initial.rebalance.delay.ms` 0 on "
                f"both, every other group config at Kafka's defaults. *join*: from the first `subscribe` until "
                f"every member consumes with a final, balanced, disjoint assignment of all partitions; *leave*: "
                f"from one member's `close()` until the others do. A ratio above 1 means lakelog is slower.\n\n"
                f"{table}\n\nRun: `python -m bench.run group_rebalance` (needs `python -m reference fetch kafka`). "
                f"How it is measured: `bench/group_rebalance.py`.")
    return BenchResult(markdown=markdown, summary=summary, metrics=metrics)
