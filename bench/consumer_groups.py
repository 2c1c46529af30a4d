"""Consumer groups: rebalance latency through a real front, and consumer read throughput from storage.

**Rebalance latency.**  A front (``lakelog serve``, its own process) and 10 members,
each a :class:`lakelog.client.Consumer` polling (``timeout_ms=100``) in its own thread
of this process, subscribed to one topic of 100 partitions (heartbeat 500 ms,
session 3 s).  After every poll a member publishes its generation and
``assignment()``; a monitor thread looks every 2 ms for the first moment at which
every live member has polled since the event, all report one generation, and
their assignments are disjoint, non-empty and cover all 100 partitions -- every
member running with its new assignment.  Events:

* **join** -- a 10th member subscribes to a group of 9 (timed from its
  ``subscribe`` call); the goal is <= 1 s plus one heartbeat interval;
* **leave** -- a member closes (LeaveGroup) and the other 9 take over;
* **death** -- a member stops polling and heartbeating without leaving (a crash
  as the coordinator sees it); the time includes the 3 s session timeout,
  reported also net of it.

Members are on Kafka's consumer protocol (KIP-848, as every HTTP member is): the front
assigns with its server-side ``uniform`` or ``range`` assignor and each member reconciles
on its own heartbeats (a moved partition is revoked by its owner, then handed over).
Both assignors are measured alike; each figure is the median of ``repeats`` events.

**Consumer throughput.**  A topic of 4 partitions x 500,000 records (100-byte
values) written in 100,000-record appends.  One consumer with a manual
assignment of all 4 partitions (``root=``: records come from storage; no
front is involved in reading) loops ``poll_arrow()`` until it has every record,
against the same segment files read with ``pyarrow.parquet.read_table`` one
after the other.  Both read the same columns, warm page cache; the readers
take turns, median of 5 (or ``repeats``) runs each.  ``poll()`` (Python record objects) is shown for reference.
"""

from __future__ import annotations

import statistics
import threading
import time

import pyarrow as pa

from bench import BenchContext, BenchResult, Goal, md_table

TITLE = "Consumer groups: rebalance latency and consumer throughput"
MEMBERS = 10
PARTITIONS = 100
HEARTBEAT_MS = 500
SESSION_MS = 3000
GOAL_JOIN_S = 1.0 + HEARTBEAT_MS / 1000
GOAL_RATIO = 0.7
THROUGHPUT_PARTITIONS = 4
VALUE_BYTES = 100


# -- rebalance latency ---------------------------------------------------------------------------
class Member(threading.Thread):
    """One consumer polling in its own thread; publishes (poll time, generation, assignment) after each poll."""

    def __init__(self, url: str, group: str, topic: str, strategy: str, board: "Board", name: str,
                 session_ms: int) -> None:
        super().__init__(daemon=True, name=name)
        from lakelog.client import Consumer

        self.consumer = Consumer(url, group_id=group, group_remote_assignor=strategy,
                                 session_timeout_ms=session_ms, heartbeat_interval_ms=HEARTBEAT_MS,
                                 max_poll_interval_ms=30_000, auto_offset_reset="latest", enable_auto_commit=False,
                                 client_id=name)
        self.topic, self.board = topic, board
        self.halt = threading.Event()
        self.crash = threading.Event()
        self.started_at = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.started_at = time.perf_counter()
            self.consumer.subscribe([self.topic])
            while not self.halt.is_set():
                self.consumer.poll(timeout_ms=100)
                md = self.consumer.group_metadata()
                self.board.publish(self.name, time.perf_counter(), md.generation_id,
                                   frozenset(self.consumer.assignment()))
        except BaseException as e:  # reported by the benchmark
            self.error = e
        finally:
            if self.crash.is_set():  # a crash as the coordinator sees it: no LeaveGroup, no more heartbeats
                self.consumer._coordinator.stop_heartbeat()
            else:
                self.consumer.close()
            self.board.forget(self.name)

    def stop(self, crash: bool = False) -> None:
        if crash:
            self.crash.set()
        self.halt.set()
        self.join(timeout=60)


class Board:
    """What every member last reported; :meth:`settled` waits for a correct, complete, common assignment."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self._lock = threading.Lock()
        self._state: dict[str, tuple[float, int, frozenset]] = {}

    def publish(self, name: str, at: float, generation: int, assignment: frozenset) -> None:
        with self._lock:
            self._state[name] = (at, generation, assignment)

    def forget(self, name: str) -> None:
        with self._lock:
            self._state.pop(name, None)

    def _ok(self, members: set[str], since: float) -> bool:
        with self._lock:
            state = {n: self._state.get(n) for n in members}
        if any(s is None or s[0] < since for s in state.values()):
            return False
        if len({s[1] for s in state.values()}) != 1:
            return False
        seen: set = set()
        for _, _, assignment in state.values():
            if not assignment or seen & assignment:
                return False
            seen |= assignment
        return len(seen) == self.partitions

    def settled(self, members: set[str], since: float, timeout: float = 60.0) -> float:
        """Seconds from ``since`` until the members run with a complete assignment."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            if self._ok(members, since):
                return time.perf_counter() - since
            time.sleep(0.002)
        raise RuntimeError(f"the group did not settle within {timeout:.0f} s")


