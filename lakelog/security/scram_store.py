"""SCRAM credentials stored in the root's cluster metadata: Kafka's DescribeUserScramCredentials and
AlterUserScramCredentials over the stored credentials, and the seeding of a front's SASL file. Pure: each
function returns new values and the per-user results.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Sequence

from lakelog.errors import DuplicateResource, KafkaError, ResourceNotFound
from lakelog.security.scram import (DEFAULT_ITERATIONS, HASHES, MECHANISM_CODES, ScramCredential, check_upsertion,
                                    check_user, derive, from_salted_password, mechanism_name)

Credentials = Mapping[tuple[str, str], ScramCredential]  # (user, mechanism) -> credential


@dataclass(frozen=True)
class UserResult:
    """One user's answer: an error (None: success) and, for a describe, (mechanism code, iterations) pairs."""

    user: str
    error: KafkaError | None = None
    credentials: tuple[tuple[int, int], ...] = ()


def seed(credentials: Credentials, seeded: frozenset[tuple[str, str]], passwords: Mapping[str, str]
         ) -> tuple[dict[tuple[str, str], ScramCredential], frozenset[tuple[str, str]]]:
    """The credentials with the SASL file's users added for each mechanism not ``seeded`` before (a credential
    removed or changed through the API is never put back), and the seeded set after."""
    scram = dict(credentials)
    now = set(seeded)
    for user, password in sorted(passwords.items()):
        for mechanism in HASHES:
            if (user, mechanism) not in now:
                now.add((user, mechanism))
                scram.setdefault((user, mechanism), derive(mechanism, password, os.urandom(32), DEFAULT_ITERATIONS))
    return scram, frozenset(now)


def describe(credentials: Credentials, users: Sequence[str] | None) -> list[UserResult]:
    """Kafka's ``ScramImage.describe``: every user with a credential when ``users`` is None or empty; a user named
    twice gets ``DUPLICATE_RESOURCE``, one without credentials ``RESOURCE_NOT_FOUND``."""
    if not users:
        names = sorted({u for u, _ in credentials})
        counts = {u: 1 for u in names}
    else:
        counts = {}
        for u in users:
            counts[u] = counts.get(u, 0) + 1
        names = list(counts)
    out = []
    for user in names:
        if counts[user] > 1:
            out.append(UserResult(user, DuplicateResource(
                f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}")))
            continue
        creds = tuple((MECHANISM_CODES[m], credentials[(user, m)].iterations) for m in HASHES
                      if (user, m) in credentials)
        out.append(UserResult(user, None, creds) if creds else UserResult(user, ResourceNotFound(
            f"Attempt to describe a user credential that does not exist: {user}")))
    return out


@dataclass(frozen=True)
class Deletion:
    user: str
    mechanism: int


@dataclass(frozen=True)
class Upsertion:
    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


def alter(credentials: Credentials, deletions: Sequence[Deletion],
          upsertions: Sequence[Upsertion]) -> tuple[dict[tuple[str, str], ScramCredential], list[UserResult]]:
    """Kafka's ``ScramControlManager.alterCredentials``: a user altered twice in one request fails whole
    (``DUPLICATE_RESOURCE``); each other change is checked on its own and applied if valid. Results: deletions,
    then upsertions, then failures, as Kafka orders them."""
    errors: dict[str, KafkaError] = {}
    to_delete: dict[str, Deletion] = {}
    to_upsert: dict[str, tuple[Upsertion, str]] = {}
    twice = DuplicateResource("A user credential cannot be altered twice in the same request")
    for d in deletions:
        if d.user in errors:
            continue
        if to_delete.pop(d.user, None) is not None:
            errors[d.user] = twice
            continue
        try:
            check_user(d.user)
            mechanism = mechanism_name(d.mechanism)
            if (d.user, mechanism) not in credentials:
                raise ResourceNotFound("Attempt to delete a user credential that does not exist")
            to_delete[d.user] = d
        except KafkaError as e:
            errors[d.user] = e
    for u in upsertions:
        if u.user in errors:
            continue
        if to_delete.pop(u.user, None) is not None or to_upsert.pop(u.user, None) is not None:
            errors[u.user] = twice
            continue
        try:
            to_upsert[u.user] = (u, check_upsertion(u.user, u.mechanism, u.iterations, u.salt, u.salted_password))
        except KafkaError as e:
            errors[u.user] = e
    scram = dict(credentials)
    results = []
    for d in to_delete.values():
        del scram[(d.user, mechanism_name(d.mechanism))]
        results.append(UserResult(d.user))
    for u, mechanism in to_upsert.values():
        scram[(u.user, mechanism)] = from_salted_password(mechanism, u.salt, u.salted_password, u.iterations)
        results.append(UserResult(u.user))
    results.extend(UserResult(user, e) for user, e in errors.items())
    return scram, results
