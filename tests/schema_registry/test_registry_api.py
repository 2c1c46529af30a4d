"""The Schema Registry REST API as Confluent documents it, route by route, against a real front.

Requests are raw (httpx) where the answer's exact code matters, and confluent-kafka's ``SchemaRegistryClient``
where a real client's view does. The compatibility-level matrix uses Confluent's own ``AvroCompatibilityTest``
schemas (as Karapace's suite carries them) registered in order under each level.
"""

from __future__ import annotations

import json
import uuid

import pytest

S1 = {"type": "record", "name": "myrecord", "fields": [{"type": "string", "name": "f1"}]}
S2 = {"type": "record", "name": "myrecord",
      "fields": [{"type": "string", "name": "f1"}, {"type": "string", "name": "f2", "default": "foo"}]}
S3 = {"type": "record", "name": "myrecord", "fields": [{"type": "string", "name": "f1"}, {"type": "string", "name": "f2"}]}
S4 = {"type": "record", "name": "myrecord", "fields": [{"type": "string", "name": "f1_new", "aliases": ["f1"]}]}
S6 = {"type": "record", "name": "myrecord", "fields": [{"type": ["null", "string"], "name": "f1", "doc": "doc of f1"}]}
S7 = {"type": "record", "name": "myrecord",
      "fields": [{"type": ["null", "string", "int"], "name": "f1", "doc": "doc of f1"}]}
S8 = {"type": "record", "name": "myrecord", "fields": [
    {"type": "string", "name": "f1"}, {"type": "string", "name": "f2", "default": "foo"},
    {"type": "string", "name": "f3", "default": "bar"}]}


def register(sr, subject, schema, schema_type=None, references=None, **params):
    body = {"schema": schema if isinstance(schema, str) else json.dumps(schema)}
    if schema_type:
        body["schemaType"] = schema_type
    if references:
        body["references"] = references
    return sr.post(f"/subjects/{subject}/versions", json=body, params=params)


def set_level(sr, subject, level):
    r = sr.put(f"/config/{subject}", json={"compatibility": level})
    assert r.status_code == 200 and r.json() == {"compatibility": level}, r.text


# Confluent's AvroCompatibilityTest: (level, schemas registered in order, the last one's expected status)
LEVEL_MATRIX = [
    ("BACKWARD", [S1, S2], 200),  # adding a field with a default
    ("BACKWARD", [S1, S3], 409),  # adding a field without a default
    ("BACKWARD", [S1, S4], 200),  # renaming a field with an alias
    ("BACKWARD", [S1, S6], 200),  # evolving a field to a union
    ("BACKWARD", [S6, S1], 409),  # removing a type from a union
    ("BACKWARD", [S6, S7], 200),  # adding a type to a union
    ("BACKWARD", [S7, S6], 409),
    ("BACKWARD_TRANSITIVE", [S1, S2, S8], 200),  # adding fields with defaults, step by step
    ("BACKWARD", [S1, S2, S3], 200),  # removing a default: compatible with the latest only
    ("BACKWARD_TRANSITIVE", [S1, S2, S3], 409),  # ... not with every version
    ("FORWARD", [S1, S2], 200),
    ("FORWARD", [S1, S3], 200),  # adding a field is forward compatible
    ("FORWARD", [S2, S3], 200),
    ("FORWARD", [S3, S2], 200),
    ("FORWARD", [S2, S1], 200),  # removing a field with a default
    ("FORWARD_TRANSITIVE", [S1, S2, S3], 200),
    ("FORWARD", [S3, S1], 409),  # removing a field without a default
    ("FORWARD_TRANSITIVE", [S3, S2, S1], 409),  # ... through a version that added one
    ("FORWARD", [S3, S2, S1], 200),
    ("FULL", [S1, S2], 200),  # adding a field with a default
    ("FULL", [S2, S1], 200),  # removing a field with a default
    ("FULL", [S1, S3], 409),  # adding a field without a default
    ("FULL", [S3, S1], 409),  # removing one
    ("FULL_TRANSITIVE", [S1, S2, S8], 200),
    ("FULL", [S1, S2, S3], 200),
    ("FULL_TRANSITIVE", [S1, S2, S3], 409),
    ("NONE", [S1, S3], 200),
    ("NONE", [S1, {"type": "string"}], 200),
]


