"""Consumer-group offsets over HTTP: commit, fetch with lag, list, delete; durable across a front restart and
visible to other processes (the library's OffsetStore on the same root)."""

from __future__ import annotations

from front_process import new_topic
from lakelog import Log
from lakelog.group.consumer_offsets import OFFSETS_TOPIC, OffsetStore


def commit(http, group: str, *offsets: tuple) -> dict:
    r = http.post(f"/v1/groups/{group}/offsets",
                  json={"offsets": [dict(zip(("topic", "partition", "offset", "metadata"), o)) for o in offsets]})
    assert r.status_code == 200, r.text
    return r.json()


def fetched(http, group: str, **params) -> dict[tuple[str, int], dict]:
    r = http.get(f"/v1/groups/{group}/offsets", params=params)
    assert r.status_code == 200, r.text
    return {(o["topic"], o["partition"]): o for o in r.json()["offsets"]}


def test_commit_fetch_lag_and_restart(start_front, front_root):
    front = start_front()
    with front.client() as http:
        a, b = new_topic(http, 2), new_topic(http, 1)
        r = http.post(f"/v1/topics/{a}/records", json={"records": [{"value": str(i), "partition": 0}
                                                                   for i in range(10)]})
        assert r.status_code == 200
        out = commit(http, "billing", (a, 0, 4, "note"), (a, 1, 0, None), (b, 0, 0, None))
        assert [o["offset"] for o in out["offsets"]] == [4, 0, 0] and out["offsets"][0]["commit_timestamp"] > 0
        commit(http, "billing", (a, 0, 7, "later"))  # the latest commit of a partition wins
        commit(http, "audit", (b, 0, 0, None))
        got = fetched(http, "billing")
        assert (got[(a, 0)]["offset"], got[(a, 0)]["metadata"]) == (7, "later")
        assert (got[(a, 0)]["high_watermark"], got[(a, 0)]["lag"]) == (10, 3)
        assert (got[(a, 1)]["lag"], got[(b, 0)]["lag"]) == (0, 0)
        assert set(fetched(http, "billing", topic=b)) == {(b, 0)}
        assert fetched(http, "nobody") == {}  # like Kafka: an unknown group has no offsets
        assert {"billing", "audit"} <= set(http.get("/v1/groups").json()["groups"])
        before = fetched(http, "billing")

    front.restart(crash=True)  # nothing is lost: commits live in __consumer_offsets
    with front.client() as http:
        assert fetched(http, "billing") == before
        # another process (this one) reads the same commits through the library
        _, _, options = front_root
        store = OffsetStore(Log(front.root, storage_options=options or None))
        mine = {(e.topic, e.partition): (e.offset, e.metadata) for e in store.fetch("billing")}
        assert mine == {(a, 0): (7, "later"), (a, 1): (0, ""), (b, 0): (0, "")}
        store.commit("billing", [(b, 0, 1, "from the library")])
        assert fetched(http, "billing")[(b, 0)]["metadata"] == "from the library"
        r = http.delete("/v1/groups/audit")
        assert r.status_code == 200 and r.json()["deleted_offsets"] == 1
        assert "audit" not in http.get("/v1/groups").json()["groups"]
        assert OFFSETS_TOPIC in http.get("/v1/topics", params={"internal": "true"}).json()["topics"]
        # the internal topic is compacted and cannot be written over HTTP
        d = http.get(f"/v1/topics/{OFFSETS_TOPIC}").json()
        assert d["configs"]["cleanup.policy"] == "compact"
        assert http.delete(f"/v1/topics/{OFFSETS_TOPIC}").status_code == 400


def test_offset_store_library(log):
    """The library the front uses: validation, last-writer-wins by log offset, tombstones, thread safety,
    and two stores on one root (two processes) seeing each other's commits."""
    import threading

    import pytest

    from lakelog.errors import InvalidGroupId, InvalidRequest, InvalidTopic, OffsetMetadataTooLarge

    log.create_topic("orders", 2)
    a, b = OffsetStore(log), OffsetStore(Log(log.root))
    refused = [("", [("orders", 0, 1, None)], InvalidGroupId),
               ("g", [("bad/topic", 0, 1, None)], InvalidTopic),
               ("g", [("orders", -1, 1, None)], InvalidRequest),
               ("g", [], InvalidRequest),
               ("g", [("orders", 0, 1, "m" * 5000)], OffsetMetadataTooLarge)]
    for group, offsets, err in refused:
        with pytest.raises(err):
            a.commit(group, offsets)
    assert a.list_groups() == []  # nothing was written by the refused commits

    def commit_many(store, group, start):
        for i in range(start, start + 5):
            store.commit(group, [("orders", 0, i, f"m{i}"), ("orders", 1, 100 + i, None)])

    threads = [threading.Thread(target=commit_many, args=(s, f"g{n}", n * 10)) for n, s in enumerate((a, b, a))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for n in range(3):  # the last commit of each group wins, seen from both stores
        for store in (a, b):
            got = {(e.partition, e.offset, e.metadata) for e in store.fetch(f"g{n}")}
            assert got == {(0, n * 10 + 4, f"m{n * 10 + 4}"), (1, 100 + n * 10 + 4, "")}
    tombstone = b.delete_group("g1")  # the log offset of the group's state tombstone, after its two offsets'
    assert isinstance(tombstone, int) and tombstone >= 2
    assert a.list_groups() == ["g0", "g2"] and a.fetch("g1") == []
    assert [e.topic for e in OffsetStore(Log(log.root)).fetch("g0", "orders")] == ["orders", "orders"]
