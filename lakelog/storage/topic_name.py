"""Kafka's topic-name rules (``org.apache.kafka.common.internals.Topic.validate``)."""

from __future__ import annotations

import re

from lakelog.errors import InvalidTopic

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
INTERNAL_PREFIX = "__"
#: The Schema Registry's store (Confluent's ``kafkastore.topic`` default): internal here -- written only by the
#: registry, which needs every record of it to be its own (lakelog/schema_registry/schema_registry.py).
SCHEMAS_TOPIC = "_schemas"


def validate_topic_name(name: object) -> str:
    """Return ``name`` if it is a legal topic name, else raise :class:`InvalidTopic`.

    Legal: 1..249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``.  This
    also rules out every path trick (``/``, ``\\``, ``..`` components, NUL).
    """
    if not isinstance(name, str) or not name:
        raise InvalidTopic(f"Topic name {name!r} is illegal: it must be a non-empty string")
    if name in (".", ".."):
        raise InvalidTopic(f"Topic name {name!r} is illegal: it cannot be '.' or '..'")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopic(f"Topic name is illegal: it is {len(name)} characters long, the limit is {MAX_NAME_LENGTH}")
    if not _LEGAL.fullmatch(name):
        raise InvalidTopic(
            f"Topic name {name!r} is illegal: it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        )
    return name


def is_kafka_internal(name: str) -> bool:
    """Kafka's own internal topics (``__consumer_offsets``): Kafka's Metadata lists them among all topics and marks
    them internal, so clients' regex subscriptions skip them (franz-go's TestConsumeRegex checks it); to Kafka,
    ``_schemas`` is an ordinary topic."""
    return name.startswith(INTERNAL_PREFIX)


def is_internal(name: str) -> bool:
    """Internal topics (``__consumer_offsets``, ``_schemas``) are hidden from ``topics list`` by default, take no
    produce requests from clients and are not leased."""
    return name.startswith(INTERNAL_PREFIX) or name == SCHEMAS_TOPIC