@pytest.mark.parametrize("level,schemas,status", LEVEL_MATRIX, ids=[f"{i}-{m[0]}" for i, m in enumerate(LEVEL_MATRIX)])
def test_compatibility_level_matrix(sr, subject, level, schemas, status):
    set_level(sr, subject, level)
    for schema in schemas[:-1]:
        assert register(sr, subject, schema).status_code == 200
    r = register(sr, subject, schemas[-1])
    assert r.status_code == status, r.text
    if status == 409:
        assert r.json()["error_code"] == 409 and level in r.json()["message"]
        assert sr.get(f"/subjects/{subject}/versions").json() == list(range(1, len(schemas)))
    else:
        assert sr.get(f"/subjects/{subject}/versions").json() == list(range(1, len(schemas) + 1))


def test_ids_are_global_and_stable(sr, client):
    a, b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    schema = {"type": "record", "name": f"r{uuid.uuid4().hex[:8]}", "fields": [{"name": "x", "type": "int"}]}
    first = register(sr, a, schema).json()["id"]
    assert register(sr, a, schema).json()["id"] == first  # the same schema again: the same id, no new version
    assert register(sr, b, schema).json()["id"] == first  # under another subject: the same id
    assert sr.get(f"/subjects/{a}/versions").json() == [1]
    # the same schema written differently (whitespace, key order) is the same schema
    spaced = json.dumps({"fields": [{"type": "int", "name": "x"}], "name": schema["name"], "type": "record"}, indent=2)
    assert register(sr, a, spaced).json()["id"] == first
    other = register(sr, a, {**schema, "fields": [{"name": "x", "type": "int"}, {"name": "y", "type": "int",
                                                                                   "default": 0}]}).json()["id"]
    assert other > first
    got = sr.get(f"/schemas/ids/{first}")
    assert got.status_code == 200 and got.headers["content-type"].startswith("application/vnd.schemaregistry.v1+json")
    assert json.loads(got.json()["schema"]) == schema and "schemaType" not in got.json()
    assert sorted(sr.get(f"/schemas/ids/{first}/subjects").json()) == sorted([a, b])
    assert {(v["subject"], v["version"]) for v in sr.get(f"/schemas/ids/{first}/versions").json()} == {(a, 1), (b, 1)}
    assert sr.get(f"/schemas/ids/{first}", params={"fetchMaxId": "true"}).json()["maxId"] >= other
    assert client.get_schema(first).schema_str == got.json()["schema"]
    assert client.get_latest_version(a).version == 2


def test_subject_and_version_reads(sr, subject):
    ids = [register(sr, subject, s).json()["id"] for s in (S1, S2, S8)]
    assert subject in sr.get("/subjects").json()
    assert subject in sr.get("/subjects", params={"subjectPrefix": subject[:6]}).json()
    assert sr.get("/subjects", params={"subjectPrefix": "zz-none-"}).json() == []
    for version, sid in zip((1, 2, 3), ids):
        body = sr.get(f"/subjects/{subject}/versions/{version}").json()
        assert (body["subject"], body["version"], body["id"]) == (subject, version, sid)
    latest = sr.get(f"/subjects/{subject}/versions/latest").json()
    assert latest["version"] == 3 and sr.get(f"/subjects/{subject}/versions/-1").json() == latest
    assert json.loads(sr.get(f"/subjects/{subject}/versions/2/schema").text) == S2
    found = sr.post(f"/subjects/{subject}", json={"schema": json.dumps(S2)}).json()
    assert (found["version"], found["id"]) == (2, ids[1])
    listed = [s for s in sr.get("/schemas", params={"subjectPrefix": subject}).json()]
    assert [s["version"] for s in listed] == [1, 2, 3]
    assert [s["version"] for s in sr.get("/schemas", params={"subjectPrefix": subject, "latestOnly": "true"}).json()] \
        == [3]
    assert sr.get("/schemas/types").json() == ["JSON", "PROTOBUF", "AVRO"]
    assert sr.get("").json() == {}


