"""Client quotas over the Kafka protocol: AlterClientQuotas and DescribeClientQuotas (KIP-546, through the wire
client: neither Python client has them), and their enforcement as Kafka's broker enforces them -- throttle
times in answers, the connection muted for that long (KIP-219), a throttled Fetch answered empty, and a client at
its quota never slowing another (two confluent-kafka producers)."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Producer
from wire_client import WireClient

PRODUCE, FETCH, METADATA = 0, 1, 3


def alter(bootstrap: str, entity: list[tuple[str, str | None]], ops: list[tuple[str, float | None]],
          validate_only: bool = False) -> tuple[int, str | None]:
    with WireClient(bootstrap) as w:
        r = w.request(49, 1, {"entries": [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                                           "ops": [{"key": k, "value": v or 0.0, "remove": v is None} for k, v in ops]}],
                              "validate_only": validate_only})
    return r.entries[0].error_code, r.entries[0].error_message


def describe(bootstrap: str, components: list[tuple[str, int, str | None]], strict: bool = False):
    with WireClient(bootstrap) as w:
        r = w.request(48, 1, {"components": [{"entity_type": t, "match_type": m, "match": n} for t, m, n in components],
                              "strict": strict})
    assert r.error_code == 0, r.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in r.entries}


def test_quotas_are_altered_and_described(bootstrap):
    user, client = f"u-{uuid.uuid4().hex[:6]}", f"c-{uuid.uuid4().hex[:6]}"
    assert alter(bootstrap, [("user", user), ("client-id", client)],
                 [("producer_byte_rate", 1024.0), ("request_percentage", 12.5)]) == (0, None)
    assert alter(bootstrap, [("user", user)], [("consumer_byte_rate", 2048.0)]) == (0, None)
    assert alter(bootstrap, [("user", user)], [("consumer_byte_rate", 4096.0)], validate_only=True) == (0, None)
    assert describe(bootstrap, [("user", 0, user)]) == {
        (("client-id", client), ("user", user)): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
        (("user", user),): {"consumer_byte_rate": 2048.0}}
    assert describe(bootstrap, [("user", 0, user)], strict=True) == {(("user", user),): {"consumer_byte_rate": 2048.0}}
    assert alter(bootstrap, [("user", user)], [("consumer_byte_rate", None)]) == (0, None)
    assert describe(bootstrap, [("user", 0, user)], strict=True) == {}
    assert alter(bootstrap, [("user", user)], [("producer_byte_rate", 1.5)]) == \
        (42, "producer_byte_rate cannot be a fractional value.")
    assert alter(bootstrap, [("user", user)], [("nope", 1.0)])[0] == 42
    assert alter(bootstrap, [("group", "g")], [("producer_byte_rate", 1.0)])[0] == 42


def quota_for(bootstrap: str, client: str, **values: float) -> None:
    assert alter(bootstrap, [("client-id", client)], list(values.items())) == (0, None)


def test_a_throttled_connection_is_muted_and_others_are_not(bootstrap, topic):
    """KIP-219: the Produce answer comes at once with its throttle time; the connection's next request is handled
    only once that time has passed, while another client's request is answered meanwhile."""
    client = f"muted-{uuid.uuid4().hex[:6]}"
    quota_for(bootstrap, client, producer_byte_rate=1000.0)
    payload = b"x" * 14_000  # over 10 s of quota at once: about (1400 - 1000) / 1000 * 10 s = 4 s of throttle
    with WireClient(bootstrap, client_id=client) as muted, WireClient(bootstrap) as other:
        first = muted.produce(topic, 0, payload)
        throttle_ms = first.throttle_time.total_seconds() * 1000
        assert 3000 <= throttle_ms <= 6000, throttle_ms
        answered = time.monotonic()
        muted.send_raw(muted.frame(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                  "include_topic_authorized_operations": False}))
        other.request(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
        other_done = time.monotonic()
        muted.response(METADATA, 12)
        muted_done = time.monotonic()
    assert muted_done - answered >= throttle_ms / 1000 - 0.05  # nothing of it was handled before the throttle passed
    assert other_done < muted_done


def test_a_throttled_fetch_is_answered_empty(bootstrap, topic):
    """A Fetch whose answer takes the client over its consumer byte rate is answered with no records and its
    throttle time (the bytes are taken back); one within it is answered whole."""
    client = f"reader-{uuid.uuid4().hex[:6]}"
    quota_for(bootstrap, client, consumer_byte_rate=1500.0)  # 15 KB over the first ten seconds
    with WireClient(bootstrap) as w:
        for i in range(40):
            w.produce(topic, 0, bytes([65 + i % 26]) * 1000)
    with WireClient(bootstrap, client_id=client) as r:
        first = r.fetch(topic, 0, 0, max_bytes=10_000)
        assert first.throttle_time.total_seconds() == 0
        assert 9000 < len(first.responses[0].partitions[0].records) <= 11_000
        second = r.fetch(topic, 0, 9, max_bytes=1 << 20)  # bounded to 15 KB: over what is left
        assert second.throttle_time.total_seconds() > 0 and second.responses == ()


def test_request_percentage_throttles_are_capped_at_one_window(bootstrap):
    client = f"busy-{uuid.uuid4().hex[:6]}"
    quota_for(bootstrap, client, request_percentage=0.01)
    throttles = []
    with WireClient(bootstrap, client_id=client) as w:
        for _ in range(10):
            r = w.request(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                         "include_topic_authorized_operations": False})
            throttles.append(r.throttle_time.total_seconds() * 1000)
    assert max(throttles) == 1000  # Kafka caps request-time throttles at quota.window.size.seconds


def test_one_tenant_at_its_quota_never_slows_another(bootstrap, topic):
    """Two confluent-kafka producers with different client ids, one at a 1 KB/s quota: once its 20 KB record has
    earned it a throttle of seconds, its next record waits out the mute while every record of the other is
    acknowledged, none of them throttled. (The other's rate beside it: ``python -m bench.run quotas``.)"""
    slow, fast = f"slow-{uuid.uuid4().hex[:6]}", f"fast-{uuid.uuid4().hex[:6]}"
    quota_for(bootstrap, slow, producer_byte_rate=1000.0)
    throttles: dict[str, list[float]] = {slow: [], fast: []}
    acked: dict[str, list[float]] = {slow: [], fast: []}

    def producer(client: str) -> Producer:
        return Producer({"bootstrap.servers": bootstrap, "client.id": client, "linger.ms": 0,
                         "message.timeout.ms": 60000,
                         "throttle_cb": lambda e: e.throttle_time > 0 and throttles[client].append(e.throttle_time)})

    def note(client: str):
        return lambda err, msg: err is None and acked[client].append(time.monotonic())

    held, free = producer(slow), producer(fast)
    held.produce(topic, b"s" * 20_000, on_delivery=note(slow))
    held.flush(60)  # answered at once, with a throttle of about (2,000 - 1,000) / 1,000 * 10 s
    assert throttles[slow] and min(throttles[slow]) >= 5.0, throttles
    muted_until = acked[slow][0] + min(throttles[slow])
    held.produce(topic, b"s", on_delivery=note(slow))  # waits for the mute
    for i in range(50):
        free.produce(topic, b"f%d" % i, on_delivery=note(fast))
        free.poll(0)
    free.flush(60)
    held.poll(0)
    assert len(acked[fast]) == 50 and throttles[fast] == []
    assert max(acked[fast]) < muted_until and len(acked[slow]) == 1  # all of it while the other was muted
    held.purge()  # the mute itself is timed by test_a_throttled_connection_is_muted_and_others_are_not
    held.flush(5)
