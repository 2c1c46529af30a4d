"""Broker configs as DescribeConfigs, AlterConfigs and IncrementalAlterConfigs see them for a front.

A front's own settings (``lakelog serve`` flags: ``auto.create.topics.enable``,
``num.partitions``, the quota windows ...) are read-only broker configs, as they
are in Kafka, and so is every key a Kafka broker does not update dynamically;
changing one answers ``INVALID_REQUEST`` ("Cannot update these configs
dynamically"). Kafka's dynamic keys (``log.retention.ms``,
``background.threads``, ``sasl.kerberos.min.time.before.relogin`` ...) and keys
Kafka does not define may be set per broker (resource name = the node id) or
cluster-wide (empty name), as in Kafka: the value is validated by the key's
Kafka type, stored in the root's cluster metadata and described back, but
lakelog acts on none of them: topic defaults stay Kafka's defaults (set configs
on topics), and Kafka's own machinery (threads, listeners, SASL) has no
counterpart.  Passwords and keys Kafka does not define are described without
their value, as Kafka describes them. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from lakelog.cluster.kafka_broker_configs import KAFKA_BROKER_CONFIG_TYPES, KAFKA_DYNAMIC_BROKER_CONFIGS
from lakelog.errors import InvalidConfig, InvalidRequest
from lakelog.storage.topic_config import (NULL_SERVER_DEFAULTS, OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT,
                                          TOPIC_CONFIGS, ConfigDef, ConfigOp, canonical, list_op, parse_value)

# Kafka's ConfigSource ids (DescribeConfigs v1+)
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5


@dataclass(frozen=True)
class BrokerSettings:
    """A front's static broker configs; ``explicit``: the keys given on the command line (described as
    ``STATIC_BROKER_CONFIG``, the others as ``DEFAULT_CONFIG``)."""

    node_id: int = 1
    auto_create_topics_enable: bool = True
    num_partitions: int = 1
    quota_window_num: int = 11
    quota_window_size_seconds: int = 1
    socket_request_max_bytes: int = 100 << 20
    explicit: frozenset[str] = field(default_factory=frozenset)

    def values(self) -> dict[str, str]:
        """Every static config's value (a broker's ``node.id`` is always set: it is never a default)."""
        return {"node.id": str(self.node_id), "broker.id": str(self.node_id),
                "auto.create.topics.enable": "true" if self.auto_create_topics_enable else "false",
                "num.partitions": str(self.num_partitions), "default.replication.factor": "1",
                "quota.window.num": str(self.quota_window_num),
                "quota.window.size.seconds": str(self.quota_window_size_seconds),
                "socket.request.max.bytes": str(self.socket_request_max_bytes)}


_STATIC = {
    "node.id": ConfigDef("node.id", "int", "1", "This front's Kafka node id (lakelog serve --node-id)."),
    "broker.id": ConfigDef("broker.id", "int", "1", "This front's Kafka node id (lakelog serve --node-id)."),
    "auto.create.topics.enable": ConfigDef("auto.create.topics.enable", "boolean", "true",
                                           "Create a topic when Metadata names one that does not exist (lakelog "
                                           "serve --auto-create-topics-enable)."),
    "num.partitions": ConfigDef("num.partitions", "int", "1", "Partitions of an auto-created topic, or of one "
                                "created with -1 partitions (lakelog serve --num-partitions)."),
    "default.replication.factor": ConfigDef("default.replication.factor", "int", "1",
                                            "Always 1: the root's storage replicates."),
    "quota.window.num": ConfigDef("quota.window.num", "int", "11", "Samples a client quota's rate is measured "
                                  "over (LAKELOG_QUOTA_WINDOW_NUM)."),
    "quota.window.size.seconds": ConfigDef("quota.window.size.seconds", "int", "1", "Length of one client quota "
                                           "sample (LAKELOG_QUOTA_WINDOW_SIZE_SECONDS)."),
    "socket.request.max.bytes": ConfigDef("socket.request.max.bytes", "int", str(100 << 20), "The largest request "
                                          "frame (lakelog serve --max-request-bytes)."),
}
_NOT_ACTED = "Stored and described; lakelog does not act on broker-level configs."
#: the broker keys that are topic configs' defaults (Kafka's ServerTopicConfigSynonyms), typed as the topic key
TOPIC_DEFAULT_KEYS: dict[str, ConfigDef] = {
    c.server_default: ConfigDef(c.server_default, c.type, "" if c.server_default in NULL_SERVER_DEFAULTS else c.default,
                                f"Kafka's broker default of {c.key}. {_NOT_ACTED}", c.check, False)
    for c in TOPIC_CONFIGS.values() if c.server_default and c.server_default not in _STATIC
}



def config_def(key: str) -> ConfigDef | None:
    """What lakelog knows of a broker key: its own settings, Kafka's topic defaults, then the type of any other
    Kafka broker config; None for a key Kafka does not define either."""
    found = _STATIC.get(key) or TOPIC_DEFAULT_KEYS.get(key)
    if found is None and key in KAFKA_BROKER_CONFIG_TYPES:
        found = ConfigDef(key, KAFKA_BROKER_CONFIG_TYPES[key], "", f"Kafka's broker config. {_NOT_ACTED}",
                          acted_on=False)
    return found


def _read_only(key: str) -> bool:
    return key in _STATIC or (key in KAFKA_BROKER_CONFIG_TYPES and key not in KAFKA_DYNAMIC_BROKER_CONFIGS)


def check_broker_name(name: str, node_id: int) -> str:
    """'' (cluster-wide) or this front's node id; ``INVALID_REQUEST`` otherwise (Kafka's messages)."""
    if not name:
        return ""
    try:
        n = int(name)
    except ValueError:
        raise InvalidRequest(f"Node id must be an integer, but it is: {name}") from None
    if n != node_id:
        raise InvalidRequest(f"Unexpected broker id, expected {node_id}, but received {name}")
    return name


def check_changes(changes: Mapping[str, str | None]) -> dict[str, str | None]:
    """Canonical values of broker config changes (None: removed). ``INVALID_REQUEST`` for a read-only key or a
    value of the wrong type, as Kafka's broker answers them (KAFKA-13609)."""
    read_only = sorted(k for k in changes if _read_only(k))
    if read_only:
        raise InvalidRequest(f"Cannot update these configs dynamically: Set({', '.join(read_only)})")
    out: dict[str, str | None] = {}
    for key, raw in changes.items():
        cdef = config_def(key)
        if raw is None or cdef is None:
            out[key] = raw
            continue
        try:
            value = parse_value(cdef, raw)
        except InvalidConfig as e:
            raise InvalidRequest(e.message) from None
        complaint = cdef.check(value)
        if complaint:
            raise InvalidRequest(f"Invalid value {raw} for configuration {key}: {complaint}")
        out[key] = canonical(cdef, value)
    return out


