"""Consumer groups end to end: member processes against a real front, killed, restarted, rebalanced.

Every child (``consumer_proc.py``) logs each processed batch as (member, generation,
partition, offsets) before committing it.  From those logs the tests check Kafka's
guarantees: no partition is ever owned by two members at once; a member
killed with SIGKILL loses its partitions to the others after its session timeout;
with at-least-once (process, then commit) every produced offset is consumed at
least once across the rebalances; a static member that closed (leaving for now, KIP-345)
and restarted within its session timeout gets its partitions back with no change of the
group's epoch; a joining member takes partitions from the others incrementally.
"""

from __future__ import annotations

import threading
import time

from front_process import new_topic
from group_support import (ConsumerProcess, ProducerThread, describe, high_watermarks, missing_offsets, owners,
                           overlapping_owners, consumed_ranges, stable_with, wait_until)
from lakelog.client import Consumer, TopicPartition

PARTITIONS = 6
SESSION_MS = 2000


def test_processes_share_partitions_survive_a_kill_and_lose_nothing(group_front, http, tmp_path):
    topic = new_topic(http, PARTITIONS)
    group = f"procs-{topic}"
    producer = ProducerThread(group_front.root, topic, PARTITIONS)
    producer.start()
    common = dict(bootstrap=group_front.url, group=group, topics=[topic], session_timeout_ms=SESSION_MS)
    procs = [ConsumerProcess(tmp_path, f"c{i}", **common) for i in range(3)]
    try:
        for p in procs:
            p.wait_ready()
        three = wait_until(lambda: stable_with(http, group, 3, PARTITIONS), what="3 members owning 6 partitions")
        victim = procs[1]
        victim_id = victim.events("ready")[0]["m"]
        victim_partitions = {tp for tp, m in owners(three).items() if m == victim_id}
        assert victim_partitions, f"the victim owns nothing in {three}"

        killed_at = time.monotonic()
        victim.kill()
        two = wait_until(lambda: stable_with(http, group, 2, PARTITIONS), what="the survivors to take over")
        took = time.monotonic() - killed_at
        assert victim_id not in {m["member_id"] for m in two["members"]}
        assert two["generation"] > three["generation"]
        assert set(owners(two)) == set(owners(three))  # every partition, the victim's too, has a live owner
        assert took >= SESSION_MS / 1000 * 0.5, f"reassigned after {took:.2f}s, before the session could expire"

        procs.append(ConsumerProcess(tmp_path, "c3", **common))  # a join rebalances again
        procs[-1].wait_ready()
        wait_until(lambda: stable_with(http, group, 3, PARTITIONS), what="the newcomer to get partitions")
        time.sleep(1.0)  # a little more traffic under the new assignment
    finally:
        producer.stop()
    try:
        hws = high_watermarks(http, topic)
        assert sum(hws.values()) == producer.appended > 0
        wait_until(lambda: not missing_offsets(consumed_ranges(procs), topic, hws),
                   what="the group to consume every produced offset")
        for p in procs:
            if p is not victim:
                assert p.stop() == 0, p.stderr_text()
        batches = consumed_ranges(procs)
        assert all(b["n"] == b["o"][1] - b["o"][0] + 1 for b in batches), "a batch skipped offsets"
        assert overlapping_owners(procs) == []  # no partition ever had two owners at once
        assert missing_offsets(batches, topic, hws) == {}
        generations = {b["g"] for b in batches}
        assert len(generations) >= 3, generations  # three members, two after the kill, three after the join
        # the victim's partitions were consumed by someone else after the kill
        after = {(b["t"], b["p"]) for b in batches if b["g"] > three["generation"] and b["m"] != victim_id}
        assert victim_partitions <= after
        committed = {(o["topic"], o["partition"]): o["offset"] for o in describe(http, group)["offsets"]}
        assert committed == {(topic, p): hw for p, hw in hws.items()}  # everything processed was committed
    finally:
        for p in procs:
            p.close()


