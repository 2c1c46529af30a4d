"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-257): entities, their configs, Kafka's validation and precedence.

An entity is a user, a client id, or both (or an ip, for connection rates),
each named or the ``<default>`` (name None).  Its configs: ``producer_byte_rate``
and ``consumer_byte_rate`` (bytes/s), ``request_percentage`` (percent of one
request thread's time), ``controller_mutation_rate`` (partition mutations/s);
``connection_creation_rate`` for ips.  Which entity's quota applies to a
(user, client id) is Kafka's ``DefaultQuotaCallback`` order (:func:`resolve`);
its metric tags say who shares the quota: a default quota applies to each
user or client id on its own, never to all of them together. Pure.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from lakelog.errors import InvalidRequest, UnsupportedVersion

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
#: key -> Kafka's ConfigDef type (QuotaConfig.userAndClientQuotaConfigs / ipConfigs)
USER_CLIENT_KEYS = {PRODUCER_BYTE_RATE: "long", CONSUMER_BYTE_RATE: "long", REQUEST_PERCENTAGE: "double",
                    CONTROLLER_MUTATION_RATE: "double"}
IP_KEYS = {CONNECTION_CREATION_RATE: "int"}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

Entity = tuple[tuple[str, "str | None"], ...]  # (type, name or None for <default>), sorted by type
Quotas = Mapping[Entity, Mapping[str, float]]


def entity_of(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """An entity from (type, name) pairs, validated as Kafka's ``ClientQuotaControlManager`` does."""
    seen: dict[str, str | None] = {}
    for entity_type, name in pairs:
        if entity_type in seen:
            raise InvalidRequest(f"Invalid client quota entity, duplicate entity entry {entity_type}")
        if entity_type not in (USER, CLIENT_ID, IP):
            raise InvalidRequest(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            raise InvalidRequest(f"Empty {entity_type} not supported")
        seen[entity_type] = name
    if not seen:
        raise InvalidRequest("Invalid empty client quota entity")
    if IP in seen:
        if len(seen) > 1:
            raise InvalidRequest("Invalid quota entity combination, IP entity shouldnot be combined with User or "
                                 "ClientId")
        if seen[IP] is not None and not _valid_ip(seen[IP]):  # type: ignore[arg-type]
            raise InvalidRequest(f"{seen[IP]} is not a valid IP or resolvable host.")
    return tuple(sorted(seen.items()))


def _valid_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def keys_for(entity: Entity) -> dict[str, str]:
    return IP_KEYS if entity[0][0] == IP else USER_CLIENT_KEYS


def check_alteration(entity: Entity, ops: Sequence[tuple[str, float | None]]) -> dict[str, float | None]:
    """The changes of one AlterClientQuotas entry (key -> value, None to remove), Kafka's validation applied."""
    changes: dict[str, float | None] = {}
    for key, _ in ops:
        if key in changes:
            raise InvalidRequest(f"Duplicate quota key {key} not updating quota for this entity {describe(entity)}")
        changes[key] = None
    keys = keys_for(entity)
    for key, value in ops:
        changes[key] = value
        if value is None:
            continue
        kind = keys.get(key)
        if kind is None:
            raise InvalidRequest(f"Invalid configuration key {key}")
        if not value > 0.0:
            raise InvalidRequest(f"Quota {key} must be greater than 0")
        if kind in ("long", "int"):
            if value > (2**63 - 1 if kind == "long" else 2**31 - 1):
                raise InvalidRequest(f"Proposed value for {key} is too large for {'a LONG' if kind == 'long' else 'an INT'}.")
            if math.isinf(value) or abs(math.fmod(value, 1.0)) > 1e-6:
                raise InvalidRequest(f"{key} cannot be a fractional value.")
    return changes


def altered(quotas: Quotas, entity: Entity, changes: Mapping[str, float | None]) -> dict[Entity, dict[str, float]]:
    """``quotas`` with one entity's changes applied (an entity left without keys is gone). Pure."""
    out = {e: dict(v) for e, v in quotas.items()}
    values = out.setdefault(entity, {})
    for key, value in changes.items():
        if value is None:
            values.pop(key, None)
        else:
            values[key] = float(value)
    if not values:
        del out[entity]
    return out


def describe(entity: Entity) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


@dataclass(frozen=True)
class Component:
    """One DescribeClientQuotas filter component."""

    entity_type: str
    match_type: int
    match: str | None = None


def matching(quotas: Quotas, components: Sequence[Component], strict: bool) -> list[tuple[Entity, dict[str, float]]]:
    """The entities DescribeClientQuotas answers for a filter, as Kafka's ``ClientQuotasImage.describe``."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for c in components:
        if not c.entity_type:
            raise InvalidRequest("Invalid empty entity type.")
        if c.entity_type in exact or c.entity_type in typed:
            raise InvalidRequest(f"Entity type {c.entity_type} cannot appear more than once in the filter.")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise UnsupportedVersion(f"Unsupported entity type {c.entity_type}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise InvalidRequest("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[c.entity_type] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise InvalidRequest("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[c.entity_type] = None
        elif c.match_type == MATCH_SPECIFIED:
            if c.match is not None:
                raise InvalidRequest("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            typed.add(c.entity_type)
        else:
            raise InvalidRequest(f"Unknown match type {c.match_type}")
    if (IP in exact or IP in typed) and ({USER, CLIENT_ID} & (set(exact) | typed)):
        raise InvalidRequest("Invalid entity filter component combination. IP filter component should not be used "
                             "with user or clientId filter component.")
    out = []
    for entity, values in sorted(quotas.items(), key=lambda kv: [(t, n or "") for t, n in kv[0]]):
        names = dict(entity)
        if strict and len(names) != len(exact) + len(typed):
            continue
        if all(t in names and names[t] == n for t, n in exact.items()) and all(t in names for t in typed):
            out.append((entity, dict(values)))
    return out


def resolve(quotas: Quotas, key: str, user: str, client_id: str) -> tuple[float | None, tuple[str, str]]:
    """(limit, metric tags) of ``key`` for a request of ``user`` (a principal's name, without ``User:``) with
    ``client_id``: Kafka's ``DefaultQuotaCallback``. The tags name the sensor whose rate is compared with the
    limit: ("alice", "") when alice's user quota applies to all her clients together, ("", "app") for a
    client-id quota, ("alice", "app") for the pair. None: no quota of this key applies."""

    def has(*pairs: tuple[str, str | None]) -> bool:
        values = quotas.get(tuple(sorted(pairs)))
        return values is not None and key in values

    u, c = (USER, user), (CLIENT_ID, client_id)
    du, dc = (USER, None), (CLIENT_ID, None)
    if has(u, c) or has(u, dc):
        tags = (user, client_id)
    elif has(u):
        tags = (user, "")
    elif has(du, c) or has(du, dc):
        tags = (user, client_id)
    elif has(du):
        tags = (user, "")
    else:
        tags = ("", client_id)
    return _limit(quotas, key, *tags), tags


def _limit(quotas: Quotas, key: str, user: str, client_id: str) -> float | None:
    def get(*pairs: tuple[str, str | None]) -> float | None:
        values = quotas.get(tuple(sorted(pairs)))
        return None if values is None else values.get(key)

    u, c = (USER, user), (CLIENT_ID, client_id)
    du, dc = (USER, None), (CLIENT_ID, None)
    if user and client_id:
        for candidate in ((u, c), (u, dc), (du, c), (du, dc)):
            found = get(*candidate)
            if found is not None:
                return found
        return None
    if user:
        found = get(u)
        return found if found is not None else get(du)
    if client_id:
        found = get(c)
        return found if found is not None else get(dc)
    return None


def enabled_keys(quotas: Quotas) -> frozenset[str]:
    """The quota keys set on any entity: recording for a key starts once one is."""
    return frozenset(k for values in quotas.values() for k in values)