def apply_ops(current: Mapping[str, str], ops: Sequence[ConfigOp]) -> dict[str, str | None]:
    """The changes IncrementalAlterConfigs ``ops`` make to a broker resource's dynamic configs ``current``;
    APPEND and SUBTRACT only on keys lakelog knows to be lists (Kafka: ``INVALID_CONFIG``). Pure."""
    values: dict[str, str | None] = dict(current)
    changes: dict[str, str | None] = {}
    for o in ops:
        if o.op in (OP_SET, OP_DELETE):
            changes[o.key] = values[o.key] = o.value if o.op == OP_SET else None
            continue
        cdef = config_def(o.key)
        name = "append" if o.op == OP_APPEND else "subtract"
        if o.op not in (OP_APPEND, OP_SUBTRACT):
            raise InvalidRequest(f"Unknown operations type {o.op}")
        if cdef is None or cdef.type != "list":
            raise InvalidConfig(f"Config value {name} is not allowed for config key: {o.key}")
        changes[o.key] = values[o.key] = list_op(o, values.get(o.key), cdef.default)
    return changes


def describe(settings: BrokerSettings, name: str, cluster_dynamic: Mapping[str, str],
             broker_dynamic: Mapping[str, str], keys: Sequence[str] | None, include_synonyms: bool,
             include_documentation: bool) -> list[dict]:
    """DescribeConfigs entries of a broker resource: the cluster-wide dynamic configs for '' (Kafka describes
    only those there), every config of this front for its node id."""
    static = settings.values()
    if name:
        names = set(static) | set(TOPIC_DEFAULT_KEYS) | set(cluster_dynamic) | set(broker_dynamic)
    else:
        names = set(cluster_dynamic)
    if keys:
        names &= set(keys)
    out = []
    for key in sorted(names):
        cdef = config_def(key)
        synonyms = []
        if name and key in broker_dynamic:
            synonyms.append((key, broker_dynamic[key], DYNAMIC_BROKER_CONFIG))
        if key in cluster_dynamic:
            synonyms.append((key, cluster_dynamic[key], DYNAMIC_DEFAULT_BROKER_CONFIG))
        if name and key in static:
            synonyms.append((key, static[key], STATIC_BROKER_CONFIG if key in settings.explicit else DEFAULT_CONFIG))
        elif name and cdef is not None:
            synonyms.append((key, None if key in NULL_SERVER_DEFAULTS else cdef.default, DEFAULT_CONFIG))
        sensitive = cdef is None or cdef.type == "password"  # Kafka shows neither a password nor an unknown key
        value, source = synonyms[0][1], synonyms[0][2]
        out.append({"name": key, "value": None if sensitive else value,
                    "read_only": _read_only(key),
                    "config_source": source, "is_sensitive": sensitive,
                    "synonyms": [{"name": n, "value": None if sensitive else v, "source": s}
                                 for n, v, s in synonyms] if include_synonyms else [],
                    "config_type": cdef.type_code if cdef is not None else 0,
                    "documentation": (cdef.doc if cdef is not None else _NOT_ACTED) if include_documentation
                    else None})
    return out
