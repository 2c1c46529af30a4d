"""SASL PLAIN and SCRAM-SHA-256/512 on the Kafka listener, mapped to the HTTP front's principals and ACLs;
denied operations get Kafka's authorization error codes."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from front_process import kafka_front_process
from wire_client import WireClient

AUTH = {
    "tokens": [{"principal": "User:alice", "token": "alice-token"}, {"principal": "User:admin", "token": "admin-token"}],
    "super_users": ["User:admin"],
    "acls": [
        {"principal": "User:alice", "operations": ["Write", "Read", "Describe"], "resource_type": "Topic",
         "pattern_type": "Prefixed", "resource_name": "ok-"},
        {"principal": "User:alice", "operation": "IdempotentWrite", "resource_type": "Cluster"},
        {"principal": "User:alice", "operation": "Read", "resource_type": "Group", "resource_name": "*"},
        {"principal": "User:carol", "operations": ["Write", "Read", "Describe"], "resource_type": "Topic",
         "resource_name": "*"},
        {"principal": "User:carol", "operation": "Read", "resource_type": "Group", "resource_name": "*"},
    ],
}
SASL_USERS = {"users": [{"name": "carol", "password": "carol-pass"}, {"name": "dave", "password": "dave-pass"}]}


@pytest.fixture(scope="module")
def secure_front(tmp_path_factory):
    d = tmp_path_factory.mktemp("sasl")
    (d / "auth.json").write_text(json.dumps(AUTH))
    (d / "sasl.json").write_text(json.dumps(SASL_USERS))
    f = kafka_front_process(str(d / "root"), d / "logs", args=("--sasl-file", str(d / "sasl.json")))
    f.auth_file = str(d / "auth.json")
    f.start()
    yield f
    f.stop()


def _conf(front, mechanism: str, user: str, password: str) -> dict:
    return {"bootstrap.servers": front.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def _topics(front, *names: str) -> None:
    with front.client("admin-token") as http:
        for n in names:
            assert http.post("/v1/topics", json={"name": n, "partitions": 1}).status_code == 201


def _produce(conf: dict, topic: str, **extra) -> list:
    p = Producer({**conf, "message.timeout.ms": 10000, **extra})
    results = []
    p.produce(topic, b"v", on_delivery=lambda err, msg: results.append(err))
    p.flush(20)
    return results


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "alice", "alice-token"),  # an HTTP bearer token as the password
    ("PLAIN", "carol", "carol-pass"),
    ("SCRAM-SHA-256", "carol", "carol-pass"),
    ("SCRAM-SHA-512", "carol", "carol-pass"),
])
def test_authenticated_principal_may_produce_and_consume(secure_front, mechanism, user, password):
    topic = f"ok-{uuid.uuid4().hex[:8]}"
    _topics(secure_front, topic)
    conf = _conf(secure_front, mechanism, user, password)
    extra = {"enable.idempotence": True} if user == "alice" else {}
    assert _produce(conf, topic, **extra) == [None]
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        m = None
        for _ in range(40):
            m = c.poll(0.5)
            if m is not None:
                break
        assert m is not None and m.error() is None and m.value() == b"v"
    finally:
        c.close()


def test_denied_topic_gets_topic_authorization_failed(secure_front):
    topic = f"secret-{uuid.uuid4().hex[:8]}"
    _topics(secure_front, topic)
    [err] = _produce(_conf(secure_front, "PLAIN", "alice", "alice-token"), topic)
    assert err is not None and err.name() == "TOPIC_AUTHORIZATION_FAILED"
    admin = AdminClient(_conf(secure_front, "SCRAM-SHA-256", "dave", "dave-pass"))  # dave: no ACLs at all
    name = f"ok-{uuid.uuid4().hex[:6]}"
    with pytest.raises(KafkaException) as e:
        admin.create_topics([NewTopic(name, 1)])[name].result(20)
    assert e.value.args[0].name() == "TOPIC_AUTHORIZATION_FAILED"


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "alice", "wrong"), ("PLAIN", "bob", "alice-token"),  # a token of another principal
    ("SCRAM-SHA-256", "carol", "wrong"), ("SCRAM-SHA-512", "nobody", "x"),
])
def test_bad_credentials_fail_authentication(secure_front, mechanism, user, password):
    errors = []
    p = Producer({**_conf(secure_front, mechanism, user, password), "error_cb": errors.append})
    for _ in range(40):
        p.poll(0.25)
        if errors:
            break
    assert errors and errors[0].name() == "_AUTHENTICATION", errors
    assert "authentication failed" in errors[0].str().lower()


def test_requests_before_authentication_close_the_connection(secure_front):
    with WireClient(secure_front.bootstrap) as w:
        v = w.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert v.error_code == 0  # ApiVersions is allowed before SASL
        w.send_raw(w.frame(3, 12, {"topics": None}))
        assert w.closed_by_server()
    with WireClient(secure_front.bootstrap) as w:
        r = w.request(17, 1, {"mechanism": "GSSAPI"})
        assert r.error_code == 33 and "SCRAM-SHA-512" in r.mechanisms  # UNSUPPORTED_SASL_MECHANISM


def test_unknown_scram_user_gets_a_challenge_shaped_like_a_known_users():
    """An unknown user's server-first message looks like a known user's: the same salt length and iterations,
    the same salt on every attempt, another for another user -- and the exchange then fails."""
    import base64

    from kafka_front.sasl import Credentials, ScramServer
    from lakelog.errors import SaslAuthenticationFailed

    credentials = Credentials({"carol": "carol-pass"})

    def challenge(mechanism: str, user: str) -> tuple[ScramServer, dict[str, str]]:
        server = ScramServer(mechanism, credentials)
        first = server.first(f"n,,n={user},r=abc".encode()).decode()
        return server, dict(part.split("=", 1) for part in first.split(","))

    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        _, known = challenge(mechanism, "carol")
        server, unknown = challenge(mechanism, "nobody")
        assert unknown["i"] == known["i"] == "4096"
        assert len(base64.b64decode(unknown["s"])) == len(base64.b64decode(known["s"]))
        assert challenge(mechanism, "nobody")[1]["s"] == unknown["s"] != challenge(mechanism, "somebody")[1]["s"]
        proof = base64.b64encode(bytes(32 if mechanism == "SCRAM-SHA-256" else 64)).decode()
        c = base64.b64encode(b"n,,").decode()
        with pytest.raises(SaslAuthenticationFailed):
            server.final(f"c={c},r={unknown['r']},p={proof}".encode())
