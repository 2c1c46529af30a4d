"""Typed columns through the library (``Log`` and its registry): evolution across five schema versions as Delta
schema evolution, hostile schemas and payloads refused with their codes and nothing written, compaction keeping
the columns, and DuckDB's ``delta_scan``, Polars and delta-rs reading the same typed columns.
"""

from __future__ import annotations

import io
import json
import struct

import fastavro
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakelog import Log
from lakelog.errors import InvalidRecord
from lakelog.schema.schema_errors import IncompatibleSchema, InvalidSchema
from lakelog.schema.schema_limits import MAX_ENUM_SYMBOLS, MAX_REFERENCE_DEPTH, MAX_UNION_BRANCHES

BASE = {"type": "record", "name": "Payment", "namespace": "com.acme",
        "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}]}
TYPED = {"lakelog.value.schema.columns": "true"}


def frame(schema_id: int, schema: dict, record: dict) -> bytes:
    b = io.BytesIO()
    b.write(b"\x00" + struct.pack(">I", schema_id))
    fastavro.schemaless_writer(b, fastavro.parse_schema(schema), record)
    return b.getvalue()


def read_table(root: str, topic: str) -> pa.Table:
    from deltalake import DeltaTable

    path = f"{root}/topics/{topic}"
    dt = DeltaTable(path)
    dataset = ds.dataset(dt.file_uris(), format="parquet", schema=pa.schema(dt.schema().to_arrow()),
                         partitioning=ds.partitioning(pa.schema([("partition", pa.int32())]), flavor="hive"),
                         partition_base_dir=path)
    return dataset.to_table().sort_by([("partition", "ascending"), ("offset", "ascending")])


def high_watermarks(log: Log, topic: str) -> list[int]:
    return [p.high_watermark for p in log.describe_topic(topic).partitions]


# -- evolution --------------------------------------------------------------------------------------------------
NEW_FIELD_TYPES = [("string", "x"), ("long", 7), ("double", 0.5), ("boolean", True),
                   ({"type": "array", "items": "string"}, []), ({"type": "map", "values": "long"}, {}),
                   ({"type": "record", "name": "Extra", "fields": [{"name": "q", "type": "int"}]}, {"q": 1})]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_evolution_across_five_versions_is_delta_schema_evolution(tmp_path_factory, data):
    root = str(tmp_path_factory.mktemp("evolve"))
    log = Log(root)
    log.create_topic("payments", 2, TYPED)
    versions, schema = [], BASE
    for v in range(5):
        if v:
            fields = list(schema["fields"])
            if data.draw(st.booleans(), label=f"v{v + 1} optional") and any(
                    not isinstance(f["type"], list) for f in fields[1:]):  # make a field optional (a union with null)
                i = data.draw(st.sampled_from([i for i, f in enumerate(fields) if i and not isinstance(f["type"], list)]))
                fields[i] = {**fields[i], "type": ["null", fields[i]["type"]], "default": None}
            t, default = data.draw(st.sampled_from(NEW_FIELD_TYPES), label=f"v{v + 1} new field")
            if isinstance(t, dict) and t.get("type") == "record":
                t = {**t, "name": f"Extra{v}"}
            fields.append({"name": f"f{v}", "type": ["null", t], "default": None})
            schema = {**schema, "fields": fields}
        versions.append((log.schemas.register("payments-value", "AVRO", json.dumps(schema)), schema))
    produced = []
    for i in range(40):
        sid, schema = versions[data.draw(st.integers(0, 4), label="version")]
        record = {"id": i, "amount": i / 4}
        for f in schema["fields"][2:]:
            record[f["name"]] = None if i % 3 == 0 else _value_of(f["type"])
        produced.append((sid, schema, record))
    for sid, schema, record in produced:
        log.append("payments", [{"key": str(record["id"]), "value": frame(sid, schema, record)}])
    table = read_table(root, "payments")
    assert table.num_rows == 40
    newest = versions[-1][1]
    typed = {r["id"]: r for r in table.column("value_record").to_pylist()}
    for sid, schema, record in produced:
        back = fastavro.schemaless_reader(io.BytesIO(frame(sid, schema, record)[5:]), fastavro.parse_schema(schema), None)
        row = typed[record["id"]]
        kinds = {f["name"]: _inner(f["type"]) for f in newest["fields"]}
        for name, value in row.items():
            expected = back.get(name)  # a field the writer's version lacks is null
            if isinstance(kinds[name], dict) and kinds[name]["type"] == "map" and expected is not None:
                expected = list(expected.items())
            assert value == expected, (name, row, back)
    # the table schema grew one field per version, in the commits that first wrote them
    from deltalake import DeltaTable

    history = DeltaTable(f"{root}/topics/payments").history()
    widened = [h for h in history if h.get("lakelog.operation") == "append"]
    assert widened
    fields = [f.name for f in pa.schema(DeltaTable(f"{root}/topics/payments").schema().to_arrow())
              .field("value_record").type]
    used = {s["fields"][-1]["name"] for _, s, _ in produced if len(s["fields"]) > 2}
    assert set(fields) >= {"id", "amount"} | used


def _inner(t):
    return [b for b in t if b != "null"][0] if isinstance(t, list) else t


def _value_of(t):
    t = _inner(t)
    if isinstance(t, dict):
        return {"array": ["a", "b"], "map": {"k": 3}, "record": {"q": 4}}[t["type"]]
    return {"string": "hello", "long": 42, "double": 1.25, "boolean": False}[t]


def test_a_type_change_is_refused_before_anything_is_written(tmp_path):
    log = Log(str(tmp_path))
    log.create_topic("t", 1, TYPED)
    log.schemas.set_config("t-value", "NONE")
    s1 = log.schemas.register("t-value", "AVRO", json.dumps(BASE))
    changed = {**BASE, "fields": [{"name": "id", "type": "string"}, BASE["fields"][1]]}
    s2 = log.schemas.register("t-value", "AVRO", json.dumps(changed))
    log.append("t", [{"value": frame(s1, BASE, {"id": 1, "amount": 1.0})}])
    with pytest.raises(InvalidRecord, match="cannot change a column's type"):
        log.append("t", [{"value": frame(s2, changed, {"id": "one", "amount": 1.0})}])
    assert high_watermarks(log, "t") == [1]


def test_incompatible_versions_never_reach_a_record(tmp_path):
    log = Log(str(tmp_path))
    log.schemas.register("t-value", "AVRO", json.dumps(BASE))
    required = {**BASE, "fields": BASE["fields"] + [{"name": "new", "type": "string"}]}
    with pytest.raises(IncompatibleSchema):
        log.schemas.register("t-value", "AVRO", json.dumps(required))


# -- hostile schemas and payloads --------------------------------------------------------------------------------
def test_schema_bombs_are_refused_at_registration(tmp_path):
    log = Log(str(tmp_path))
    huge_enum = {"type": "enum", "name": "E", "symbols": [f"S{i}" for i in range(MAX_ENUM_SYMBOLS + 1)]}
    wide_union = {"type": "record", "name": "r", "fields": [{"name": "u", "type": [
        {"type": "record", "name": f"B{i}", "fields": [{"name": "x", "type": "int"}]}
        for i in range(MAX_UNION_BRANCHES + 1)]}]}
    nested = "{" * 200 + "}" * 200
    for schema_type, text in [("AVRO", json.dumps(huge_enum)), ("AVRO", json.dumps(wide_union)),
                              ("AVRO", nested), ("JSON", '{"type":"object","properties":' * 100 + "{}" + "}" * 100),
                              ("PROTOBUF", "message A {" * 100 + "}" * 100),
                              ("AVRO", "x" * (2 << 20))]:
        with pytest.raises(InvalidSchema):
            log.schemas.register("bomb-value", schema_type, text)
    # a chain of references deeper than lakelog follows
    prev = None
    for i in range(MAX_REFERENCE_DEPTH + 2):
        name = f"com.acme.L{i}"
        fields = [{"name": "x", "type": "int"}] + ([{"name": "next", "type": prev}] if prev else [])
        refs = [(prev, f"chain-{i - 1}", 1)] if prev else []
        from lakelog.schema.parsed_schema import SchemaReference

        try:
            log.schemas.register(f"chain-{i}", "AVRO", json.dumps({"type": "record", "name": name, "fields": fields}),
                                 tuple(SchemaReference(*r) for r in refs))
        except InvalidSchema as e:
            assert "deeper" in e.message
            break
        prev = name
    else:
        pytest.fail("a reference chain deeper than MAX_REFERENCE_DEPTH was accepted")
    assert log.list_topics(include_internal=True) in ([], ["_schemas"])  # nothing of the bombs was stored
    assert "bomb-value" not in log.schemas.subjects(deleted=True)


def test_hostile_payloads_refuse_the_batch_and_write_nothing(tmp_path):
    log = Log(str(tmp_path))
    log.create_topic("t", 1, {**TYPED, "lakelog.key.schema.columns": "true"})
    sid = log.schemas.register("t-value", "AVRO", json.dumps(BASE))
    kid = log.schemas.register("t-key", "AVRO", '"string"')
    other = log.schemas.register("elsewhere-value", "AVRO", json.dumps({"type": "record", "name": "O", "fields": [
        {"name": "id", "type": "long"}, {"name": "amount", "type": "double"}]}))
    key = frame(kid, "string", "k") if False else b"\x00" + struct.pack(">I", kid) + b"\x02k"
    good = frame(sid, BASE, {"id": 1, "amount": 2.0})
    cases = {
        "unknown id": b"\x00" + struct.pack(">I", 424242) + good[5:],
        "id zero": b"\x00\x00\x00\x00\x00" + good[5:],
        "truncated": good[:-3],
        "header only": good[:5],
        "trailing": good + b"\x00",
        "another subject's schema": frame(other, BASE, {"id": 1, "amount": 2.0}),
        "not framed": b"{}",
        "negative string length in key": None,
    }
    for name, bad in cases.items():
        records = [{"key": key, "value": good}, {"key": key, "value": bad if bad is not None else good}]
        if bad is None:
            records[1]["key"] = b"\x00" + struct.pack(">I", kid) + b"\x01"
        with pytest.raises(InvalidRecord) as e:
            log.append("t", records, partition=0)
        assert "record 1" in e.value.message, (name, e.value.message)
        assert high_watermarks(log, "t") == [0], name
    log.append("t", [{"key": key, "value": good}, {"key": None, "value": None}], partition=0)  # a tombstone passes
    rows = read_table(str(tmp_path), "t").select(["key_record", "value_record"]).to_pylist()
    assert rows == [{"key_record": "k", "value_record": {"id": 1, "amount": 2.0}},
                    {"key_record": None, "value_record": None}]


def test_recursive_schema_validates_but_is_not_typed(tmp_path):
    log = Log(str(tmp_path))
    linked = {"type": "record", "name": "Node", "fields": [{"name": "v", "type": "int"},
                                                            {"name": "next", "type": ["null", "Node"]}]}
    sid = log.schemas.register("v-value", "AVRO", json.dumps(linked))
    log.create_topic("v", 1, {"confluent.value.schema.validation": "true"})
    log.create_topic("typed", 1, TYPED)
    log.schemas.register("typed-value", "AVRO", json.dumps(linked))
    value = frame(sid, linked, {"v": 1, "next": {"v": 2, "next": None}})
    log.append("v", [{"value": value}])
    with pytest.raises(InvalidRecord, match="contains itself"):
        log.append("typed", [{"value": value}])
    assert high_watermarks(log, "v") == [1] and high_watermarks(log, "typed") == [0]


def test_compaction_keeps_typed_columns(tmp_path):
    from lakelog.maintenance.segment_rewrite import RewriteGroup, rewrite_group

    root = str(tmp_path)
    log = Log(root)
    log.create_topic("t", 1, TYPED)
    untyped = log.schemas.register("t-value", "AVRO", json.dumps(BASE))
    log.append("t", [{"value": frame(untyped, BASE, {"id": i, "amount": 1.0})} for i in range(3)])
    v2 = {**BASE, "fields": BASE["fields"] + [{"name": "memo", "type": ["null", "string"], "default": None}]}
    sid2 = log.schemas.register("t-value", "AVRO", json.dumps(v2))
    log.append("t", [{"value": frame(sid2, v2, {"id": 9, "amount": 2.0, "memo": "m"})}])
    segments = log.segments("t", 0)
    assert len(segments) == 2
    fields = rewrite_group(log.root, "t", RewriteGroup(0, 0, tuple(segments)))
    import pyarrow.parquet as pq

    merged = pq.read_table(log.root.path_for("topics", "t", fields["path"]))
    assert merged.column("value_record").to_pylist() == [
        {"id": 0, "amount": 1.0, "memo": None}, {"id": 1, "amount": 1.0, "memo": None},
        {"id": 2, "amount": 1.0, "memo": None}, {"id": 9, "amount": 2.0, "memo": "m"}]


def test_alter_keeps_the_widened_schema(tmp_path):
    root = str(tmp_path)
    log = Log(root)
    log.create_topic("t", 1, TYPED)
    sid = log.schemas.register("t-value", "AVRO", json.dumps(BASE))
    log.append("t", [{"value": frame(sid, BASE, {"id": 1, "amount": 1.0})}])
    log.alter_topic("t", {"retention.ms": "1000000"})
    assert "value_record" in read_table(root, "t").column_names


# -- plain Delta readers ------------------------------------------------------------------------------------------
def _duckdb():
    import duckdb_delta

    return duckdb_delta.connect()


def test_duckdb_polars_and_delta_rs_read_the_same_typed_columns(tmp_path):
    import polars as pl

    root = str(tmp_path)
    log = Log(root)
    log.create_topic("orders", 3, TYPED)
    sid = log.schemas.register("orders-value", "AVRO", json.dumps(BASE))
    v2 = {**BASE, "fields": BASE["fields"] + [{"name": "memo", "type": ["null", "string"], "default": None}]}
    sid2 = log.schemas.register("orders-value", "AVRO", json.dumps(v2))
    log.append("orders", [{"key": f"k{i}", "value": frame(sid, BASE, {"id": i, "amount": i * 1.5})} for i in range(50)])
    log.append("orders", [{"key": f"k{i}", "value": frame(sid2, v2, {"id": i, "amount": i * 1.5, "memo": f"m{i}"})}
                          for i in range(50, 80)])
    path = f"{root}/topics/orders"
    expected = sorted((i, i * 1.5, None if i < 50 else f"m{i}") for i in range(80))
    con = _duckdb()
    duck = sorted(con.execute(f"SELECT value_record.id, value_record.amount, value_record.memo "
                              f"FROM delta_scan('{path}')").fetchall())
    assert duck == expected
    polars = pl.scan_delta(path).select(pl.col("value_record").struct.field("id"),
                                        pl.col("value_record").struct.field("amount"),
                                        pl.col("value_record").struct.field("memo")).collect()
    assert sorted(polars.iter_rows()) == expected
    rs = read_table(root, "orders").column("value_record").to_pylist()
    assert sorted((r["id"], r["amount"], r["memo"]) for r in rs) == expected
    assert con.execute(f"SELECT sum(value_record.amount) FROM delta_scan('{path}')").fetchone()[0] == \
        sum(a for _, a, _ in expected)
