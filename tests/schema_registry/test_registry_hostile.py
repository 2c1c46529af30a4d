"""Hostile requests to the Schema Registry routes of a real front: random paths, query strings and bodies
(valid JSON of the wrong shapes, schemas of every type that are not schemas, huge and deeply nested text).
Every answer is Confluent's error body with a 4xx code -- never a 5xx, a trace or a path -- and the front
keeps serving."""

from __future__ import annotations

import json
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROUTES = [("POST", "/subjects/{s}/versions"), ("POST", "/subjects/{s}"), ("GET", "/subjects/{s}/versions/{v}"),
          ("DELETE", "/subjects/{s}/versions/{v}"), ("DELETE", "/subjects/{s}"), ("GET", "/schemas/ids/{v}"),
          ("POST", "/compatibility/subjects/{s}/versions/{v}"), ("PUT", "/config/{s}"), ("PUT", "/mode/{s}"),
          ("GET", "/subjects/{s}/versions/{v}/referencedby"), ("GET", "/config/{s}"), ("DELETE", "/mode/{s}")]
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
                           lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=10), c, max_size=4),
                           max_leaves=15)
schema_texts = st.one_of(st.text(max_size=200), json_values.map(json.dumps),
                         st.sampled_from(['{"type":"record","name":"r","fields":[{"name":"a"}]}', '"nope"',
                                          'syntax = "proto3"; message {', '{"type": 5}', "[" * 3000 + "]" * 3000,
                                          '{"$ref": "http://169.254.169.254/latest"}', '{"type":"enum","name":"e"}']))
bodies = st.one_of(
    st.fixed_dictionaries({"schema": schema_texts}, optional={
        "schemaType": st.sampled_from(["AVRO", "JSON", "PROTOBUF", "avro", "XML", 7]),
        "references": st.one_of(json_values, st.lists(st.fixed_dictionaries(
            {"name": st.text(max_size=8), "subject": st.text(max_size=8), "version": st.integers(-3, 3)}), max_size=3)),
        "id": json_values, "version": json_values, "compatibility": json_values, "mode": json_values}),
    json_values)
names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20).filter(
    lambda s: s not in (".", "..")).map(lambda s: quote(s, safe=""))  # any character, percent-encoded


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(route=st.sampled_from(ROUTES), subject=names, version=st.one_of(names, st.integers(-5, 10 ** 12).map(str)),
       body=bodies, flags=st.dictionaries(st.sampled_from(["deleted", "permanent", "normalize", "verbose", "force",
                                                          "defaultToGlobal", "format"]), st.text(max_size=6)))
def test_hostile_requests_get_confluent_errors(front, sr, route, subject, version, body, flags):
    method, path = route
    r = sr.request(method, path.format(s=subject, v=version), json=body if method in ("POST", "PUT") else None,
                   params=flags)
    assert r.status_code < 500, (method, path, subject, version, body, r.status_code, r.text)
    if r.status_code >= 400:
        err = r.json()
        assert isinstance(err.get("error_code"), int) and isinstance(err.get("message"), str), r.text
        assert "Traceback" not in r.text and "/tmp/" not in r.text and front.root not in r.text


def test_the_front_survives(front, sr):
    assert sr.get("/subjects").status_code == 200
    assert sr.post("/subjects/survivor-value/versions", json={"schema": '"string"'}).status_code == 200
