"""``error_for_code``: every typed error of lakelog.errors is found by its Kafka code, one class per code."""

from __future__ import annotations

import inspect

import lakelog.errors as errors
from lakelog.errors import KafkaError, UnknownServerError, error_for_code


def test_every_error_class_is_found_by_its_code_and_codes_are_unique():
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)
               if issubclass(c, KafkaError) and c is not KafkaError]
    codes = [c.code for c in classes]
    assert len(codes) == len(set(codes)), sorted(codes)
    for cls in classes:
        err = error_for_code(cls.code, "m")
        assert type(err) is cls and err.message == "m" and err.name == cls.name


def test_an_unknown_code_is_an_unknown_server_error():
    assert type(error_for_code(9999)) is UnknownServerError
