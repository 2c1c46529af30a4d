"""The JSON produce body decoder (msgspec): which form a body is, and where a bad one is wrong."""

from __future__ import annotations

import json

import pytest

from api.produce_body import IdempotentProduce, MalformedBody, SimpleProduce, decode_produce, openapi_components


def _body(obj) -> bytes:
    return json.dumps(obj).encode()


GOOD = [
    ({"records": [{"value": "a"}]}, SimpleProduce),
    ({"records": [{"key": "k", "value": None, "headers": [{"key": "h"}], "timestamp": 0, "partition": 3}],
      "encoding": "base64"}, SimpleProduce),
    ({"records": [{"value": "batches"}]}, SimpleProduce),  # the word in a value does not make it idempotent
    ({"records": [{"value": "x", "partition": 2**31 - 1}]}, SimpleProduce),
    ({"producer_id": 7, "producer_epoch": 32767, "batches": [
        {"partition": 0, "base_sequence": 0, "records": [{"value": "a"}, {"key": "k"}]}]}, IdempotentProduce),
]


@pytest.mark.parametrize("obj, form", GOOD)
def test_valid_bodies_decode_to_their_form(obj, form) -> None:
    req = decode_produce(_body(obj))
    assert type(req) is form
    records = req.records if form is SimpleProduce else [r for b in req.batches for r in b.records]
    expected = obj["records"] if form is SimpleProduce else [r for b in obj["batches"] for r in b["records"]]
    assert [(r.key, r.value) for r in records] == [(r.get("key"), r.get("value")) for r in expected]


BAD = [
    (b"not json", "malformed"),
    (_body([]), "Expected `object`"),
    (_body({"records": [{"value": 1}]}), "$.records[0].value"),
    (_body({"records": [{"value": "x", "partition": -1}]}), "$.records[0].partition"),
    (_body({"records": [{"value": "x", "partition": 2**31}]}), "$.records[0].partition"),
    (_body({"records": [{"value": "x", "timestamp": "now"}]}), "$.records[0].timestamp"),
    (_body({"records": [{"value": "x", "headers": [{"value": "no key"}]}]}), "$.records[0].headers[0]"),
    (_body({"records": [{"value": "x", "colour": "red"}]}), "unknown field `colour`"),
    (_body({"records": [], "encoding": "latin1"}), "$.encoding"),
    (_body({"records": [{"value": "x"}], "extra": 1}), "unknown field `extra`"),
    (_body({"producer_id": 1, "producer_epoch": 40000, "batches": []}), "$.producer_epoch"),
    (_body({"producer_id": 1, "producer_epoch": 0, "batches": [{"partition": 0, "records": []}]}),
     "base_sequence"),
    (_body({"producer_id": 1, "producer_epoch": 0, "batches": [
        {"partition": 0, "base_sequence": 0, "records": [{"value": "a", "partition": 1}]}]}),
     "unknown field `partition` - at `$.batches[0].records[0]`"),  # idempotent records take the batch's
]


@pytest.mark.parametrize("body, where", BAD)
def test_bad_bodies_name_the_problem(body: bytes, where: str) -> None:
    with pytest.raises(MalformedBody) as e:
        decode_produce(body)
    assert str(e.value).startswith("malformed produce request")
    assert where in str(e.value)


def test_openapi_schema_documents_both_forms() -> None:
    components = openapi_components()
    refs = [alt["$ref"] for alt in components["ProduceBody"]["anyOf"]]
    assert refs == ["#/components/schemas/SimpleProduce", "#/components/schemas/IdempotentProduce"]
    simple = components["SimpleProduce"]
    assert simple["additionalProperties"] is False and simple["required"] == ["records"]
    partition = components["SimpleRecordIn"]["properties"]["partition"]
    bounds = [alt for alt in partition["anyOf"] if alt.get("type") == "integer"][0]
    assert (bounds["minimum"], bounds["maximum"]) == (0, 2**31 - 1)