@pytest.mark.parametrize("method,path,body,status,code", [
    ("GET", "/subjects/nobody-{u}/versions", None, 404, 40401),
    ("GET", "/subjects/nobody-{u}/versions/1", None, 404, 40401),
    ("GET", "/subjects/{s}/versions/9", None, 404, 40402),
    ("GET", "/schemas/ids/987654", None, 404, 40403),
    ("GET", "/schemas/ids/not-a-number", None, 404, 40403),
    ("POST", "/subjects/{s}", {"schema": '"int"'}, 404, 40403),
    ("POST", "/subjects/nobody-{u}", {"schema": '"int"'}, 404, 40401),
    ("GET", "/subjects/{s}/versions/0", None, 422, 42202),
    ("GET", "/subjects/{s}/versions/abc", None, 422, 42202),
    ("POST", "/subjects/{s}/versions", {"schema": "{not json"}, 422, 42201),
    ("POST", "/subjects/{s}/versions", {"schema": '{"type":"record","name":"r"}'}, 422, 42201),
    ("POST", "/subjects/{s}/versions", {"schema": '{"type":"strin"}', "schemaType": "JSON"}, 422, 42201),
    ("POST", "/subjects/{s}/versions", {"schema": "message {", "schemaType": "PROTOBUF"}, 422, 42201),
    ("POST", "/subjects/{s}/versions", {"schema": '"int"', "schemaType": "XML"}, 422, 422),
    ("POST", "/subjects/{s}/versions", {"schema": 5}, 422, 422),
    ("POST", "/subjects/{s}/versions", {"schema": '"int"', "references": [{"name": "x"}]}, 422, 422),
    ("POST", "/subjects/{s}/versions",
     {"schema": '"int"', "references": [{"name": "x", "subject": "nobody", "version": 1}]}, 422, 42201),
    ("PUT", "/config/{s}", {"compatibility": "SIDEWAYS"}, 422, 42203),
    ("PUT", "/mode/{s}", {"mode": "WRITEONLY"}, 422, 42204),
    ("GET", "/config/{s}", None, 404, 40408),
    ("GET", "/mode/{s}", None, 404, 40409),
    ("GET", "/no/such/route", None, 404, 404),
])
def test_error_codes(sr, subject, method, path, body, status, code):
    assert register(sr, subject, S1).status_code == 200
    r = sr.request(method, path.format(s=subject, u=uuid.uuid4().hex[:6]), json=body)
    assert (r.status_code, r.json()["error_code"]) == (status, code), r.text
    assert isinstance(r.json()["message"], str) and "Traceback" not in r.text and "/tmp" not in r.text


def test_malformed_bodies_are_422(sr, subject):
    for raw in (b"", b"[1,2]", b"{", b"\xff\xfe", b"[" * 10_000 + b"]" * 10_000):
        r = sr.post(f"/subjects/{subject}/versions", content=raw, headers={"content-type": "application/json"})
        assert (r.status_code, r.json()["error_code"]) == (422, 422), (raw[:20], r.text)
    assert sr.get("/subjects").status_code == 200  # the front is up


def test_soft_and_hard_deletes(sr, subject, client):
    ids = [register(sr, subject, s).json()["id"] for s in (S1, S2, S8)]
    # a version: soft first, then permanently
    assert sr.delete(f"/subjects/{subject}/versions/2", params={"permanent": "true"}).json()["error_code"] == 40407
    assert sr.delete(f"/subjects/{subject}/versions/2").json() == 2
    assert sr.delete(f"/subjects/{subject}/versions/2").json()["error_code"] == 40406
    assert sr.get(f"/subjects/{subject}/versions").json() == [1, 3]
    assert sr.get(f"/subjects/{subject}/versions", params={"deleted": "true"}).json() == [1, 2, 3]
    assert sr.get(f"/subjects/{subject}/versions/2").json()["error_code"] == 40402
    assert sr.get(f"/subjects/{subject}/versions/2", params={"deleted": "true"}).json()["id"] == ids[1]
    assert sr.get(f"/schemas/ids/{ids[1]}").status_code == 200  # a soft-deleted schema keeps its id
    assert sr.delete(f"/subjects/{subject}/versions/2", params={"permanent": "true"}).json() == 2
    assert sr.get(f"/subjects/{subject}/versions", params={"deleted": "true"}).json() == [1, 3]
    # the subject: soft, then permanently
    assert sr.delete(f"/subjects/{subject}", params={"permanent": "true"}).json()["error_code"] == 40405
    assert sr.delete(f"/subjects/{subject}").json() == [1, 3]
    assert sr.delete(f"/subjects/{subject}").json()["error_code"] == 40404
    assert subject not in sr.get("/subjects").json()
    assert subject in sr.get("/subjects", params={"deleted": "true"}).json()
    assert subject in sr.get("/subjects", params={"deletedOnly": "true"}).json()
    assert sr.get(f"/subjects/{subject}/versions").json()["error_code"] == 40401
    # registering again continues the version numbers, with the same id for the same schema
    assert register(sr, subject, S1).json()["id"] == ids[0]
    assert sr.get(f"/subjects/{subject}/versions").json() == [4]
    assert sr.delete(f"/subjects/{subject}").json() == [4]
    assert sr.delete(f"/subjects/{subject}", params={"permanent": "true"}).json() == [1, 3, 4]
    assert subject not in sr.get("/subjects", params={"deleted": "true"}).json()
    assert sr.delete(f"/subjects/{subject}").json()["error_code"] == 40401
    assert register(sr, subject, S1).status_code == 200
    assert sr.get(f"/subjects/{subject}/versions").json() == [1]  # a subject deleted for good starts over


