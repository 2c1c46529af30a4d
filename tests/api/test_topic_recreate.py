"""Deleting and recreating a topic while another front writes it (Kafka gives the new topic a new id).

Front A appends to ``z``; front B deletes it, and creates it again. A's writer holds the old incarnation:
it must be fenced (``UNKNOWN_TOPIC_OR_PARTITION`` after the delete, ``UNKNOWN_TOPIC_ID`` after the
recreate), never acknowledge a record that no fetch shows, and never leave a gap in the Delta log. The
recreated topic starts at offset 0 and is a consistent Delta table for any reader.
"""

from __future__ import annotations

import threading
import time

import pytest
from deltalake import DeltaTable

from front_process import Front


def _versions(root: str, topic: str) -> list[int]:
    from pathlib import Path

    return sorted(int(p.stem) for p in (Path(root) / "topics" / topic / "_delta_log").glob("*.json"))


def _values(http, topic: str) -> list[str]:
    r = http.get(f"/v1/topics/{topic}/partitions/0/records", params={"offset": 0, "max_records": 100_000})
    assert r.status_code == 200, r.text
    return [rec["value"] for rec in r.json()["records"]]


@pytest.fixture
def two_fronts(tmp_path):
    root = str(tmp_path / "root")
    a, b = Front(root, tmp_path / "a").start(), Front(root, tmp_path / "b").start()
    yield root, a, b
    a.stop()
    b.stop()


def test_stale_writer_is_fenced_and_the_log_stays_contiguous(two_fronts):
    root, a, b = two_fronts
    with a.client() as ha, b.client() as hb:
        assert ha.post("/v1/topics", json={"name": "z", "partitions": 1}).status_code == 201
        for i in range(3):
            assert ha.post("/v1/topics/z/records", json={"records": [{"value": f"old{i}"}]}).status_code == 200
        old_id = hb.get("/v1/topics/z").json()["topic_id"]
        assert old_id

        assert hb.delete("/v1/topics/z").status_code == 204
        assert hb.get("/v1/topics/z").status_code == 404
        assert "z" not in ha.get("/v1/topics").json()["topics"]
        assert hb.post("/v1/topics", json={"name": "z", "partitions": 1}).status_code == 201

        # A's writer still holds the first incarnation: fenced with Kafka's error, nothing acknowledged.
        stale = ha.post("/v1/topics/z/records", json={"records": [{"value": "stale"}]})
        assert (stale.status_code, stale.json()["error_name"]) == (404, "UNKNOWN_TOPIC_ID"), stale.text
        retried = ha.post("/v1/topics/z/records", json={"records": [{"value": "new0"}]})
        assert retried.status_code == 200 and retried.json()["results"][0]["base_offset"] == 0, retried.text
        assert _values(hb, "z") == ["new0"] and _values(ha, "z") == ["new0"]
        assert hb.get("/v1/topics/z").json()["topic_id"] not in (None, old_id)

        # A write between the delete and the recreate is refused too.
        assert hb.delete("/v1/topics/z").status_code == 204
        gone = ha.post("/v1/topics/z/records", json={"records": [{"value": "after-delete"}]})
        assert (gone.status_code, gone.json()["error_name"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION")
        assert ha.post("/v1/topics", json={"name": "z", "partitions": 2}).status_code == 201
        assert len(hb.get("/v1/topics/z").json()["partitions"]) == 2

    versions = _versions(root, "z")
    assert versions == list(range(len(versions))), f"a gap in the Delta log: {versions}"
    dt = DeltaTable(f"{root}/topics/z")
    assert dt.version() == versions[-1] and dt.file_uris() == []


def test_writes_racing_a_recreate_are_fenced_or_visible(two_fronts):
    """A producer loops on front A while B deletes and recreates the topic three times: every answer is
    200 or a Kafka error, and every record acknowledged after the last recreate is in the new topic."""
    root, a, b = two_fronts
    with b.client() as hb:
        assert hb.post("/v1/topics", json={"name": "r", "partitions": 1}).status_code == 201
    stop, acked_after, statuses = threading.Event(), [], []
    recreated_at = [float("inf")]

    def produce():
        with a.client() as ha:
            i = 0
            while not stop.is_set():
                sent = time.monotonic()
                r = ha.post("/v1/topics/r/records", json={"records": [{"value": f"v{i}"}]})
                statuses.append((r.status_code, r.json().get("error_name") if r.status_code != 200 else None))
                if r.status_code == 200 and sent > recreated_at[0]:
                    acked_after.append(f"v{i}")
                i += 1

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        with b.client() as hb:
            for _ in range(3):
                time.sleep(0.3)
                assert hb.delete("/v1/topics/r").status_code == 204
                assert hb.post("/v1/topics", json={"name": "r", "partitions": 1}).status_code == 201
            recreated_at[0] = time.monotonic()
            time.sleep(0.5)
    finally:
        stop.set()
        producer.join()
    assert {s for s in statuses if s[0] != 200} <= {(404, "UNKNOWN_TOPIC_OR_PARTITION"), (404, "UNKNOWN_TOPIC_ID")}
    assert acked_after, "nothing was acknowledged after the last recreate"
    with b.client() as hb:
        assert set(acked_after) <= set(_values(hb, "r"))
    versions = _versions(root, "r")
    assert versions == list(range(len(versions)))
    assert DeltaTable(f"{root}/topics/r").version() == versions[-1]
