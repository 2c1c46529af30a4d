"""confluent-kafka's Schema Registry serializers against a real front: records produced through the Kafka
listener with ``AvroSerializer``, ``JSONSerializer`` and ``ProtobufSerializer`` (and their
``SchemaRegistryClient`` on the front's registry) come back exact through the matching deserializers, and the
topic table's typed columns hold the same records field by field. The HTTP /v1 and REST v3 produce paths
validate the same way: a bad record refuses its whole batch with INVALID_RECORD, nothing written.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import importlib
import json
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.serialization import MessageField, SerializationContext

ORDER = {
    "type": "record", "name": "Order", "namespace": "com.acme", "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
            {"name": "name", "type": "string"}, {"name": "vip", "type": "boolean"}]}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "double"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "weight", "type": "float"},
    ]}
KEY = {"type": "record", "name": "OrderKey", "namespace": "com.acme", "fields": [{"name": "id", "type": "long"}]}


def new_topic(front, configs: dict) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    with front.client() as c:
        r = c.post("/v1/topics", json={"name": name, "partitions": 2, "configs": configs})
        assert r.status_code == 201, r.text
    return name


def orders(n: int) -> list[dict]:
    base = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone.utc)
    return [{"id": i, "customer": {"name": f"c{i % 7}", "vip": i % 3 == 0},
             "amount": decimal.Decimal(f"{i * 13 - 500}.{i % 100:02d}"),
             "placed": base + dt.timedelta(milliseconds=i * 86_400_123),
             "day": dt.date(2024, 1, 1) + dt.timedelta(days=i), "ref": str(uuid.UUID(int=i * 7919 + 1)),
             "status": ["NEW", "PAID", "SHIPPED"][i % 3], "tags": [f"t{j}" for j in range(i % 4)],
             "attrs": {f"a{j}": j / 4 for j in range(i % 3)}, "note": None if i % 2 else f"note {i}",
             "weight": float(i) / 2} for i in range(n)]


def consume(front, topic: str, n: int, timeout: float = 60.0) -> list:
    c = Consumer({"bootstrap.servers": front.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + timeout
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m)
    finally:
        c.close()
    assert len(got) == n, f"consumed {len(got)} of {n}"
    return got


def table_rows(front, topic: str) -> list[dict]:
    """The topic table as delta-rs reads it (subprocess-free: the rows, by offset within partition)."""
    from deltalake import DeltaTable

    import pyarrow.dataset as ds
    import pyarrow as pa

    path = f"{front.root}/topics/{topic}"
    dt_ = DeltaTable(path)
    data = ds.dataset(dt_.file_uris(), format="parquet", schema=pa.schema(dt_.schema().to_arrow()),
                      partitioning=ds.partitioning(pa.schema([("partition", pa.int32())]), flavor="hive"),
                      partition_base_dir=path)
    return data.to_table().to_pylist()


def produce_all(front, topic: str, pairs) -> None:
    p = Producer({"bootstrap.servers": front.bootstrap, "linger.ms": 5, "enable.idempotence": True})
    errors = []
    for key, value in pairs:
        p.produce(topic, key=key, value=value, on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(60) == 0
    assert not errors, errors


def test_avro_round_trip_and_typed_columns(front, client):
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    topic = new_topic(front, {"lakelog.value.schema.columns": "true", "lakelog.key.schema.columns": "true"})
    vser, kser = AvroSerializer(client, json.dumps(ORDER)), AvroSerializer(client, json.dumps(KEY))
    records = orders(60)
    vctx, kctx = SerializationContext(topic, MessageField.VALUE), SerializationContext(topic, MessageField.KEY)
    produce_all(front, topic, [(kser({"id": r["id"]}, kctx), vser(r, vctx)) for r in records])
    vde, kde = AvroDeserializer(client), AvroDeserializer(client)
    got = {}
    for m in consume(front, topic, len(records)):
        value = vde(m.value(), vctx)
        assert kde(m.key(), kctx) == {"id": value["id"]}
        got[value["id"]] = value
    for r in records:  # exact, logical types included (fastavro gives the uuid back as a UUID)
        back = dict(got[r["id"]])
        back["ref"] = str(back["ref"])
        assert back == r
    rows = table_rows(front, topic)
    assert len(rows) == len(records)
    by_id = {row["value_record"]["id"]: row for row in rows}
    for r in records:
        row = by_id[r["id"]]
        typed = row["value_record"]
        assert typed == {**r, "attrs": list(r["attrs"].items())}, (typed, r)
        assert row["key_record"] == {"id": r["id"]}
        assert row["value"][:1] == b"\x00"  # the original bytes stay


def test_json_schema_round_trip_and_plain_json(front, client):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Reading", "type": "object",
              "properties": {"sensor": {"type": "string"}, "celsius": {"type": "number"},
                             "tags": {"type": "array", "items": {"type": "string"}},
                             "at": {"type": "object", "properties": {"site": {"type": "string"},
                                                                     "floor": {"type": "integer"}}},
                             "extra": {}},
              "required": ["sensor", "celsius"]}
    topic = new_topic(front, {"lakelog.value.schema.columns": "true"})
    ser = JSONSerializer(json.dumps(schema), client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    records = [{"sensor": f"s{i}", "celsius": i / 3, "tags": ["x"] * (i % 3),
                "at": {"site": "paris", "floor": i}, "extra": {"n": [i]}} for i in range(30)]
    produce_all(front, topic, [(None, ser(r, ctx)) for r in records])
    de = JSONDeserializer(None, schema_registry_client=client)
    got = sorted((de(m.value(), ctx) for m in consume(front, topic, 30)), key=lambda r: r["celsius"])
    assert got == records
    rows = sorted(table_rows(front, topic), key=lambda row: row["value_record"]["celsius"])
    for row, r in zip(rows, records):
        assert row["value_record"] == {**r, "extra": json.dumps(r["extra"], separators=(",", ":"))}
    # plain JSON (no wire format) is checked against the subject's latest JSON Schema and typed by it
    with front.client() as http:
        ok = http.post(f"/v1/topics/{topic}/records", json={"records": [
            {"value": json.dumps({"sensor": "plain", "celsius": 99.5}), "partition": 0}]})
        assert ok.status_code == 200, ok.text
        bad = http.post(f"/v1/topics/{topic}/records", json={"records": [
            {"value": json.dumps({"sensor": "plain"}), "partition": 0}]})
        assert bad.status_code == 400 and bad.json()["error_code"] == 87, bad.text
        assert "celsius" in bad.json()["message"]
    plain = [row for row in table_rows(front, topic) if row["value_record"]["sensor"] == "plain"]
    assert [p["value_record"]["celsius"] for p in plain] == [99.5]


PROTO = """syntax = "proto3";
package acme;
import "google/protobuf/timestamp.proto";
message Shipment {
  string id = 1;
  int64 grams = 2;
  repeated string parcels = 3;
  map<string, int32> counts = 4;
  google.protobuf.Timestamp sent = 5;
  enum Mode { ROAD = 0; AIR = 1; SEA = 2; }
  Mode mode = 6;
  Address to = 7;
  optional string note = 8;
}
message Address { string city = 1; string zip = 2; }
"""


@pytest.fixture(scope="module")
def shipment_pb2(tmp_path_factory):
    d = tmp_path_factory.mktemp("proto")
    (d / "shipment.proto").write_text(PROTO)
    import grpc_tools

    include = str(__import__("pathlib").Path(grpc_tools.__file__).parent / "_proto")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{d}", f"-I{include}", f"--python_out={d}",
                    "shipment.proto"], check=True, cwd=d)
    sys.path.insert(0, str(d))
    try:
        yield importlib.import_module("shipment_pb2")
    finally:
        sys.path.remove(str(d))


def test_protobuf_round_trip_and_typed_columns(front, client, shipment_pb2):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    topic = new_topic(front, {"lakelog.value.schema.columns": "true"})
    ser = ProtobufSerializer(shipment_pb2.Shipment, client, {"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    msgs = []
    for i in range(25):
        m = shipment_pb2.Shipment(id=f"s{i}", grams=i * 1000, parcels=[f"p{j}" for j in range(i % 3)],
                                  mode=i % 3)
        m.counts["boxes"] = i
        m.sent.FromDatetime(dt.datetime(2024, 2, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=i))
        m.to.city, m.to.zip = "lyon", f"69{i:03d}"
        if i % 2:
            m.note = f"fragile {i}"
        msgs.append(m)
    produce_all(front, topic, [(None, ser(m, ctx)) for m in msgs])
    de = ProtobufDeserializer(shipment_pb2.Shipment, {"use.deprecated.format": False})
    got = {x.id: x for x in (de(m.value(), ctx) for m in consume(front, topic, 25))}
    assert all(got[m.id] == m for m in msgs)
    for row in table_rows(front, topic):
        m = got[row["value_record"]["id"]]
        typed = row["value_record"]
        assert (typed["grams"], typed["parcels"], dict(typed["counts"])) == (m.grams, list(m.parcels), dict(m.counts))
        assert typed["sent"] == m.sent.ToDatetime(tzinfo=dt.timezone.utc)
        assert typed["mode"] == shipment_pb2.Shipment.Mode.Name(m.mode)
        assert typed["to"] == {"city": m.to.city, "zip": m.to.zip}
        assert typed["note"] == (m.note if m.HasField("note") else None)


def framed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def test_bad_records_refuse_their_batch_on_every_path(front, client):
    """Kafka listener, HTTP /v1 and REST v3: an unknown id, a truncated payload, another subject's schema, or
    bytes without the wire format are refused with INVALID_RECORD (87), the whole batch, nothing written."""
    from confluent_kafka.schema_registry.avro import AvroSerializer

    topic = new_topic(front, {"confluent.value.schema.validation": "true"})
    good = AvroSerializer(client, json.dumps(KEY))({"id": 5}, SerializationContext(topic, MessageField.VALUE))
    sid = int.from_bytes(good[1:5], "big")
    other = AvroSerializer(client, json.dumps({"type": "record", "name": "Other", "fields": [
        {"name": "x", "type": "int"}]}))({"x": 1}, SerializationContext(f"{topic}-elsewhere", MessageField.VALUE))
    bad_values = {"unknown id": framed(sid + 10_000, good[5:]), "truncated": good[:-1], "trailing": good + b"\x01",
                  "other subject": other, "no wire format": b"hello", "too short": b"\x00\x00\x00"}
    # the three records of each case wait for flush(), which sends them as one batch: with a short linger a
    # stalled test process could see the first sent alone before the next is produced
    p = Producer({"bootstrap.servers": front.bootstrap, "linger.ms": 10_000, "enable.idempotence": False})
    for name, bad in bad_values.items():
        errors = []
        for v in (good, bad, good):  # one batch: the good records go down with it
            p.produce(topic, value=v, partition=0, on_delivery=lambda err, msg: errors.append(err))
        assert p.flush(30) == 0
        assert errors and all(e is not None and e.code() == 87 for e in errors), (name, errors)
    with front.client() as http:
        for name, bad in bad_values.items():
            r = http.post(f"/v1/topics/{topic}/records", json={"encoding": "base64", "records": [
                {"value": base64.b64encode(good).decode(), "partition": 1},
                {"value": base64.b64encode(bad).decode(), "partition": 1}]})
            assert r.status_code == 400 and r.json()["error_code"] == 87, (name, r.text)
            assert "/tmp" not in r.text and "Traceback" not in r.text
        cid = http.get("/v3/clusters").json()["data"][0]["cluster_id"]
        r = http.post(f"/v3/clusters/{cid}/topics/{topic}/records",
                      json={"partition_id": 1, "value": {"type": "BINARY", "data": base64.b64encode(b"nope").decode()}})
        assert (r.status_code, r.json()["error_code"]) == (400, 40002) and "wire format" in r.json()["message"], r.text
        assert http.get(f"/v1/topics/{topic}").json()["partitions"][0]["high_watermark"] == 0
        assert http.get(f"/v1/topics/{topic}").json()["partitions"][1]["high_watermark"] == 0
        # and a good one still goes through on each path
        assert http.post(f"/v1/topics/{topic}/records", json={"encoding": "base64", "records": [
            {"value": base64.b64encode(good).decode(), "partition": 1}]}).status_code == 200
        r = http.post(f"/v3/clusters/{cid}/topics/{topic}/records",
                      json={"partition_id": 1, "value": {"type": "BINARY", "data": base64.b64encode(good).decode()}})
        assert r.status_code == 200 and json.loads(r.text.splitlines()[0])["error_code"] == 200, r.text
    produce_all(front, topic, [(None, good)])
    with front.client() as http:
        assert sum(p_["high_watermark"] for p_ in http.get(f"/v1/topics/{topic}").json()["partitions"]) == 3
