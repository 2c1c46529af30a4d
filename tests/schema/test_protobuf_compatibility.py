"""Protobuf compatibility, pair by pair, against Confluent's rules.

The pairs and answers are Karapace's (https://github.com/Aiven-Open/karapace, Apache-2.0):
``tests/unit/compatibility/test_protobuf_checks.py`` and ``tests/unit/protobuf/test_protobuf_compatibility.py``,
recorded as (reader, writer, compatible) by running those tests against lakelog's rules (their assertions on
Karapace's internal change records aside). One case is left out: a field numbered 0, which protoc refuses as
an invalid schema (``42201``).
"""

from __future__ import annotations

import pytest

from lakelog.schema.protobuf_schema import ProtobufSchema

# (reader, writer, compatible)
CASES = [
    ('syntax = "proto3";\nmessage Person {\n  string name = 1;\n  int32 age = 2;\n}\n',
     'syntax = "proto3";\nmessage Person {\n  string name = 1;\n  int32 age = 2;\n}\n',
     True),
    ('syntax = "proto3";\nmessage Person {\n  string name = 1;\n  int32 age = 2;\n}\n',
     'syntax = "proto3";\nmessage Person {\n  string name = 1;\n}\n',
     True),
    ('syntax = "proto3";\nmessage Human {\n  string name = 1;\n}\n',
     'syntax = "proto3";\nmessage Person {\n  string name = 1;\n}\n',
     False),
    ('syntax = "proto3";\nmessage Person {\n  string name = 1;\n  string age = 2;\n}\n',
     'syntax = "proto3";\nmessage Person {\n  string name = 1;\n  int32 age = 2;\n}\n',
     False),
    ('syntax = "proto3";\nmessage Person {\n  string name = 1;\n  int32 age = 3;\n}\n',
     'syntax = "proto3";\nmessage Person {\n  string name = 1;\n  int32 age = 2;\n}\n',
     False),
    ('syntax = "proto3";\nmessage Person {\n  string name = 1;\n}\n',
     'syntax = "proto3";\nmessage Person {\n  string name = 1;\n  int32 age = 2;\n}\n',
     True),
    ('syntax = "proto3";\nmessage Holder {\n  enum Color {\n    UNKNOWN = 0;\n    RED = 1;\n    GREEN = 2;\n  }\n  Color color = 1;\n}\n',
     'syntax = "proto3";\nmessage Holder {\n  enum Color {\n    UNKNOWN = 0;\n    RED = 1;\n  }\n  Color color = 1;\n}\n',
     True),
    ('syntax = "proto3";\nmessage Person {\n  string a = 1;\n  string b = 2;\n}\n',
     'syntax = "proto3";\nmessage Person {\n  string a = 1;\n  int32 b = 2;\n}\n',
     False),
    ('syntax = "proto3";\npackage a2;\nmessage TestMessage {\n    message Value {\n        string str = 1;\n    }\n    string test = 1;\n    .a2.TestMessage.Value val = 2;\n}\n',
     'syntax = "proto3";\npackage a1;\nmessage TestMessage {\n    message Value {\n        string str = 1;\n    }\n    string test = 1;\n    .a1.TestMessage.Value val = 2;\n}\n',
     True),
    ('syntax = "proto3";\npackage a1;\nmessage TestMessage {\n    message Value {\n        string str = 1;\n        string str2 = 2;\n    }\n    string test = 1;\n    .a1.TestMessage.Value val = 2;\n}\n',
     'syntax = "proto3";\npackage a1;\nmessage TestMessage {\n    message Value {\n        string str = 1;\n    }\n    string test = 1;\n    .a1.TestMessage.Value val = 2;\n}\n',
     True),
    ('syntax = "proto3";\npackage a1;\nmessage TestMessage {\n    message Value {\n        string str = 1;\n    }\n    string test = 1;\n    .a1.TestMessage.Value val = 2;\n}\n',
     'syntax = "proto3";\npackage a1;\nmessage TestMessage {\n    message Value {\n        string str = 1;\n        string str2 = 2;\n    }\n    string test = 1;\n    .a1.TestMessage.Value val = 2;\n}\n',
     True),
    ('syntax = "proto3";\npackage a1;\nmessage TestMessage {\n    message Value {\n        string str = 1;\n    }\n    string test = 1;\n    .a1.TestMessage.Value val = 2;\n}\n',
     'syntax = "proto3";\npackage a1;\nmessage TestMessage {\n    message Value {\n        string str2 = 1;\n    }\n    string test = 1;\n    .a1.TestMessage.Value val = 2;\n}\n',
     True),
    ('syntax = "proto3";\npackage a1;\nmessage TestMessage {\n    message Value {\n        string str2 = 1;\n        Enu x = 2;\n    }\n    string test = 1;\n    .a1.TestMessage.Value val = 2;\n    enum Enu {\n        A = 0;\n        B = 1;\n    }\n}\n',
     'syntax = "proto3";\npackage a1;\nmessage TestMessage {\n    message Value {\n        string str2 = 1;\n        int32 x = 2;\n    }\n    string test = 1;\n    .a1.TestMessage.Value val = 2;\n}\n',
     True),
    ('syntax = "proto3";\npackage tc4;\n\nenum HodoCode {\n  HODO_CODE_UNSPECIFIED = 0;\n}\n\nmessage Fred {\n  HodoCode hodecode = 1;\n  string id = 2;\n}\n',
     'syntax = "proto3";\npackage tc4;\n\nmessage Fred {\n  HodoCode hodecode = 1;\n}\n\nenum HodoCode {\n  HODO_CODE_UNSPECIFIED = 0;\n}\n',
     True),
    ('syntax = "proto3";\npackage tc4;\n\nmessage Fred {\n  HodoCode hodecode = 1;\n  string id = 2;\n}\n\nenum HodoCode {\n  HODO_CODE_UNSPECIFIED = 0;\n}\n',
     'syntax = "proto3";\npackage tc4;\n\nmessage Fred {\n  HodoCode hodecode = 1;\n}\n\nenum HodoCode {\n  HODO_CODE_UNSPECIFIED = 0;\n}\n',
     True),
    ('syntax = "proto3";\npackage pkg;\nmessage Foo {\n    string fieldA = 1;\n    string fieldB = 2;\n    string fieldC = 3;\n    string fieldX = 5;\n}\n',
     'syntax = "proto3";\npackage pkg;\nmessage Foo {\n    string fieldA = 1;\n    string fieldB = 2;\n    string fieldC = 3;\n    string fieldX = 4;\n}\n',
     False),
]