def test_static_member_restarted_within_its_session_keeps_its_partitions(group_front, http, tmp_path):
    topic = new_topic(http, 4)
    group = f"static-{topic}"
    common = dict(bootstrap=group_front.url, group=group, topics=[topic], session_timeout_ms=30_000,
                  heartbeat_interval_ms=500)
    a = ConsumerProcess(tmp_path, "a1", instance_id="a", **common)
    b = ConsumerProcess(tmp_path, "b1", instance_id="b", **common)
    procs = [a, b]
    try:
        a.wait_ready()
        b.wait_ready()
        before = wait_until(lambda: stable_with(http, group, 2, 4), what="two static members")
        by_instance = {m["group_instance_id"]: {(x["topic"], x["partition"]) for x in m["assignment"]}
                       for m in before["members"]}
        b_events = len(b.entries())
        assert a.stop() == 0, a.stderr_text()  # a static member's close leaves only for now (epoch -2)
        a2 = ConsumerProcess(tmp_path, "a2", instance_id="a", **common)
        procs.append(a2)
        a2.wait_ready()
        after = wait_until(lambda: stable_with(http, group, 2, 4), what="the static member back")
        assert after["generation"] == before["generation"]  # the group's epoch did not move: no rebalance
        assert {m["group_instance_id"]: {(x["topic"], x["partition"]) for x in m["assignment"]}
                for m in after["members"]} == by_instance
        new_id = a2.events("ready")[0]["m"]
        assert new_id != a.events("ready")[0]["m"] and new_id in {m["member_id"] for m in after["members"]}
        assert [tuple(tp) for e in a2.events("assign") for tp in e["tps"]] == sorted(by_instance["a"])
        time.sleep(1.0)  # b's heartbeats (500 ms) would have seen a change by now
        assert not [e for e in b.entries()[b_events:] if "event" in e]  # b never noticed: no revoke, no assign
    finally:
        for p in procs:
            p.close()


class Polling(threading.Thread):
    """One in-process consumer polling in its own thread (a Consumer is not thread-safe: only this thread uses it)."""

    def __init__(self, consumer: Consumer, topics: list[str], name: str, events: list) -> None:
        super().__init__(daemon=True, name=name)
        self.consumer, self.topics, self.events = consumer, topics, events
        self.halt = threading.Event()
        self.records = 0
        self.positioned: set = set()  # the assigned partitions whose position this consumer knows
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.consumer.subscribe(self.topics, on_assign=lambda tps: self.events.append((self.name, "assign", tps)),
                                    on_revoke=lambda tps: self.events.append((self.name, "revoke", tps)))
            while not self.halt.is_set():
                for records in self.consumer.poll(timeout_ms=100).values():
                    self.records += len(records)
                self.positioned = self._positioned()
        except BaseException as e:
            self.error = e
        finally:
            self.consumer.close()

    def _positioned(self) -> set:
        known = set()
        for tp in self.consumer.assignment():
            try:
                self.consumer.position(tp)  # a new assignment's first position comes from the group's commits
            except Exception:
                continue
            known.add(tp)
        return known

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=60)
        assert self.error is None, repr(self.error)


def _consumer(front, group: str, **kwargs) -> Consumer:
    return Consumer(front.url, group_id=group, auto_offset_reset="earliest", session_timeout_ms=SESSION_MS,
                    heartbeat_interval_ms=200, max_poll_interval_ms=20_000, **kwargs)


def test_a_join_revokes_only_what_moves(group_front, http):
    """Incremental (KIP-848): the first member gives up exactly what the newcomer gets, and keeps the rest."""
    topic = new_topic(http, PARTITIONS)
    group = f"join-{topic}"
    events: list = []
    first = Polling(_consumer(group_front, group), [topic], "first", events)
    first.start()
    second = None
    try:
        wait_until(lambda: stable_with(http, group, 1, PARTITIONS), what="the first member")
        second = Polling(_consumer(group_front, group), [topic], "second", events)
        second.start()
        d = wait_until(lambda: stable_with(http, group, 2, PARTITIONS), what="two members")
        wait_until(lambda: any(e[0] == "second" and e[1] == "assign" for e in events), what="the second's assignment")
        by_member: dict = {}
        for tp, m in owners(d).items():
            by_member.setdefault(m, set()).add(TopicPartition(*tp))
        assert sorted(len(v) for v in by_member.values()) == [3, 3]
        time.sleep(0.5)  # an unexpected extra callback would land now
        seen = list(events)  # before the members close (closing revokes again)
    finally:
        first.stop()
        if second is not None:
            second.stop()
    all_tps = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    second_got = {tp for name, kind, tps in seen if name == "second" and kind == "assign" for tp in tps}
    assert [(kind, set(tps)) for name, kind, tps in seen if name == "first"] == \
        [("assign", all_tps), ("revoke", second_got)] and len(second_got) == 3
    assert [(kind, set(tps)) for name, kind, tps in seen if name == "second"] == [("assign", second_got)]