def test_references_and_referenced_versions_cannot_be_deleted(sr, subject):
    base = f"{subject}-customer"
    customer = {"type": "record", "name": "Customer", "namespace": "com.acme", "fields": [{"name": "n", "type": "string"}]}
    cid = register(sr, base, customer).json()["id"]
    order = {"type": "record", "name": "Order", "fields": [{"name": "c", "type": "com.acme.Customer"}]}
    refs = [{"name": "com.acme.Customer", "subject": base, "version": 1}]
    r = register(sr, subject, order, references=refs)
    assert r.status_code == 200, r.text
    oid = r.json()["id"]
    body = sr.get(f"/schemas/ids/{oid}").json()
    assert body["references"] == refs
    assert sr.get(f"/subjects/{base}/versions/1/referencedby").json() == [oid]
    assert sr.delete(f"/subjects/{base}/versions/1").json()["error_code"] == 42206
    assert sr.delete(f"/subjects/{base}").json()["error_code"] == 42206
    assert sr.get(f"/schemas/ids/{cid}").status_code == 200
    # a reference to a version that does not exist is an invalid schema
    bad = register(sr, f"{subject}-2", order, references=[{"name": "com.acme.Customer", "subject": base, "version": 7}])
    assert bad.json()["error_code"] == 42201


def test_global_and_subject_levels(sr, subject):
    assert sr.get("/config").json() == {"compatibilityLevel": "BACKWARD"}
    assert sr.get(f"/config/{subject}", params={"defaultToGlobal": "true"}).json() == {"compatibilityLevel": "BACKWARD"}
    set_level(sr, subject, "NONE")
    assert sr.get(f"/config/{subject}").json() == {"compatibilityLevel": "NONE"}
    assert register(sr, subject, S1).status_code == 200
    assert register(sr, subject, S3).status_code == 200  # NONE: anything goes
    assert sr.delete(f"/config/{subject}").json() == {"compatibilityLevel": "NONE"}
    assert register(sr, subject, S1).status_code == 200  # S1 is version 1 already: its id, no check
    assert register(sr, subject, {**S3, "fields": S3["fields"] + [{"name": "f9", "type": "int"}]}).status_code == 409
    compat = sr.post(f"/compatibility/subjects/{subject}/versions/latest", params={"verbose": "true"},
                     json={"schema": json.dumps(S3 | {"fields": S3["fields"] + [{"name": "f9", "type": "int"}]})})
    assert compat.json()["is_compatible"] is False and compat.json()["messages"]
    ok = sr.post(f"/compatibility/subjects/{subject}/versions", json={"schema": json.dumps(S3)})
    assert ok.json() == {"is_compatible": True}