@pytest.mark.parametrize("reader,writer,compatible", CASES, ids=[f"pair{i}" for i in range(len(CASES))])
def test_karapace_pair(reader, writer, compatible):
    problems = ProtobufSchema(reader).incompatibilities(ProtobufSchema(writer))
    assert (not problems) == compatible, problems


@pytest.mark.parametrize("old,new,kind", [
    ("int32 a = 1;", "int64 a = 1;", None),  # one wire-compatible group
    ("sint32 a = 1;", "sint64 a = 1;", None),
    ("string a = 1;", "bytes a = 1;", None),
    ("int32 a = 1;", "sint32 a = 1;", "FIELD_KIND_ALTER"),
    ("int32 a = 1;", "repeated int32 a = 1;", "FIELD_LABEL_ALTER"),
    ("int32 a = 1;", "int32 a = 2;", "FIELD_TAG_ALTER"),
    ("oneof o { int32 a = 1; string b = 2; }", "int32 a = 1; string b = 2;", "ONE_OF_FIELD_DROP"),
    ("int32 a = 1; string b = 2;", "oneof o { int32 a = 1; string b = 2; }", "FEW_FIELDS_CONVERTED_TO_ONE_OF"),
    ("int32 a = 1; string b = 2;", "int32 a = 1;", None),  # a field removed
    ("int32 a = 1;", "int32 renamed = 1;", None),  # a field renamed
])
def test_confluent_rules(old, new, kind):
    problems = ProtobufSchema(f'syntax = "proto3"; message M {{ {new} }}').incompatibilities(
        ProtobufSchema(f'syntax = "proto3"; message M {{ {old} }}'))
    assert (kind is None and not problems) or (kind is not None and any(kind in p for p in problems)), problems


def test_a_message_removed_breaks_readers():
    old = ProtobufSchema('syntax = "proto3"; message A { int32 x = 1; } message B { int32 y = 1; }')
    new = ProtobufSchema('syntax = "proto3"; message A { int32 x = 1; }')
    assert any("MESSAGE_DROP" in p for p in new.incompatibilities(old))
    assert not old.incompatibilities(new)
