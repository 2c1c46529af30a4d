"""Idempotent produce end to end over HTTP: retries, gaps, fencing, and a restart between a batch and its retry."""

from __future__ import annotations

import io

import pyarrow as pa

from front_process import new_topic


def init(http, transactional_id: str | None = None) -> tuple[int, int]:
    r = http.post("/v1/producers", json={"transactional_id": transactional_id} if transactional_id else {})
    assert r.status_code == 200, r.text
    return r.json()["producer_id"], r.json()["producer_epoch"]


def batch(pid: int, epoch: int, partition: int, seq: int, values: list[str]) -> dict:
    return {"producer_id": pid, "producer_epoch": epoch,
            "batches": [{"partition": partition, "base_sequence": seq, "records": [{"value": v} for v in values]}]}


def values_of(http, topic: str, partition: int) -> list[str]:
    r = http.get(f"/v1/topics/{topic}/partitions/{partition}/records", params={"offset": 0, "max_records": 10000})
    assert r.status_code == 200, r.text
    recs = r.json()["records"]
    assert [x["offset"] for x in recs] == list(range(len(recs)))  # dense
    return [x["value"] for x in recs]


def test_retried_batch_returns_original_offsets_as_duplicate(http, topic):
    pid, epoch = init(http)
    first = http.post(f"/v1/topics/{topic}/records", json=batch(pid, epoch, 1, 0, ["a", "b", "c"])).json()
    second = http.post(f"/v1/topics/{topic}/records", json=batch(pid, epoch, 1, 3, ["d"])).json()
    retry = http.post(f"/v1/topics/{topic}/records", json=batch(pid, epoch, 1, 0, ["a", "b", "c"]))
    assert retry.status_code == 200, retry.text
    r0, r1, rr = first["results"][0], second["results"][0], retry.json()["results"][0]
    assert (r0["base_offset"], r0["duplicate"], r1["base_offset"]) == (0, False, 3)
    assert (rr["base_offset"], rr["record_count"], rr["duplicate"], rr["error_code"]) == (0, 3, True, 0)
    assert values_of(http, topic, 1) == ["a", "b", "c", "d"]


def test_gap_and_reordering_are_refused_with_45(http, topic):
    pid, epoch = init(http)
    assert http.post(f"/v1/topics/{topic}/records", json=batch(pid, epoch, 0, 0, ["a", "b"])).status_code == 200
    gap = http.post(f"/v1/topics/{topic}/records", json=batch(pid, epoch, 0, 3, ["x"]))
    assert (gap.status_code, gap.json()["error_code"]) == (409, 45)
    # a reordered pair inside one request: sequence 4 before 2
    body = {"producer_id": pid, "producer_epoch": epoch, "batches": [
        {"partition": 0, "base_sequence": 4, "records": [{"value": "e"}]},
        {"partition": 0, "base_sequence": 2, "records": [{"value": "c"}, {"value": "d"}]}]}
    r = http.post(f"/v1/topics/{topic}/records", json=body)
    assert r.status_code == 200, r.text
    assert [(x["error_code"], x["base_offset"]) for x in r.json()["results"]] == [(45, -1), (0, 2)]
    assert values_of(http, topic, 0) == ["a", "b", "c", "d"]


