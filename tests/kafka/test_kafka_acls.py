"""ACLs, SCRAM credentials and user quotas managed over Kafka's protocol, persisted in the root and in force on
every front of it; KIP-430 operations from the ACLs in force; SaslHandshake v0 (Debian's kcat, a bare-token
exchange).

Two fronts (node ids 1 and 2) share one root, with an auth file (super user ``admin``) and a SASL file, and
auto-creation off with three partitions a topic by default (``--auto-create-topics-enable false
--num-partitions 3``). Changes
are made through front 1 with confluent-kafka's and kafka-python's admin clients; their effect is checked on
front 2 with the wire client, which names the front it asks."""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest
from confluent_kafka import KafkaException, Producer, TopicCollection
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ConfigResource, ConfigSource, NewTopic, ResourcePatternType, ResourceType,
                                   ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                   UserScramCredentialUpsertion)

from front_process import kafka_front_process
from reference.kafka import run_tool
from wire_client import WireClient

AUTH = {
    "tokens": [{"principal": "User:admin", "token": "admin-token"}, {"principal": "User:alice", "token": "alice-token"}],
    "super_users": ["User:admin"],
    "acls": [{"principal": "User:alice", "operation": "IdempotentWrite", "resource_type": "Cluster"},
             {"principal": "User:bob", "operation": "Read", "resource_type": "Topic", "resource_name": "from-file"}],
}
USERS = {"users": [{"name": "admin", "password": "admin-pass"}, {"name": "alice", "password": "alice-pass"},
                   {"name": "carol", "password": "carol-pass"}, {"name": "dave", "password": "dave-pass"}]}
PROPAGATION_S = 15.0  # fronts follow the root every 0.5 s; generous for this shared machine


@pytest.fixture(scope="module")
def fronts(tmp_path_factory):
    d = tmp_path_factory.mktemp("acl-fronts")
    (d / "auth.json").write_text(json.dumps(AUTH))
    (d / "sasl.json").write_text(json.dumps(USERS))
    (d / "admin.properties").write_text(  # Kafka's tools as the super user
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config="
        "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"admin\" "
        "password=\"admin-pass\";\n")
    out = []
    for node in (1, 2):
        f = kafka_front_process(str(d / "root"), d / f"logs-{node}",
                                args=("--sasl-file", str(d / "sasl.json"), "--node-id", str(node),
                                      "--auto-create-topics-enable", "false", "--num-partitions", "3"))
        f.auth_file = str(d / "auth.json")
        f.command_config = str(d / "admin.properties")
        out.append(f.start())
    yield out
    for f in out:
        f.stop()


def conf(front, user: str, password: str, mechanism: str = "PLAIN") -> dict:
    return {"bootstrap.servers": front.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


def admin_of(front, user="admin", password="admin-pass") -> AdminClient:
    return AdminClient(conf(front, user, password))


def topic(fronts) -> str:
    name = f"acl-{uuid.uuid4().hex[:8]}"
    admin = admin_of(fronts[0])  # held: a client collected before its future is answered destroys the future
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(60)
    return name


def wire_as(front, user: str, password: str) -> WireClient:
    """A wire client authenticated with SASL/PLAIN on ``front`` itself (no client picks the front for us)."""
    w = WireClient(front.bootstrap)
    assert w.request(17, 1, {"mechanism": "PLAIN"}).error_code == 0
    r = w.request(36, 2, {"auth_bytes": f"\0{user}\0{password}".encode()})
    assert r.error_code == 0, r
    return w


def describe_error(front, user: str, password: str, name: str) -> int:
    with wire_as(front, user, password) as w:
        return w.request(3, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False}).topics[0].error_code


