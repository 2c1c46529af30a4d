"""Admin operations win under sustained produce load, on the producing front and on a second front.

Three producer threads keep a topic's commit rate at its maximum while configs are altered, partitions
added and records deleted; each admin request must answer 200 in bounded time, every acknowledged record
must be readable afterwards, and no front may report a listing gap (a listing taken while commit files are
created can miss one: it is retried, not reported).
"""

from __future__ import annotations

import threading
import time

import pytest

from front_process import Front, new_topic

ADMIN_BOUND_S = 15.0


def _produce_until(front: Front, topic: str, stop: threading.Event, acked: list, errors: list) -> None:
    with front.client() as http:
        i = 0
        while not stop.is_set():
            r = http.post(f"/v1/topics/{topic}/records", json={"records": [{"value": f"v{i}-{j}", "partition": j % 2}
                                                                     for j in range(20)]})
            if r.status_code == 200:
                acked.extend(res["record_count"] for res in r.json()["results"] if res["error_code"] == 0)
            elif r.status_code not in (429, 503):
                errors.append(r.text)
            i += 1


@pytest.mark.slow
@pytest.mark.parametrize("admin_on", ["same-front", "other-front"])
def test_admin_operations_under_produce_load(tmp_path, admin_on):
    root = str(tmp_path / "root")
    producing = Front(root, tmp_path / "a").start()
    admin_front = producing if admin_on == "same-front" else Front(root, tmp_path / "b").start()
    try:
        with producing.client() as http:
            topic = new_topic(http, partitions=2)
        stop, acked, errors = threading.Event(), [], []
        producers = [threading.Thread(target=_produce_until, args=(producing, topic, stop, acked, errors))
                     for _ in range(3)]
        for t in producers:
            t.start()
        time.sleep(1.0)  # the commit rate is at its maximum
        timings = []
        try:
            with admin_front.client() as admin:
                for step in range(3):
                    for request in (
                        lambda: admin.patch(f"/v1/topics/{topic}", json={"configs": {"retention.ms": str(86_400_000 + step)}}),
                        lambda: admin.post(f"/v1/topics/{topic}/partitions/0/delete-records",
                                           json={"before_offset": -1}),
                        lambda: admin.patch(f"/v1/topics/{topic}", json={"partitions": 3 + step}),
                    ):
                        t0 = time.monotonic()
                        r = request()
                        timings.append(time.monotonic() - t0)
                        assert r.status_code == 200, r.text
                        assert timings[-1] < ADMIN_BOUND_S
        finally:
            stop.set()
            for t in producers:
                t.join()
        assert not errors, errors[:3]
        with admin_front.client() as admin:
            described = admin.get(f"/v1/topics/{topic}").json()
        assert described["configs"]["retention.ms"] == str(86_400_000 + 2)
        assert len(described["partitions"]) == 5
        assert described["partitions"][0]["log_start_offset"] > 0
        hw = sum(p["high_watermark"] for p in described["partitions"])
        assert hw == sum(acked), "acknowledged records and high watermarks disagree"
        for front in {producing, admin_front}:
            assert "found gap" not in front.log_tail(1_000_000), front.log_tail()
    finally:
        producing.stop()
        if admin_front is not producing:
            admin_front.stop()