def test_fenced_producers_get_90_and_47(http, topic):
    tid = f"tx-{topic}"
    old_pid, old_epoch = init(http, tid)
    assert http.post(f"/v1/topics/{topic}/records", json=batch(old_pid, old_epoch, 0, 0, ["old"])).status_code == 200
    new_pid, new_epoch = init(http, tid)
    assert (new_pid, new_epoch) == (old_pid, old_epoch + 1)
    fenced = http.post(f"/v1/topics/{topic}/records", json=batch(old_pid, old_epoch, 0, 1, ["zombie"]))
    assert (fenced.status_code, fenced.json()["error_code"], fenced.json()["error_name"]) == \
        (409, 90, "PRODUCER_FENCED")
    ok = http.post(f"/v1/topics/{topic}/records", json=batch(new_pid, new_epoch, 0, 0, ["new"]))
    assert ok.status_code == 200 and ok.json()["results"][0]["base_offset"] == 1
    # an idempotent (non-transactional) producer id seen at a newer epoch: the older epoch gets 47
    pid, _ = init(http)
    assert http.post(f"/v1/topics/{topic}/records", json=batch(pid, 3, 1, 0, ["e3"])).status_code == 200
    stale = http.post(f"/v1/topics/{topic}/records", json=batch(pid, 2, 1, 1, ["e2"]))
    assert (stale.status_code, stale.json()["error_code"]) == (409, 47)
    assert values_of(http, topic, 0) == ["old", "new"] and values_of(http, topic, 1) == ["e3"]


def test_arrow_idempotent_form_deduplicates(http, topic):
    pid, epoch = init(http)
    sink = io.BytesIO()
    table = pa.table({"key": pa.array([b"k1", b"k2"]), "value": pa.array([b"v1", b"v2"])})
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    params = {"producer_id": pid, "producer_epoch": epoch, "base_sequence": 0, "partition": 1}
    headers = {"content-type": "application/vnd.apache.arrow.stream"}
    first = http.post(f"/v1/topics/{topic}/records", params=params, content=sink.getvalue(), headers=headers)
    again = http.post(f"/v1/topics/{topic}/records", params=params, content=sink.getvalue(), headers=headers)
    assert first.status_code == again.status_code == 200, (first.text, again.text)
    assert first.json()["results"][0]["duplicate"] is False
    assert again.json()["results"][0] | {"duplicate": False} == first.json()["results"][0]
    assert again.json()["results"][0]["duplicate"] is True
    assert values_of(http, topic, 1) == ["v1", "v2"]


def test_restart_between_batch_and_retry_still_deduplicates(start_front):
    """Producer state is rebuilt from the log: a retry sent to a restarted (or crashed) front is a duplicate."""
    front = start_front()
    with front.client() as http:
        topic = new_topic(http, 2)
        pid, epoch = init(http)
        first = http.post(f"/v1/topics/{topic}/records", json=batch(pid, epoch, 0, 0, ["a", "b"]))
        assert first.status_code == 200, first.text
    front.restart(crash=True)  # kill -9: nothing of the front's memory survives
    with front.client() as http:
        retry = http.post(f"/v1/topics/{topic}/records", json=batch(pid, epoch, 0, 0, ["a", "b"]))
        assert retry.status_code == 200, retry.text
        assert retry.json()["results"][0]["duplicate"] is True
        assert retry.json()["results"][0]["base_offset"] == first.json()["results"][0]["base_offset"] == 0
        nxt = http.post(f"/v1/topics/{topic}/records", json=batch(pid, epoch, 0, 2, ["c"]))
        assert nxt.json()["results"][0]["base_offset"] == 2
        assert values_of(http, topic, 0) == ["a", "b", "c"]


def test_a_fresh_front_claims_its_producer_ids_at_start_up(start_front, front_root):
    """The first InitProducerId of a front is answered from the block it claimed as it started (KIP-730), not
    after a commit of its own (a round trip to the object store)."""
    import time

    from deltalake import DeltaTable

    _, _, options = front_root
    front = start_front()
    uri = f"{front.root}/_lakelog/producers"
    deadline = time.monotonic() + 30
    while True:
        try:
            claimed = DeltaTable(uri, storage_options=options or None).version()
            break
        except Exception:  # not created yet: the claim is under way
            assert time.monotonic() < deadline, "the front claimed no producer ids at start-up"
            time.sleep(0.1)
    with front.client() as http:
        ids = [init(http)[0] for _ in range(3)]
    assert ids == [ids[0], ids[0] + 1, ids[0] + 2]
    assert DeltaTable(uri, storage_options=options or None).version() == claimed