def test_modes(sr, subject):
    assert sr.get("/mode").json() == {"mode": "READWRITE"}
    assert register(sr, subject, S1).status_code == 200
    assert sr.put(f"/mode/{subject}", json={"mode": "READONLY"}).json() == {"mode": "READONLY"}
    r = register(sr, subject, S2)
    assert (r.status_code, r.json()["error_code"]) == (422, 42205)
    assert sr.delete(f"/subjects/{subject}/versions/1").json()["error_code"] == 42205
    assert sr.get(f"/subjects/{subject}/versions").json() == [1]  # reads still work
    assert sr.delete(f"/mode/{subject}").json() == {"mode": "READONLY"}
    assert register(sr, subject, S2).status_code == 200
    # IMPORT: only on an empty subject (or with force), and schemas come with their ids
    fresh = f"{subject}-import"
    assert sr.put(f"/mode/{subject}", json={"mode": "IMPORT"}).json()["error_code"] == 42205
    assert sr.put(f"/mode/{fresh}", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
    r = sr.post(f"/subjects/{fresh}/versions", json={"schema": json.dumps(S3), "id": 77000, "version": 5})
    assert r.json() == {"id": 77000}, r.text
    assert sr.get(f"/subjects/{fresh}/versions").json() == [5]
    clash = sr.post(f"/subjects/{fresh}/versions", json={"schema": json.dumps(S8), "id": 77000, "version": 6})
    assert clash.json()["error_code"] == 42207
    assert register(sr, subject, S8, id=1).status_code == 200  # (query parameters are not the body's id)
    assert sr.post(f"/subjects/{subject}/versions", json={"schema": json.dumps(S8), "id": 88000}).json()[
        "error_code"] == 42205  # an id outside IMPORT mode


def test_json_schema_and_protobuf_with_references(sr, subject):
    customer = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    assert register(sr, f"{subject}-c", customer, "JSON").status_code == 200
    order = {"type": "object", "properties": {"c": {"$ref": "customer.json"}, "n": {"type": "integer"}}}
    r = register(sr, subject, order, "JSON", [{"name": "customer.json", "subject": f"{subject}-c", "version": 1}])
    assert r.status_code == 200, r.text
    assert sr.get(f"/schemas/ids/{r.json()['id']}").json()["schemaType"] == "JSON"
    proto_dep = 'syntax = "proto3";\npackage acme;\nmessage Money { int64 cents = 1; }\n'
    assert register(sr, f"{subject}-money", proto_dep, "PROTOBUF").status_code == 200
    proto = ('syntax = "proto3";\npackage acme;\nimport "money.proto";\n'
             'message Order { string id = 1; acme.Money total = 2; }\n')
    r = register(sr, f"{subject}-pb", proto, "PROTOBUF", [{"name": "money.proto", "subject": f"{subject}-money",
                                                           "version": 1}])
    assert r.status_code == 200, r.text
    serialized = sr.get(f"/schemas/ids/{r.json()['id']}", params={"format": "serialized"}).json()["schema"]
    from google.protobuf import descriptor_pb2
    import base64

    fd = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert [m.name for m in fd.message_type] == ["Order"] and list(fd.dependency) == ["money.proto"]
    # Protobuf's compatibility: a field's type changes
    changed = proto.replace("string id = 1", "int64 id = 1")
    bad = register(sr, f"{subject}-pb", changed, "PROTOBUF", [{"name": "money.proto", "subject": f"{subject}-money",
                                                               "version": 1}])
    assert bad.json()["error_code"] == 409 and "FIELD_KIND_ALTER" in bad.json()["message"]


def test_registry_is_shared_by_every_front(front, sr, subject, tmp_path):
    """A second front on the same root sees what the first registered, and ids stay unique when both write."""
    import httpx
    from concurrent.futures import ThreadPoolExecutor

    from front_process import Front

    other = Front(front.root, tmp_path).start()
    try:
        with httpx.Client(base_url=other.url + "/schema-registry", timeout=60) as sr2:
            sid = register(sr, subject, S1).json()["id"]
            assert sr2.get(f"/schemas/ids/{sid}").status_code == 200
            assert sr2.get(f"/subjects/{subject}/versions").json() == [1]

            def reg(i):
                client = sr if i % 2 else sr2
                schema = {"type": "record", "name": f"n{uuid.uuid4().hex[:8]}", "fields": [{"name": "x", "type": "int"}]}
                return register(client, f"{subject}-{i}", schema).json()["id"]

            with ThreadPoolExecutor(8) as pool:
                ids = list(pool.map(reg, range(16)))
            assert len(set(ids)) == 16
            for i, schema_id in enumerate(ids):  # both fronts agree on every id
                a, b = sr.get(f"/schemas/ids/{schema_id}").json(), sr2.get(f"/schemas/ids/{schema_id}").json()
                assert a == b
    finally:
        other.stop()