def eventually(check, timeout: float = PROPAGATION_S):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_acls_created_over_kafka_apply_on_every_front(fronts):
    name = topic(fronts)
    assert describe_error(fronts[1], "alice", "alice-pass", name) == 29  # TOPIC_AUTHORIZATION_FAILED
    with fronts[1].client("alice-token") as http:
        assert http.get(f"/v1/topics/{name}").status_code == 403
    admin = admin_of(fronts[0])
    binding = AclBinding(ResourceType.TOPIC, name[:6], ResourcePatternType.PREFIXED, "User:alice", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)
    admin.create_acls([binding])[binding].result(60)
    assert describe_error(fronts[0], "alice", "alice-pass", name) == 0  # the front that made it: at once
    assert eventually(lambda: describe_error(fronts[1], "alice", "alice-pass", name) == 0)  # Write implies Describe
    with fronts[1].client("alice-token") as http:  # the HTTP front applies the same ACLs
        assert http.get(f"/v1/topics/{name}").status_code == 200
    delivered = []
    p = Producer({**conf(fronts[1], "alice", "alice-pass"), "message.timeout.ms": 30000})
    p.produce(name, b"v", on_delivery=lambda err, msg: delivered.append(err))
    p.flush(60)
    assert delivered == [None]

    found = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                                 AclOperation.ANY, AclPermissionType.ANY)).result(60)
    assert binding in found
    assert any(b.name == "from-file" and b.principal == "User:bob" for b in found)  # the auth file's are in force too
    deleted = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, name[:6], ResourcePatternType.PREFIXED,
                                                  "User:alice", None, AclOperation.ANY,
                                                  AclPermissionType.ANY)])
    assert list(deleted.values())[0].result(60) == [binding]
    assert eventually(lambda: describe_error(fronts[1], "alice", "alice-pass", name) == 29)


