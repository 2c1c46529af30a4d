"""The handoff route (POST /internal/v1/topics/{topic}/commits, api/routers/handoffs.py) on bodies that break
Python's own decoders in lakelog/writer/commit_handoff.py: stats nested past the recursion limit, a number beyond
a float, a body that is not UTF-8. Each is 400 INVALID_REQUEST (42) from a real ``lakelog serve --node-id``, on
the event loop and on a thread (a body over INLINE_DECODE_BYTES); nothing is committed and the front keeps
serving. A 500 UNKNOWN_SERVER_ERROR would be wrong: the sending front reads it as "outcome unknown"."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from front_process import Front, new_topic, wait_for
from hostile_support import clean_error_body, storage_fingerprint
from lakelog.cluster.cluster_secret import SECRET_HEADER, cluster_secret
from lakelog.cluster.commit_forwarder import ROUTE
from lakelog.log import Log


@pytest.fixture(scope="module")
def leased_front(tmp_path_factory):
    """One front of a several-fronts root (``--node-id``): the handoff route is on, behind the cluster secret."""
    work = tmp_path_factory.mktemp("handoff-front")
    front = Front(str(work / "root"), work, args=("--node-id", "1")).start()
    yield front
    front.stop()


def _handoff(topic_id: str | None, stats: str) -> dict:
    """A handoff of one segment at offset 0 of partition 0, with ``stats`` as its add's stats."""
    return {"topic_id": topic_id, "commit_id": uuid.uuid4().hex, "known_version": 0,
            "adds": [{"path": f"partition=0/{0:020d}-{uuid.uuid4().hex}.parquet",
                      "partitionValues": {"partition": "0"}, "size": 10, "modificationTime": 1, "dataChange": True,
                      "stats": stats}],
            "txns": {"lakelog.leo.0": 1}, "expect": {"lakelog.leo.0": None}, "producer_rows": []}


def test_handoffs_that_break_a_decoder_are_invalid_request(leased_front):
    from api.routers.handoffs import INLINE_DECODE_BYTES

    front = leased_front
    with front.client() as http:
        topic = new_topic(http, partitions=2)
    log = Log(front.root)
    # the front takes the new topic's leases (a commit of their own) first: then nothing else moves the log
    wait_for(lambda: {"lakelog.lease.0", "lakelog.lease.1"} <= Log(front.root).snapshot(topic).txns.keys(), 60,
             "the front to take the topic's leases")
    before = Log(front.root).snapshot(topic)
    files = storage_fingerprint(front.root, None, topic)
    secret = cluster_secret(log.root)
    good_stats = json.dumps({"numRecords": 1, "minValues": {"offset": 0}, "maxValues": {"offset": 0}})
    good = json.dumps(_handoff(before.topic_id, good_stats)).encode()
    bodies = {
        "stats nested past the recursion limit": json.dumps(_handoff(before.topic_id, "[" * 15000)).encode(),
        "stats of 1e400 records": json.dumps(_handoff(before.topic_id, '{"numRecords": 1e400}')).encode(),
        "stats ending at offset 1e400": json.dumps(_handoff(
            before.topic_id, '{"numRecords": 1, "minValues": {"offset": 0}, "maxValues": {"offset": 1e400}}')).encode(),
        "a topic id that is not UTF-8": good.replace(before.topic_id.encode(), b"\xff\xfe" + b"x" * 8),
        "a key that is not UTF-8": good.replace(b'"commit_id"', b'"commit\xc3_id"'),
        # over INLINE_DECODE_BYTES: decoded on a thread, not the event loop
        "a large body that is not UTF-8": b" " * INLINE_DECODE_BYTES + good.replace(b'"txns"', b'"tx\xffns"'),
        "large stats of 1e400 records": b" " * INLINE_DECODE_BYTES
        + json.dumps(_handoff(before.topic_id, '{"numRecords": 1e400}')).encode(),
    }
    for what, body in bodies.items():
        r = httpx.post(front.url + ROUTE.format(topic=topic), content=body,
                       headers={"content-type": "application/json", SECRET_HEADER: secret}, timeout=60)
        assert r.status_code == 400, (what, r.status_code, r.text)
        error = r.json()
        assert (error["error_code"], error["error_name"]) == (42, "INVALID_REQUEST"), (what, error)
        clean_error_body(error)
        assert secret not in r.text
        assert front.proc.poll() is None and httpx.get(front.url + "/v1/health", timeout=30).status_code == 200
    after = Log(front.root).snapshot(topic)
    assert after.version == before.version and after.high_watermark(0) == before.high_watermark(0) == 0
    assert storage_fingerprint(front.root, None, topic) == files, "a refused handoff changed the topic's files"
    # the refused requests hold up nothing: the topic's writer takes the next produce
    with front.client() as http:
        r = http.post(f"/v1/topics/{topic}/records", json={"records": [{"value": "after", "partition": 0}]})
        assert r.status_code == 200, r.text
    assert Log(front.root).read(topic, 0).column("value").to_pylist() == [b"after"]
