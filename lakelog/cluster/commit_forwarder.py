"""Hands this front's group commits to each topic's committer front over HTTP (writer/commit_handoff.py).

A topic's committer front is the live front holding the lease of its partition 0, or while no live front holds
it, the front the lease keeper assigned it to; when that is this front, or none is known, the committer makes its
commits itself.  Answers: 200 with a :class:`HandoffAnswer`; 4xx when the
committer front refused it and will never commit it (:class:`HandoffRejected`, also when it could not be reached
at all); a 5xx, or no answer, leaves the outcome unknown (the error is raised as it is).

Thread-safe: an httpx client and a thread pool, shared by all topics.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from urllib.parse import quote

import httpx

from lakelog.cluster.cluster_secret import SECRET_HEADER
from lakelog.cluster.lease_keeper import LeaseKeeper
from lakelog.errors import KafkaStorageError, RequestTimedOut, error_from_body
from lakelog.storage.partition_lease import lease_app, unpack
from lakelog.storage.topic_snapshot import TopicSnapshot
from lakelog.writer.commit_handoff import HandoffAnswer, HandoffRejected, decode_answer

HANDOFF_TIMEOUT_S = 10.0  # a committer front answers within one commit; past this the outcome is unknown
HANDOFF_THREADS = 16  # handoffs in flight at once, over all topics (up to MAX_HANDOFFS_IN_FLIGHT per topic)
ROUTE = "/internal/v1/topics/{topic}/commits"


class CommitForwarder:
    def __init__(self, keeper: LeaseKeeper, secret: str, timeout_s: float = HANDOFF_TIMEOUT_S) -> None:
        self.keeper, self.secret = keeper, secret
        self.me = keeper.membership.me.node_id
        self._client = httpx.Client(timeout=timeout_s, headers={SECRET_HEADER: secret},
                                    limits=httpx.Limits(max_connections=HANDOFF_THREADS))
        self._pool = ThreadPoolExecutor(max_workers=HANDOFF_THREADS, thread_name_prefix="lakelog-handoff")

    def committer_front(self, snap: TopicSnapshot) -> str | None:
        """The HTTP URL of the front that makes the topic's commits, or None when this front makes them (or no
        front is known to).

        While partition 0's holder is not live (it died, and the lease is not yet taken) the committer front is
        the one the lease keeper assigned partition 0 to, which takes the lease at its next pass: with every
        front committing directly meanwhile, one front's back-to-back commits can starve another's for seconds,
        holding up that front's lease pass behind its topic's lock (docs/architecture.md, "Several fronts")."""
        lease = unpack(snap.txn(lease_app(0)))
        front = self.keeper.front(lease.node_id) if lease is not None else None
        if front is None and (assigned := self.keeper.assigned(snap.topic, 0)) is not None:
            front = self.keeper.front(assigned)
        return front.http_url if front is not None and front.node_id != self.me else None

    def hand_off(self, url: str, topic: str, data: bytes) -> "Future[HandoffAnswer]":
        return self._pool.submit(self._post, url, topic, data)

    def _post(self, url: str, topic: str, data: bytes) -> HandoffAnswer:
        try:
            r = self._client.post(url + ROUTE.format(topic=quote(topic, safe="")), content=data,
                                  headers={"content-type": "application/json"})
        except httpx.ConnectError as e:  # no connection: nothing was sent
            raise HandoffRejected(KafkaStorageError(f"the committer front is unreachable: {type(e).__name__}"))
        except httpx.TimeoutException as e:
            raise RequestTimedOut(f"no answer from the committer front: {type(e).__name__}") from None
        except httpx.TransportError as e:
            raise KafkaStorageError(f"the handoff to the committer front failed: {type(e).__name__}") from None
        if r.status_code == 200:
            return decode_answer(r.content)
        error = error_from_body(r.content, f"HTTP {r.status_code} from the committer front")
        if 400 <= r.status_code < 500:
            raise HandoffRejected(error)
        raise error

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._client.close()