def test_acl_apis_need_the_cluster_and_file_acls_stay(fronts):
    alice = admin_of(fronts[0], "alice", "alice-pass")
    binding = AclBinding(ResourceType.TOPIC, "x", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                         AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as e:
        alice.create_acls([binding])[binding].result(60)
    assert e.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"
    with wire_as(fronts[1], "alice", "alice-pass") as w:  # confluent-kafka answers [] for a top-level error
        r = w.request(29, 3, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                              "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
    assert r.error_code == 31 and r.resources == ()  # CLUSTER_AUTHORIZATION_FAILED
    bad = AclBinding(ResourceType.BROKER, "not-the-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                     AclOperation.ALTER, AclPermissionType.ALLOW)
    admin = admin_of(fronts[0])
    with pytest.raises(KafkaException) as e:
        admin.create_acls([bad])[bad].result(60)
    assert e.value.args[0].name() == "INVALID_REQUEST"
    with wire_as(fronts[1], "admin", "admin-pass") as w:  # a filter matching a file ACL reports it, keeps it
        r = w.request(31, 3, {"filters": [{"resource_type_filter": 2, "resource_name_filter": "from-file",
                                           "pattern_type_filter": 3, "principal_filter": None, "host_filter": None,
                                           "operation": 1, "permission_type": 1}]})
    matched = r.filter_results[0].matching_acls
    assert [(m.principal, m.error_code) for m in matched] == [("User:bob", 42)]


def test_open_front_answers_security_disabled(bootstrap):
    f = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                         AclPermissionType.ANY)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert admin.describe_acls(f).result(60) == []  # confluent-kafka drops DescribeAcls' top-level error
    binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:a", "*", AclOperation.READ,
                         AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as e:
        admin.create_acls([binding])[binding].result(60)
    assert e.value.args[0].name() == "SECURITY_DISABLED"
    with WireClient(bootstrap) as w:
        r = w.request(29, 3, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                              "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
    assert r.error_code == 54 and r.error_message == "No Authorizer is configured on the broker"


def test_authorized_operations_follow_the_acls(fronts):
    name = topic(fronts)
    admin = admin_of(fronts[0])
    binding = AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    admin.create_acls([binding])[binding].result(60)
    alice = admin_of(fronts[0], "alice", "alice-pass")
    described = alice.describe_topics(TopicCollection([name]), include_authorized_operations=True)[name].result(60)
    assert set(described.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    assert not alice.describe_cluster(include_authorized_operations=True).result(60).authorized_operations
    assert len(admin.describe_cluster(include_authorized_operations=True).result(60).authorized_operations) == 7


def test_kafka_python_manages_acls(fronts):
    from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient,
                             ResourcePattern, ResourcePatternFilter, ResourceType as KResourceType)

    admin = KafkaAdminClient(bootstrap_servers=fronts[1].bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="admin",
                             sasl_plain_password="admin-pass", request_timeout_ms=60000)
    try:
        acl = ACL("User:dave", "*", ACLOperation.DESCRIBE_CONFIGS, ACLPermissionType.DENY,
                  ResourcePattern(KResourceType.GROUP, "g-", ACLResourcePatternType.PREFIXED))
        result = admin.create_acls([acl])
        assert result["succeeded"] == [acl] and not result["failed"]
        f = ACLFilter("User:dave", None, ACLOperation.ANY, ACLPermissionType.ANY,
                      ResourcePatternFilter(KResourceType.ANY, None, ACLResourcePatternType.ANY))
        acls, error = admin.describe_acls(f)
        assert acls == [acl]
        deleted = admin.delete_acls([f])
        assert [(matched, error.errno) for _, matched, error in deleted] == [([acl], 0)]
        assert admin.describe_acls(f)[0] == []
    finally:
        admin.close()


def scram_ok(front, user: str, password: str, mechanism: str) -> bool:
    admin = AdminClient({**conf(front, user, password, mechanism), "socket.timeout.ms": 10000})
    try:
        admin.list_topics(timeout=10)
        return True
    except KafkaException:
        return False


def test_scram_credentials_managed_over_kafka(fronts):
    admin = admin_of(fronts[0])
    seeded = admin.describe_user_scram_credentials(["carol"])["carol"].result(60)
    assert sorted((i.mechanism, i.iterations) for i in seeded.scram_credential_infos) == \
        [(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 4096)]  # the SASL file's users
    erin = UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"erin-pw")
    assert admin.alter_user_scram_credentials([erin])["erin"].result(60) is None
    assert eventually(lambda: scram_ok(fronts[1], "erin", "erin-pw", "SCRAM-SHA-512"))
    assert not scram_ok(fronts[1], "erin", "wrong", "SCRAM-SHA-512")
    described = admin.describe_user_scram_credentials(["erin"])["erin"].result(60)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_512, 8192)]
    gone = UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_512)
    admin.alter_user_scram_credentials([gone])["erin"].result(60)
    assert eventually(lambda: not scram_ok(fronts[1], "erin", "erin-pw", "SCRAM-SHA-512"))
    with pytest.raises(KafkaException) as e:
        admin.describe_user_scram_credentials(["erin"])["erin"].result(60)
    assert e.value.args[0].name() == "RESOURCE_NOT_FOUND"
    few = UserScramCredentialUpsertion("frank", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw")
    with pytest.raises(KafkaException) as e:
        admin.alter_user_scram_credentials([few])["frank"].result(60)
    assert e.value.args[0].name() == "UNACCEPTABLE_CREDENTIAL"
    alice = admin_of(fronts[0], "alice", "alice-pass")
    with pytest.raises(KafkaException) as e:
        alice.alter_user_scram_credentials([erin])["erin"].result(60)
    assert e.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"


def test_kafka_python_manages_scram_credentials(fronts):
    from kafka.admin import KafkaAdminClient
    from kafka.admin import ScramMechanism as KMechanism, UserScramCredentialUpsertion as KUpsertion

    admin = KafkaAdminClient(bootstrap_servers=fronts[0].bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="PLAIN", sasl_plain_username="admin", sasl_plain_password="admin-pass",
                             request_timeout_ms=60000)
    try:
        admin.alter_user_scram_credentials([KUpsertion("gina", KMechanism.SCRAM_SHA_256, "gina-pw", iterations=4096)])
        assert eventually(lambda: scram_ok(fronts[1], "gina", "gina-pw", "SCRAM-SHA-256"))
    finally:
        admin.close()


def test_a_file_users_password_changed_over_kafka(fronts):
    """The SASL file's users are SCRAM credentials of the root: one changed with AlterUserScramCredentials takes
    the new password on every front and refuses the file's; the user's other mechanism keeps its own."""
    assert scram_ok(fronts[1], "dave", "dave-pass", "SCRAM-SHA-256")
    new = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"dave-new")
    admin = admin_of(fronts[0])  # held until answered (see topic())
    assert admin.alter_user_scram_credentials([new])["dave"].result(60) is None
    assert eventually(lambda: scram_ok(fronts[1], "dave", "dave-new", "SCRAM-SHA-256"))
    assert not scram_ok(fronts[1], "dave", "dave-pass", "SCRAM-SHA-256")
    assert scram_ok(fronts[1], "dave", "dave-pass", "SCRAM-SHA-512")


