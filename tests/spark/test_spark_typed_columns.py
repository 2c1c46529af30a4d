"""Typed columns in Spark: ``format("lakelog")`` batch and ``readStream`` show ``value_record`` (and
``key_record``) beside the Kafka columns, on the JVM source and the Python one; the batch scan prunes nested
fields as Spark's own Parquet scan does; and Spark's answer equals DuckDB's ``delta_scan``, Polars' and
delta-rs's for ``SELECT value_record.amount``.
"""

from __future__ import annotations

import io
import json
import struct

import fastavro
import pytest

from lakelog import Log

SCHEMA = {"type": "record", "name": "Payment", "namespace": "com.acme", "fields": [
    {"name": "id", "type": "long"}, {"name": "amount", "type": "double"},
    {"name": "payer", "type": {"type": "record", "name": "Payer", "fields": [
        {"name": "name", "type": "string"}, {"name": "country", "type": "string"}]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}}]}
V2 = {**SCHEMA, "fields": SCHEMA["fields"] + [{"name": "memo", "type": ["null", "string"], "default": None}]}


def frame(schema_id: int, schema: dict, record: dict) -> bytes:
    b = io.BytesIO()
    b.write(b"\x00" + struct.pack(">I", schema_id))
    fastavro.schemaless_writer(b, fastavro.parse_schema(schema), record)
    return b.getvalue()


@pytest.fixture(params=["jvm", "python"])
def source(request, spark):
    spark.conf.set("spark.lakelog.jvm.enabled", "true" if request.param == "jvm" else "false")
    yield request.param
    spark.conf.set("spark.lakelog.jvm.enabled", "true")


@pytest.fixture(scope="module")
def typed_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("typed") / "root")
    log = Log(root)
    log.create_topic("payments", 2, {"lakelog.value.schema.columns": "true", "lakelog.key.schema.columns": "true"})
    sid = log.schemas.register("payments-value", "AVRO", json.dumps(SCHEMA))
    kid = log.schemas.register("payments-key", "AVRO", '"long"')
    sid2 = log.schemas.register("payments-value", "AVRO", json.dumps(V2))

    def key(i):
        return frame(kid, "long", i)

    log.append("payments", [{"key": key(i), "value": frame(sid, SCHEMA, {
        "id": i, "amount": i * 2.5, "payer": {"name": f"p{i % 5}", "country": "FR"}, "tags": ["a"] * (i % 3)})}
        for i in range(100)])
    log.append("payments", [{"key": key(i), "value": frame(sid2, V2, {
        "id": i, "amount": i * 2.5, "payer": {"name": f"p{i % 5}", "country": "DE"}, "tags": [], "memo": f"m{i}"})}
        for i in range(100, 130)])
    log.close()
    return root


def reader(spark, root):
    return (spark.read.format("lakelog").option("subscribe", "payments").option("startingOffsets", "earliest")
            .load(root))


def test_batch_shows_typed_columns(spark, source, typed_root):
    df = reader(spark, typed_root)
    assert df.columns[-2:] == ["key_record", "value_record"]
    assert df.schema["value_record"].dataType.simpleString() == (
        "struct<id:bigint,amount:double,payer:struct<name:string,country:string>,tags:array<string>,memo:string>")
    rows = df.selectExpr("key_record", "value_record.id", "value_record.amount", "value_record.payer.country",
                         "value_record.memo").collect()
    assert len(rows) == 130
    for r in rows:
        assert r.key_record == r.id and r.amount == r.id * 2.5
        assert (r.country, r.memo) == (("FR", None) if r.id < 100 else ("DE", f"m{r.id}"))
    df.createOrReplaceTempView("payments_typed")
    total = spark.sql("SELECT sum(value_record.amount) AS s FROM payments_typed").first().s
    assert total == sum(i * 2.5 for i in range(130))


def test_batch_scan_prunes_nested_fields(spark, typed_root, capsys):
    spark.conf.set("spark.lakelog.jvm.enabled", "true")
    df = reader(spark, typed_root).select("value_record.amount")
    capsys.readouterr()
    df.explain()
    plan = capsys.readouterr().out
    assert "ReadSchema: struct<value_record:struct<amount:double>>" in plan, plan
    assert sorted(r.amount for r in df.collect()) == sorted(i * 2.5 for i in range(130))


def test_stream_shows_typed_columns(spark, source, typed_root, tmp_path):
    rows = []
    q = (spark.readStream.format("lakelog").option("subscribe", "payments").option("startingOffsets", "earliest")
         .load(typed_root).selectExpr("value_record.id AS id", "value_record.payer.name AS name")
         .writeStream.trigger(availableNow=True).option("checkpointLocation", str(tmp_path / "ck"))
         .foreachBatch(lambda df, _: rows.extend(df.collect())).start())
    q.awaitTermination(300)
    assert sorted(r.id for r in rows) == list(range(130))
    assert all(r.name == f"p{r.id % 5}" for r in rows)


def test_spark_equals_duckdb_polars_and_delta_rs(spark, typed_root):
    import duckdb_delta
    import polars as pl

    from deltalake import DeltaTable
    import pyarrow as pa
    import pyarrow.dataset as ds

    spark.conf.set("spark.lakelog.jvm.enabled", "true")
    expected = sorted((r.id, r.amount, r.memo) for r in reader(spark, typed_root)
                      .selectExpr("value_record.id", "value_record.amount", "value_record.memo").collect())
    path = f"{typed_root}/topics/payments"
    con = duckdb_delta.connect()
    assert sorted(con.execute(f"SELECT value_record.id, value_record.amount, value_record.memo "
                              f"FROM delta_scan('{path}')").fetchall()) == expected
    polars = pl.scan_delta(path).select(pl.col("value_record").struct.field("id"),
                                        pl.col("value_record").struct.field("amount"),
                                        pl.col("value_record").struct.field("memo")).collect()
    assert sorted(polars.iter_rows()) == expected
    dt = DeltaTable(path)
    table = ds.dataset(dt.file_uris(), format="parquet", schema=pa.schema(dt.schema().to_arrow()),
                       partitioning=ds.partitioning(pa.schema([("partition", pa.int32())]), flavor="hive"),
                       partition_base_dir=path).to_table(columns=["value_record"])
    assert sorted((r["id"], r["amount"], r["memo"]) for r in table.column("value_record").to_pylist()) == expected
    delta = spark.read.format("parquet").load(path)  # any Parquet reader of the files sees the same struct
    assert delta.selectExpr("sum(value_record.amount)").first()[0] == sum(a for _, a, _ in expected)