def test_front_restart_members_recover_and_offsets_survive(start_group_front):
    front = start_group_front()
    with front.client() as http:
        topic = new_topic(http, 4)
    group = f"restart-{topic}"
    from lakelog import Log

    log = Log(front.root)
    for p in range(4):
        log.append(topic, [{"value": f"before-{p}-{i}".encode()} for i in range(25)], partition=p)
    events: list = []
    members = [Polling(Consumer(front.url, group_id=group, auto_offset_reset="earliest", session_timeout_ms=10_000,
                                heartbeat_interval_ms=200, auto_commit_interval_ms=200, max_poll_interval_ms=30_000),
                       [topic], f"m{i}", events) for i in range(2)]
    for m in members:
        m.start()
    try:
        with front.client() as http:
            def all_committed(target: int):
                d = stable_with(http, group, 2, 4)
                return d if d and sum(o["offset"] for o in d["offsets"]) == target else None

            before = wait_until(lambda: all_committed(100), what="the first 100 records committed")

            # The coordinator is Stable once the leader's assignment is synced, which may be before a member has
            # applied its share: killed then, an eager member that revoked for the rebalance holds nothing to
            # read during the outage (as in Kafka). Nor can a member that holds partitions but has not yet read
            # their committed offsets from the coordinator start them. So wait until both members hold their
            # partitions and know their positions.
            def both_hold_their_partitions():
                held: dict = {}
                for name, kind, tps in list(events):
                    held[name] = held.get(name, set()) | set(tps) if kind == "assign" else \
                        held.get(name, set()) - set(tps)
                return (len(held) == 2 and sum(len(tps) for tps in held.values()) == 4 and all(held.values())
                        and all(m.positioned == held.get(m.name) for m in members))

            wait_until(both_hold_their_partitions, what="both members to hold their partitions")
        front.kill()  # SIGKILL: the coordinator's state must come back from __consumer_offsets
        committed_before = {(o["topic"], o["partition"]): o["offset"] for o in before["offsets"]}
        from lakelog.group.consumer_offsets import OffsetStore

        durable = OffsetStore(Log(front.root))  # another process's view of the root while the front is down
        assert {(e.topic, e.partition): e.offset for e in durable.fetch(group)} == committed_before
        assert durable.load_groups()[group]["group_epoch"] == before["generation"]
        for p in range(4):
            log.append(topic, [{"value": f"outage-{p}-{i}".encode()} for i in range(10)], partition=p)
        # records come from storage: the members keep consuming while the front is down
        try:
            wait_until(lambda: sum(m.records for m in members) >= 140, what="consumption during the outage")
        except AssertionError as e:
            raise AssertionError(f"{e}; records {[m.records for m in members]}, events {events}") from None
        front.start()
        with front.client() as http:
            restored = describe(http, group)
            assert restored["generation"] == before["generation"] and restored["state"] == "Stable"
            assert owners(restored) == owners(before)
            restored_offsets = {(o["topic"], o["partition"]): o["offset"] for o in restored["offsets"]}
            assert restored_offsets.keys() == committed_before.keys()  # (members may have committed again since)
            assert all(restored_offsets[k] >= committed_before[k] for k in committed_before)
            for p in range(4):
                log.append(topic, [{"value": f"after-{p}-{i}".encode()} for i in range(10)], partition=p)
            after = wait_until(lambda: all_committed(180), what="the members to resume committing")
        # the members kept their identity and partitions: heartbeats resumed, nothing was rebalanced
        assert owners(after) == owners(before) and after["generation"] == before["generation"]
        assert sum(m.records for m in members) == 180, events  # each record once: no rebalance re-read anything
    finally:
        for m in members:
            m.stop()
