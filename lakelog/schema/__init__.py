"""Schemas of records: the Schema Registry's formats (Avro, JSON Schema, Protobuf), their compatibility rules,
Confluent's wire format, and typed columns -- a record's fields as Arrow/Delta types beside its bytes.

Pure: nothing here reads or writes storage. The registry itself (subjects, versions, ids, the ``_schemas``
topic) is :mod:`lakelog.schema_registry`; the writer types records through :func:`record_typing.type_records`.
"""