def test_debian_kcat_authenticates(fronts):
    """Debian's kcat (librdkafka 2.0.2) stopped at "SASL Handshake not supported by broker" while only
    SaslHandshake v1 was served. (Its SCRAM repeats the client nonce in its final message, which Kafka 4.x
    refuses and lakelog with it: it authenticates with PLAIN.)"""
    args = ["kcat", "-b", fronts[0].bootstrap, "-L", "-m", "30", "-X", "security.protocol=SASL_PLAINTEXT",
            "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=carol"]
    out = subprocess.run([*args, "-X", "sasl.password=carol-pass"], capture_output=True, timeout=90)
    assert out.returncode == 0, out.stderr
    assert b"broker 1 at" in out.stdout
    assert subprocess.run([*args, "-X", "sasl.password=nope", "-m", "8"], capture_output=True, timeout=90).returncode


def _api_count(front, api: str) -> float:
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{front.url}/metrics", timeout=30).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "lakelog_kafka_request_duration_seconds_count" and sample.labels.get("api") == api:
                return sample.value
    return 0.0


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_kafka_python_authenticates_with_a_v0_handshake(fronts, mechanism):
    """kafka-python told it talks to a 0.10.1 broker sends SaslHandshake v0 and then the bare SASL tokens
    (KIP-43's original framing): no SaslAuthenticate request reaches the front."""
    from kafka import KafkaConsumer

    before = _api_count(fronts[1], "SaslAuthenticate"), _api_count(fronts[1], "SaslHandshake")
    consumer = KafkaConsumer(bootstrap_servers=fronts[1].bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism=mechanism, sasl_plain_username="carol", sasl_plain_password="carol-pass",
                             api_version=(0, 10, 1), request_timeout_ms=60000)
    try:
        assert isinstance(consumer.topics(), set)
    finally:
        consumer.close()
    assert _api_count(fronts[1], "SaslHandshake") > before[1]
    assert _api_count(fronts[1], "SaslAuthenticate") == before[0]


def test_bare_token_exchange_after_a_v0_handshake(fronts):
    with WireClient(fronts[0].bootstrap) as w:
        assert w.request(17, 0, {"mechanism": "PLAIN"}).error_code == 0
        w.send_raw(len(b"\0carol\0carol-pass").to_bytes(4, "big") + b"\0carol\0carol-pass")
        assert w.read_frame() == b""  # PLAIN's empty answer: authenticated
        assert w.request(3, 1, {"topics": None}).brokers  # now a Kafka request again
    with WireClient(fronts[0].bootstrap) as w:
        assert w.request(17, 0, {"mechanism": "PLAIN"}).error_code == 0
        w.send_raw(len(b"\0carol\0nope").to_bytes(4, "big") + b"\0carol\0nope")
        assert w.closed_by_server()  # a failed v0 exchange closes the connection, as Kafka's


def test_kafka_acls_tool_against_lakelog(fronts):
    """Kafka's kafka-acls adds, lists (a MATCH filter included) and removes ACLs through front 1, as the super
    user over SCRAM; what it added is in force on front 2."""
    b, cfg = fronts[0].bootstrap, fronts[0].command_config
    name = f"orders-{uuid.uuid4().hex[:6]}"
    run_tool("kafka-acls", "--bootstrap-server", b, "--command-config", cfg, "--add", "--allow-principal",
             "User:alice", "--operation", "Read", "--operation", "Describe", "--topic", name[:10],
             "--resource-pattern-type", "prefixed")
    out = run_tool("kafka-acls", "--bootstrap-server", b, "--command-config", cfg, "--list", "--topic", name,
                   "--resource-pattern-type", "match").stdout
    assert "User:alice" in out and "operation=READ" in out and "patternType=PREFIXED" in out
    assert "from-file" not in out  # the file's ACL for User:bob is on another topic
    admin = admin_of(fronts[0])
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(60)
    assert eventually(lambda: describe_error(fronts[1], "alice", "alice-pass", name) == 0)
    run_tool("kafka-acls", "--bootstrap-server", b, "--command-config", cfg, "--remove", "--force",
             "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe", "--topic",
             name[:10], "--resource-pattern-type", "prefixed")
    # a front's ACL view follows the metadata log, as a Kafka broker's follows its controller's: eventually
    left = AclBindingFilter(ResourceType.TOPIC, name[:10], ResourcePatternType.PREFIXED, None, None,
                            AclOperation.ANY, AclPermissionType.ANY)
    assert eventually(lambda: admin.describe_acls(left).result(60) == [])
    assert eventually(lambda: describe_error(fronts[1], "alice", "alice-pass", name) == 29)


