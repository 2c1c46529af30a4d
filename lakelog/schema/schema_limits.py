"""Bounds on what a schema may be: every schema arrives from outside, and every record of a validated topic is
decoded by one. Each bound refuses a schema bomb at registration (``42201``), before it can cost a produce
anything; the typed-column bounds refuse only typing (validation stays possible).
"""

from __future__ import annotations

#: The largest schema text accepted (Confluent's own limit is its request size; the largest schemas seen in
#: practice are a few hundred KB of Protobuf).
MAX_SCHEMA_BYTES = 1 << 20
#: Nesting of the schema document (JSON objects and arrays, or Protobuf messages) and of the records it
#: describes: deeper is a bomb, not a data model.
MAX_NESTING = 64
#: References of one schema, direct and transitive, and how deep their chain may go.
MAX_REFERENCES = 256
MAX_REFERENCE_DEPTH = 16
#: Symbols of one enum, branches of one union, fields of one schema (all records together).
MAX_ENUM_SYMBOLS = 10_000
MAX_UNION_BRANCHES = 100
MAX_FIELDS = 10_000
#: Leaf columns of a typed column (the schema expanded: a named type used twice counts twice). Above it the
#: schema still validates records, but a topic does not materialise it as columns.
MAX_TYPED_LEAVES = 2_000
#: Items of one array or map in one record whose items may take no bytes (``null``, empty records): a count
#: the payload's size does not bound.
MAX_EMPTY_ITEMS = 100_000
