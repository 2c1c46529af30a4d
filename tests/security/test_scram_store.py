"""SCRAM credentials in the cluster metadata: Kafka's describe and alter semantics, and the SASL file's seeding."""

from __future__ import annotations

import hashlib
import hmac

from lakelog.security.scram import derive, salted_password
from lakelog.security.scram_store import Deletion, Upsertion, alter, describe, seed

SALT = b"0123456789abcdef"


def up(user, mechanism=1, iterations=8192, password="pw"):
    name = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}.get(mechanism, "SCRAM-SHA-256")
    return Upsertion(user, mechanism, iterations, SALT, salted_password(name, password, SALT, iterations))


def codes(results):
    return {r.user: (r.error.name if r.error else None) for r in results}


def test_upsert_stores_the_keys_a_client_proof_checks_against():
    scram, results = alter({}, [], [up("alice")])
    assert codes(results) == {"alice": None}
    assert scram[("alice", "SCRAM-SHA-256")] == derive("SCRAM-SHA-256", "pw", SALT, 8192)
    cred = scram[("alice", "SCRAM-SHA-256")]
    client_key = hmac.new(salted_password("SCRAM-SHA-256", "pw", SALT, 8192), b"Client Key", hashlib.sha256).digest()
    assert hashlib.sha256(client_key).digest() == cred.stored_key


def test_kafkas_rules_per_user():
    scram, _ = alter({}, [], [up("carol")])
    scram, results = alter(scram, [Deletion("bob", 1), Deletion("carol", 1), Deletion("", 1), Deletion("dan", 9)],
                           [up("x", iterations=4095), up("y", iterations=16385), up("z", mechanism=7),
                            up("twice"), up("twice", 2), up("carol")])
    assert codes(results) == {"bob": "RESOURCE_NOT_FOUND", "carol": "DUPLICATE_RESOURCE", "": "UNACCEPTABLE_CREDENTIAL",
                              "dan": "UNSUPPORTED_SASL_MECHANISM", "x": "UNACCEPTABLE_CREDENTIAL",
                              "y": "UNACCEPTABLE_CREDENTIAL", "z": "UNSUPPORTED_SASL_MECHANISM",
                              "twice": "DUPLICATE_RESOURCE"}
    assert set(scram) == {("carol", "SCRAM-SHA-256")}


def test_describe_all_named_missing_and_duplicated():
    scram, _ = alter({}, [], [up("alice"), up("bob", 2)])
    scram, _ = alter(scram, [], [up("alice", 2, 4096)])
    assert {r.user: r.credentials for r in describe(scram, None)} == {"alice": ((1, 8192), (2, 4096)),
                                                                     "bob": ((2, 8192),)}
    assert codes(describe(scram, ["alice", "nobody", "bob", "bob"])) == {
        "alice": None, "nobody": "RESOURCE_NOT_FOUND", "bob": "DUPLICATE_RESOURCE"}


def test_seeding_adds_file_users_once_and_never_undoes_an_api_change():
    scram, seeded = seed({}, frozenset(), {"alice": "a", "bob": "b"})
    assert set(scram) == {(u, m) for u in ("alice", "bob") for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}
    scram, _ = alter(scram, [Deletion("alice", 1)], [])
    again, seeded = seed(scram, seeded, {"alice": "a", "bob": "b", "carol": "c"})
    assert ("alice", "SCRAM-SHA-256") not in again and ("carol", "SCRAM-SHA-512") in again
    assert seed(again, seeded, {"alice": "a"}) == (again, seeded)