def _alter_quotas(front, entity: list[tuple[str, str | None]], ops: list[tuple[str, float | None]]) -> None:
    with wire_as(front, "admin", "admin-pass") as w:
        r = w.request(49, 1, {"entries": [{"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                                           "ops": [{"key": k, "value": v or 0.0, "remove": v is None}
                                                   for k, v in ops]}], "validate_only": False})
    assert r.entries[0].error_code == 0, r.entries[0].error_message


def _produce_throttles(front, user: str, client_id: str, name: str) -> list[float]:
    """Throttle times (s) confluent-kafka reports for one 20 KB record produced as ``user`` with ``client_id``."""
    events: list = []
    p = Producer({**conf(front, user, f"{user}-pass", "SCRAM-SHA-512"), "client.id": client_id,
                  "throttle_cb": events.append, "message.timeout.ms": 30000})
    delivered: list = []
    p.produce(name, b"q" * 20_000, on_delivery=lambda err, msg: delivered.append(err))
    p.flush(60)
    p.poll(0)
    assert delivered == [None], delivered
    return [e.throttle_time for e in events if e.throttle_time > 0]


def test_user_quotas_and_their_default_throttle_on_every_front(fronts):
    """Client quotas per user, per user and client id, and the users' ``<default>`` (KIP-55, KIP-257's
    precedence), set through front 1 with Kafka's ``kafka-configs`` and AlterClientQuotas, in force on front 2
    for SASL users: confluent-kafka's producers are told ``throttle_time_ms`` exactly when their own entity's
    producer byte rate is exceeded (a default applies to each user on its own)."""
    name = topic(fronts)
    admin = admin_of(fronts[0])
    write = AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, "User:*", "*", AclOperation.WRITE,
                       AclPermissionType.ALLOW)
    admin.create_acls([write])[write].result(60)
    b, cfg = fronts[0].bootstrap, fronts[0].command_config
    try:
        _alter_quotas(fronts[0], [("user", "alice")], [("producer_byte_rate", 100_000_000.0)])
        _alter_quotas(fronts[0], [("user", "carol"), ("client-id", "fast-app")], [("producer_byte_rate", 1e8)])
        run_tool("kafka-configs", "--bootstrap-server", b, "--command-config", cfg, "--alter", "--entity-type",
                 "users", "--entity-default", "--add-config", "producer_byte_rate=1000")  # the last change made
        assert eventually(lambda: _produce_throttles(fronts[1], "carol", "app", name))  # the default, on front 2
        assert _produce_throttles(fronts[1], "dave", "app", name)  # the default again: dave's own sensor
        assert _produce_throttles(fronts[1], "carol", "fast-app", name) == []  # /users/carol/clients/fast-app
        assert _produce_throttles(fronts[1], "alice", "app", name) == []  # /users/alice
    finally:
        _alter_quotas(fronts[0], [("user", None)], [("producer_byte_rate", None)])
        _alter_quotas(fronts[0], [("user", "alice")], [("producer_byte_rate", None)])
        _alter_quotas(fronts[0], [("user", "carol"), ("client-id", "fast-app")], [("producer_byte_rate", None)])


def test_auto_creation_off_and_num_partitions(fronts):
    c = conf(fronts[0], "admin", "admin-pass")
    admin = AdminClient(c)
    name = f"no-auto-{uuid.uuid4().hex[:8]}"
    p = Producer({**c, "message.timeout.ms": 3000})
    errors = []
    p.produce(name, b"v", on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    assert errors and errors[0] is not None and name not in admin.list_topics(timeout=30).topics
    admin.create_topics([NewTopic(name)])[name].result(30)  # -1 partitions: num.partitions
    assert len(admin.list_topics(timeout=30).topics[name].partitions) == 3
    broker = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = admin.describe_configs([broker])[broker].result(30)
    assert configs["auto.create.topics.enable"].value == "false"
    assert configs["auto.create.topics.enable"].source == ConfigSource.STATIC_BROKER_CONFIG.value
