"""The hand-off to the committer front, from both sides.

When several fronts share a root, one of them -- the topic's *committer front*, the holder of partition 0's lease --
makes a topic's commits: the others upload their segments and hand it the rest (the messages and their checks:
:mod:`lakelog.writer.commit_handoff`), so the fronts do not race for every version of the one table. Kafka's
forwarding of requests to the controller (KIP-590) has the same shape.

:class:`CommitterFront` is a writer's view of it: where a commit goes (:meth:`~CommitterFront.address`), handing
one over and catching up from the answer (:meth:`~CommitterFront.commit_handed`, :meth:`~CommitterFront.catch_up`);
and, on the committer front itself, whether another front's handoff still fits the log
(:meth:`~CommitterFront.problem`). The transport is a :class:`Forwarder` (lakelog/cluster/commit_forwarder.py).

Not thread-safe: callers hold the topic's lock.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Protocol

from lakelog.errors import KafkaError, NotLeaderOrFollower, UnknownTopicId, UnknownTopicOrPartition
from lakelog.storage.delta_log import LogTailGone, parse_commit, read_commit
from lakelog.storage.topic_snapshot import COMMIT_ID_KEY, TopicSnapshot
from lakelog.writer.append_plan import AppendPlanner
from lakelog.writer.commit_handoff import (AddAction, Handoff, HandoffAnswer, HandoffRejected, carries, encode)
from lakelog.writer.table_commit import Outcome, TopicTable, add_action

log = logging.getLogger(__name__)


class Forwarder(Protocol):
    """Carries handoffs to committer fronts (lakelog/cluster/commit_forwarder.py)."""

    def committer_front(self, snap: TopicSnapshot) -> str | None:
        """The URL of the front that makes the topic's commits; None when this front makes them."""

    def hand_off(self, url: str, topic: str, data: bytes) -> Future[HandoffAnswer]:
        """Send an encoded :class:`Handoff`; the future resolves with the answer, or raises
        :class:`HandoffRejected` (it will never land) or another error (its outcome is unknown)."""


class CommitterFront:
    """A writer's side of the hand-off; ``forwarder`` None: a lone writer, which makes all its commits itself."""

    def __init__(self, table: TopicTable, planner: AppendPlanner, forwarder: Forwarder | None) -> None:
        self.table, self.planner, self.forwarder = table, planner, forwarder

    def address(self, txns: dict[str, int]) -> str | None:
        """Where a commit setting ``txns`` is handed over: the topic's committer front, if that is another live
        front and the commit can be handed over; else None (commit directly)."""
        if self.forwarder is None or self.table.root.is_local or not carries(txns):
            return None
        return self.forwarder.committer_front(self.table.snapshot)

    def is_this_front(self) -> bool:
        """Whether this front makes the topic's commits for the others."""
        return self.forwarder is not None and self.forwarder.committer_front(self.table.snapshot) is None

    def hand_off(self, url: str, commit_id: str, added: list[dict], txns: dict[str, int], producer_rows,
                 expect: dict[str, int | None] | None = None) -> Future[HandoffAnswer]:
        """Send a commit planned on ``expect`` (by default our snapshot) to the committer front; the future
        resolves with its answer."""
        snap = self.table.snapshot
        handoff = Handoff(self.planner.topic_id, commit_id, snap.version, [AddAction(**a) for a in added], txns,
                          expect if expect is not None else {app: snap.txn(app) for app in txns}, producer_rows)
        return self.forwarder.hand_off(url, self.table.topic, encode(handoff))

    def commit_handed(self, url: str, adds, txns: dict[str, int], producer_rows, meta: dict) -> Outcome:
        """Hand a plain commit to the committer front and wait for its answer; committed directly if it is
        refused (nothing of it will land there). Direct PUTs would race the committer front's back-to-back
        commits for every version and mostly lose, a re-planned append holding the topic's lock (and this
        front's lease pass) for seconds (docs/architecture.md, "Several fronts")."""
        commit_id = meta[COMMIT_ID_KEY]
        try:
            answer = self.hand_off(url, commit_id, [add_action(a) for a in adds], txns, producer_rows).result()
        except HandoffRejected as e:
            log.debug("handoff of a commit to %s rejected: %s", self.table.topic, e)
            return self.table.commit_direct(adds, txns, meta)
        except Exception as e:
            return self.table.unknown_outcome(e, commit_id)
        self.catch_up(answer, commit_id)
        self.table.checkpointer.start(self.table.snapshot)
        return True

    def catch_up(self, answer: HandoffAnswer, commit_id: str) -> None:
        """Apply the commits up to the one our handoff landed in: those the answer holds, the others read."""
        table = self.table
        held = dict(answer.commits)
        path = table.root.path_for("topics", table.topic)
        try:
            for v in range(table.snapshot.version + 1, answer.version + 1):
                commit = parse_commit(v, held[v]) if v in held else read_commit(table.root, path, v)
                if commit is None:
                    raise LogTailGone(f"commit {v} of {table.topic} is not in the store")
                table.snapshot.apply(commit)
            if table.snapshot.recent_commit_ids.get(commit_id) != answer.version:
                raise ValueError(f"commit {answer.version} of {table.topic} does not carry ours")
        except (LogTailGone, OSError, ValueError, KeyError) as e:  # committed all the same: look again next time
            log.warning("catching up with handed commit %d of %s failed: %s", answer.version, table.topic, e)
            table.stale = True

    def problem(self, h: Handoff, txns: dict[str, int]) -> KafkaError | None:
        """Why a handoff cannot go in our next commit (planned on a log other than ours plus ``txns``), or None."""
        snap = self.table.snapshot
        if (gone := self.planner.fenced(snap)) is not None:
            return gone
        if h.topic_id != snap.topic_id:
            return UnknownTopicId(f"topic {self.table.topic} has topic id {snap.topic_id}, not {h.topic_id}")
        for app, planned in h.expect.items():
            if (now := txns.get(app, snap.txn(app))) != planned:
                return NotLeaderOrFollower(f"{app} of {self.table.topic} is {now}; the commit handed over was "
                                           f"planned on {planned}")
        if any(int(app.rsplit(".", 1)[1]) >= snap.partition_count for app in h.txns):
            return UnknownTopicOrPartition(f"a partition of {self.table.topic} handed over does not exist")
        return None