def rebalance_series(url: str, strategy: str, members: int, partitions: int, repeats: int,
                     progress, session_ms: int = SESSION_MS) -> dict[str, list[float]]:
    """Join, leave and death latencies (seconds) of ``repeats`` events each."""
    topic = f"rebalance-{strategy}"
    from lakelog.client import Admin

    with Admin(url) as admin:
        admin.create_topic(topic, partitions)
    board = Board(partitions)
    group = f"bench-{strategy}"
    names = iter(f"{strategy}-m{i}" for i in range(10_000))
    live: dict[str, Member] = {}
    started: list[Member] = []  # every member, the ones that left or died included: all must end without error
    leaving: list[threading.Thread] = []

    def start(n: int = 1) -> list[Member]:
        new = [Member(url, group, topic, strategy, board, next(names), session_ms) for _ in range(n)]
        for m in new:
            live[m.name] = m
            started.append(m)
            m.start()
        return new

    out: dict[str, list[float]] = {"join": [], "leave": [], "death": [], "death_net": []}
    try:
        start(members - 1)
        board.settled(set(live), 0.0, timeout=120)
        for i in range(repeats):
            progress(f"{strategy}: event {i + 1}/{repeats}")
            (joiner,) = start()
            while not joiner.started_at:
                time.sleep(0.001)
            out["join"].append(board.settled(set(live), joiner.started_at))
            leaver = live.pop(next(iter(live)))
            t0 = time.perf_counter()
            leaving.append(threading.Thread(target=leaver.stop, daemon=True))
            leaving[-1].start()
            out["leave"].append(board.settled(set(live), t0))
            start()
            board.settled(set(live), time.perf_counter(), timeout=120)
            victim = live.pop(next(iter(live)))
            t0 = time.perf_counter()
            victim.stop(crash=True)
            took = board.settled(set(live), t0, timeout=120)
            out["death"].append(took)
            out["death_net"].append(took - session_ms / 1000)
    finally:
        for m in live.values():
            m.halt.set()
        for m in live.values():
            m.stop()
        for t in leaving:
            t.join(60)
    errors = [m.error for m in started if m.error is not None]
    if errors:
        raise RuntimeError(f"a member failed: {errors[0]!r}")
    return out


# -- consumer throughput --------------------------------------------------------------------------
def build_topic(root: str, records_per_partition: int, append_records: int) -> list[str]:
    """The throughput topic; returns its segment files' paths."""
    from lakelog import Log

    log = Log(root)
    log.create_topic("scan", THROUGHPUT_PARTITIONS)
    value = b"v" * VALUE_BYTES
    for p in range(THROUGHPUT_PARTITIONS):
        done = 0
        while done < records_per_partition:
            n = min(append_records, records_per_partition - done)
            keys = pa.array([b"key-%d" % (done + i) for i in range(n)], pa.binary())
            log.append("scan", pa.table({"key": keys, "value": pa.array([value] * n, pa.binary())}), partition=p)
            done += n
    snap = log.snapshot("scan")
    return [log.root.path_for("topics", "scan", s.path) for s in snap.index]


def scan_pyarrow(paths: list[str]) -> tuple[int, float]:
    import pyarrow.parquet as pq

    from lakelog.storage.record_schema import FILE_SCHEMA

    t0 = time.perf_counter()
    rows = sum(pq.read_table(p, columns=FILE_SCHEMA.names).num_rows for p in paths)
    return rows, time.perf_counter() - t0


def consume(root: str, total: int, *, arrow: bool, max_records: int | None = None) -> tuple[int, float]:
    from lakelog.client import Consumer, TopicPartition

    t0 = time.perf_counter()
    c = Consumer(root=root, auto_offset_reset="earliest", **({"max_poll_records": max_records} if max_records else {}))
    c.assign([TopicPartition("scan", p) for p in range(THROUGHPUT_PARTITIONS)])
    rows = 0
    while rows < total:
        batch = c.poll_arrow() if arrow else c.poll()
        rows += sum(t.num_rows for t in batch.values()) if arrow else sum(map(len, batch.values()))
    elapsed = time.perf_counter() - t0
    c.close()
    return rows, elapsed


