"""``lakelog serve --eager-uploads`` (or ``LAKELOG_EAGER_UPLOADS=1``) on an S3 root: while a partition's segment
PUT is held, the front's next produce request to that partition uploads at once; by default it waits. Either
way both are acknowledged in order once the held PUT lands. A real front, moto behind the fault proxy."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from front_process import Front, new_topic, wait_for
from bench.s3_proxy import S3FaultProxy

BUCKET = "lakelog-test"


@pytest.mark.parametrize("args, env, at_once", [((), {}, False), (("--eager-uploads",), {}, True),
                                                ((), {"LAKELOG_EAGER_UPLOADS": "1"}, True)])
def test_a_held_segment_put_holds_the_partitions_next_request_unless_uploads_are_eager(s3_endpoint, tmp_path,
                                                                                       args, env, at_once):
    proxy = S3FaultProxy(s3_endpoint).start()
    child = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
             "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": proxy.url, "AWS_ALLOW_HTTP": "true", **env}
    front = Front(f"s3://{BUCKET}/eager-{uuid.uuid4().hex[:8]}", tmp_path, env=child, args=args).start()
    held = None
    try:
        with front.client(timeout=120) as http:
            topic = new_topic(http, partitions=1)
            segment = lambda m, p: m == "PUT" and f"/topics/{topic}/" in p and ".parquet" in p  # noqa: E731
            segments = lambda: sum(1 for m, p, _ in proxy.log if segment(m, p))  # noqa: E731
            held = proxy.stall(segment, 60.0, then="forward")
            answers: dict[str, object] = {}

            def produce(name: str) -> None:
                with front.client(timeout=120) as own:
                    answers[name] = own.post(f"/v1/topics/{topic}/records",
                                             json={"records": [{"value": f"{name}-{i}"} for i in range(3)]})

            first = threading.Thread(target=produce, args=("first",))
            first.start()
            wait_for(lambda: held.hits, 30, "the first request's segment PUT, held")
            second = threading.Thread(target=produce, args=("second",))
            second.start()
            if at_once:
                wait_for(lambda: segments() == 2, 30, "the second request's segment PUT")
            else:
                time.sleep(1.5)  # ample for a group taken after linger.ms 5 to reach the proxy, were it let through
                assert segments() == 1
            assert not answers  # neither is acknowledged before the held segment has landed and been committed
            held.release.set()
            first.join(60)
            second.join(60)
            results = [answers[n].json()["results"][0] for n in ("first", "second")]  # type: ignore[union-attr]
            assert [(r["partition"], r["base_offset"], r["error_code"]) for r in results] == [(0, 0, 0), (0, 3, 0)]
            assert segments() == 2
    finally:
        if held is not None:
            held.release.set()
        front.kill()
        proxy.stop()