# -- the benchmark ------------------------------------------------------------------------------
def run(ctx: BenchContext) -> BenchResult:
    from bench.http_produce import FrontProcess

    members = MEMBERS if not ctx.quick else 3
    partitions = PARTITIONS if not ctx.quick else 12
    repeats = ctx.repeats if ctx.quick else max(ctx.repeats, 5)
    session_ms = SESSION_MS if not ctx.quick else 1500
    latencies: dict[str, dict[str, list[float]]] = {}
    front = FrontProcess(str(ctx.workdir / "front-root"), ctx.workdir,
                         env={"LAKELOG_GROUP_MIN_SESSION_TIMEOUT_MS": "1000"})
    try:
        for strategy in ("uniform", "range"):
            latencies[strategy] = rebalance_series(front.url, strategy, members, partitions, repeats, ctx.progress,
                                                   session_ms)
    finally:
        front.close()

    per_partition = ctx.size(500_000, 20_000)
    total = per_partition * THROUGHPUT_PARTITIONS
    root = str(ctx.workdir / "scan-root")
    ctx.progress(f"writing {total:,} records")
    paths = build_topic(root, per_partition, max(1, min(100_000, per_partition // 5)))
    scan_pyarrow(paths)  # warm the page cache
    consume(root, total, arrow=True)  # warm up the consumer's code path too
    runs: dict[str, list[float]] = {"scan": [], "poll_arrow": [], "poll_arrow_10k": [], "poll": []}
    throughput_repeats = ctx.repeats if ctx.quick else max(ctx.repeats, 5)  # interleaved: shared machines are noisy
    for i in range(throughput_repeats):
        ctx.progress(f"throughput repeat {i + 1}/{throughput_repeats}")
        for name, fn in (("scan", lambda: scan_pyarrow(paths)),
                         ("poll_arrow", lambda: consume(root, total, arrow=True)),
                         ("poll_arrow_10k", lambda: consume(root, total, arrow=True, max_records=10_000)),
                         ("poll", lambda: consume(root, total, arrow=False))):
            rows, elapsed = fn()
            if rows != total:
                raise RuntimeError(f"{name} read {rows} of {total} records")
            runs[name].append(total / elapsed)
    return _report(latencies, {k: statistics.median(v) for k, v in runs.items()}, members, partitions, total,
                   len(paths), session_ms)


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:,.0f}" if values else "-"


def _report(lat: dict[str, dict[str, list[float]]], rps: dict[str, float], members: int, partitions: int,
            total: int, files: int, session_ms: int) -> BenchResult:
    rows = []
    for strategy, series in lat.items():
        rows.append([strategy, _ms(series["join"]), f"{max(series['join']) * 1000:,.0f}", _ms(series["leave"]),
                     _ms(series["death"]), _ms(series["death_net"]), len(series["join"])])
    table = md_table(["assignor", "join p50 ms", "join max ms", "leave p50 ms", "death p50 ms",
                      "death p50 ms beyond the session timeout", "events"], rows)
    scan = rps["scan"]
    tput = md_table(["reader", "records/s", "× pyarrow scan"], [
        ["pyarrow `pq.read_table`, segment files one by one", f"{scan:,.0f}", "1.00"],
        ["`Consumer.poll_arrow()` (max_poll_records 500)", f"{rps['poll_arrow']:,.0f}", f"{rps['poll_arrow'] / scan:.2f}"],
        ["`Consumer.poll_arrow(max_records=10,000)`", f"{rps['poll_arrow_10k']:,.0f}",
         f"{rps['poll_arrow_10k'] / scan:.2f}"],
        ["`Consumer.poll()` (Python records, 500)", f"{rps['poll']:,.0f}", f"{rps['poll'] / scan:.2f}"],
    ])
    goals = []
    for strategy, series in lat.items():
        join = statistics.median(series["join"])
        goals.append(Goal(f"{strategy}: rebalance after a join <= {GOAL_JOIN_S:.1f} s (1 s + one heartbeat)",
                          join <= GOAL_JOIN_S, f"median {join * 1000:,.0f} ms"))
    ratio = rps["poll_arrow"] / scan
    goals.append(Goal("Consumer.poll_arrow >= 0.7x the pyarrow scan", ratio >= GOAL_RATIO,
                      f"{ratio:.2f}x ({rps['poll_arrow']:,.0f} vs {scan:,.0f} records/s)"))
    summary = [f"{s}: join {_ms(v['join'])} ms, leave {_ms(v['leave'])} ms, death {_ms(v['death'])} ms"
               for s, v in lat.items()]
    summary.append(f"poll_arrow {rps['poll_arrow']:,.0f} records/s = {ratio:.2f}x pyarrow scan {scan:,.0f}")
    markdown = "\n".join([
        f"Rebalance latency, {members} members over {partitions} partitions, heartbeat {HEARTBEAT_MS} ms, "
        f"session {session_ms} ms: from the event until every member has polled with its new assignment "
        "(disjoint, complete, one generation).", "", table, "",
        f"Consumer throughput: {total:,} records of {VALUE_BYTES}-byte values in {files} segment files, "
        "4 partitions, read to the end.", "", tput])
    metrics = {f"{s}_{k}_p50_ms": statistics.median(v) * 1000 for s, series in lat.items()
               for k, v in series.items() if v}
    metrics.update({f"{k}_records_per_s": v for k, v in rps.items()})
    return BenchResult(markdown=markdown, summary=summary, metrics=metrics, goals=goals)
