"""The admin APIs lakelog serves, differentially, through confluent-kafka's AdminClient: topics (create with
every kind of refusal, validate-only, replica assignments, describe, partitions, delete), configs (describe, alter,
incremental SET/DELETE/APPEND/SUBTRACT, refusals), records (delete, list offsets), consumer groups (list, describe,
offsets, alter, delete), ACLs, SCRAM credentials and the cluster -- against Apache Kafka and lakelog.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AlterConfigOpType,
                                   ConfigEntry, ConfigResource, NewPartitions, NewTopic, OffsetSpec,
                                   ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)


from compat_support import (TIMEOUT, Target, assert_same, create_topic, error_name, request, run_both, unique,
                            wait_for_leaders)
from wire_client import WireClient


def outcome(fut) -> Any:
    """A future's result, or its error's name."""
    try:
        return fut.result(TIMEOUT)
    except Exception as e:  # noqa: BLE001 -- the client's KafkaException, compared by name
        return {"error": error_name(e) if hasattr(e, "args") and e.args and hasattr(e.args[0], "name")
                else type(e).__name__}


def each(futures: dict, show: Callable[[Any], Any] = lambda r: r) -> dict:
    """``{key: shown result or {"error": name}}`` for a dict of futures, keys as strings."""
    out = {}
    for key, fut in futures.items():
        got = outcome(fut)
        out[str(key if not hasattr(key, "name") or isinstance(key, str) else key.name)] = (
            got if isinstance(got, dict) and "error" in got else show(got))
    return out


def topic_partitions(md) -> list:
    return [[p.id, p.leader, list(p.replicas), list(p.isrs), error_name(p.error)]
            for p in sorted(md.partitions.values(), key=lambda p: p.id)]


def topics(target: Target, t: str) -> dict:
    a = target.admin()
    out = {}
    out["create"] = each(a.create_topics([
        NewTopic(t, 2, 1, config={"cleanup.policy": "compact", "retention.ms": "3600000"}),
        NewTopic(f"{t}-assigned", 3, -1, replica_assignment=[[1], [1], [1]]),
        NewTopic(f"{t}-default", -1, -1),
        NewTopic(f"{t}-rf3", 1, 3),
        NewTopic(f"{t}-zero", 0, 1),
        NewTopic("bad name!", 1, 1),
        NewTopic(f"{t}-badconfig", 1, 1, config={"retention.ms": "soon"}),
        NewTopic(f"{t}-unknownconfig", 1, 1, config={"no.such.config": "1"}),
    ], operation_timeout=TIMEOUT, request_timeout=TIMEOUT))
    out["create_again"] = each(a.create_topics([NewTopic(t, 2, 1)], request_timeout=TIMEOUT))
    out["validate_only"] = each(a.create_topics([NewTopic(f"{t}-dry", 3, 1)], validate_only=True,
                                                request_timeout=TIMEOUT))
    wait_for_leaders(target, t, 2)
    md = a.list_topics(timeout=TIMEOUT)
    out["listed"] = {name: topic_partitions(md.topics[name]) for name in sorted(md.topics) if name.startswith(t)}
    out["dry_run_listed"] = f"{t}-dry" in md.topics
    out["brokers"] = sorted(b.id for b in md.brokers.values())
    out["describe"] = each(a.describe_topics(TopicCollection([t, f"{t}-missing"]), request_timeout=TIMEOUT,
                                             include_authorized_operations=True),
                           lambda d: {"internal": d.is_internal, "partitions": [
                               [p.id, p.leader.id, [r.id for r in p.replicas], [r.id for r in p.isr]]
                               for p in d.partitions],
                               "operations": sorted(o.name for o in d.authorized_operations or [])})
    out["partitions"] = each(a.create_partitions([NewPartitions(t, 4), NewPartitions(f"{t}-missing", 2)],
                                                 request_timeout=TIMEOUT))
    out["partitions_fewer"] = each(a.create_partitions([NewPartitions(t, 3)], request_timeout=TIMEOUT))
    out["partitions_dry"] = each(a.create_partitions([NewPartitions(t, 9)], validate_only=True,
                                                     request_timeout=TIMEOUT))
    wait_for_leaders(target, t, 4)
    out["partition_count"] = len(a.list_topics(t, timeout=TIMEOUT).topics[t].partitions)
    out["delete"] = each(a.delete_topics([f"{t}-default", f"{t}-missing"], request_timeout=TIMEOUT,
                                         operation_timeout=TIMEOUT))
    return out


def test_topics(targets):
    kafka, lakelog = run_both(targets, topics, unique("adm"))
    assert kafka["create"]["bad name!"] == {"error": "TOPIC_EXCEPTION"}
    assert_same(kafka, lakelog, {"create/*-rf3": "replication", "listed/*-rf3": "replication"})


def internal_topic(target: Target, group: str) -> dict:
    """Metadata of every topic lists ``__consumer_offsets``, marked internal, once a group coordinator has been
    looked up (Kafka creates the topic then): what clients' regex subscriptions skip."""
    deadline = time.monotonic() + TIMEOUT
    with WireClient(target.bootstrap) as w:
        request(w, 10, 4, {"key_type": 0, "coordinator_keys": [group]})
        while True:
            md = request(w, 3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False})
            found = [t for t in md.topics if t.name == "__consumer_offsets"]
            if found or time.monotonic() > deadline:
                return {"listed": bool(found), "is_internal": [t.is_internal for t in found],
                        "error": [int(t.error_code) for t in found]}
            time.sleep(0.1)


def test_consumer_offsets_is_internal(targets):
    kafka, lakelog = run_both(targets, internal_topic, unique("internal"))
    assert kafka == {"listed": True, "is_internal": [True], "error": [0]}
    assert_same(kafka, lakelog)


def entries(cfg: dict[str, ConfigEntry]) -> dict:
    return {k: [v.value, v.source, v.is_read_only, v.is_default, v.is_sensitive] for k, v in sorted(cfg.items())}


def configs(target: Target, t: str) -> dict:
    a = target.admin()
    create_topic(target, t, 1, {"cleanup.policy": "delete", "retention.ms": "86400000"})
    res = ConfigResource(ResourceType.TOPIC, t)

    def described(key: str | None = None, value: str | None = None) -> dict:
        """The topic's configs, once ``key`` is described with ``value``: Kafka's broker applies an alteration
        after answering it (KRaft replays it from the metadata log), so a describe at once may show the old."""
        deadline = time.monotonic() + 30
        while True:
            got = entries(a.describe_configs([res], request_timeout=TIMEOUT)[res].result(TIMEOUT))
            if key is None or got[key][0] == value or time.monotonic() > deadline:
                return got
            time.sleep(0.1)

    def incremental(*ops: ConfigEntry) -> Any:
        r = ConfigResource(ResourceType.TOPIC, t, incremental_configs=list(ops))
        return outcome(a.incremental_alter_configs([r], request_timeout=TIMEOUT)[r])

    out: dict = {"described": described()}
    out["missing"] = each(a.describe_configs([ConfigResource(ResourceType.TOPIC, f"{t}-missing")],
                                             request_timeout=TIMEOUT), entries)
    op = AlterConfigOpType
    out["set"] = incremental(ConfigEntry("retention.ms", "1000", incremental_operation=op.SET),
                             ConfigEntry("max.message.bytes", "2048", incremental_operation=op.SET))
    out["append"] = incremental(ConfigEntry("cleanup.policy", "compact", incremental_operation=op.APPEND))
    out["after_append"] = described("cleanup.policy", "delete,compact")
    out["subtract"] = incremental(ConfigEntry("cleanup.policy", "delete", incremental_operation=op.SUBTRACT))
    out["delete"] = incremental(ConfigEntry("retention.ms", None, incremental_operation=op.DELETE))
    out["after_incremental"] = described("retention.ms", "604800000")
    out["bad_value"] = incremental(ConfigEntry("retention.ms", "soon", incremental_operation=op.SET))
    out["unknown_key"] = incremental(ConfigEntry("no.such.config", "1", incremental_operation=op.SET))
    out["append_to_scalar"] = incremental(ConfigEntry("retention.ms", "5", incremental_operation=op.APPEND))
    legacy = ConfigResource(ResourceType.TOPIC, t, set_config={"segment.ms": "600000"})
    out["alter_configs"] = outcome(a.alter_configs([legacy], request_timeout=TIMEOUT)[legacy])
    out["after_alter_configs"] = described("segment.ms", "600000")  # AlterConfigs replaces every other override
    broker = ConfigResource(ResourceType.BROKER, "1")
    got = outcome(a.describe_configs([broker], request_timeout=TIMEOUT)[broker])
    out["broker"] = got if isinstance(got, dict) and "error" in got else entries(got)
    return out


# The broker configs topic configs default from (Kafka's synonyms), and the ones clients' tools read
BROKER_KEYS = {"auto.create.topics.enable", "num.partitions", "default.replication.factor", "log.retention.ms",
               "log.retention.bytes", "log.segment.bytes", "log.cleanup.policy", "message.max.bytes",
               "compression.type", "min.insync.replicas", "log.message.timestamp.type", "log.roll.ms"}


def test_configs(targets):
    kafka, lakelog = run_both(targets, configs, unique("cfg"))
    assert kafka["bad_value"] == {"error": "INVALID_CONFIG"} and kafka["described"]["retention.ms"][0] == "86400000"
    # broker-configs: lakelog describes the broker configs it acts on, Kafka's hundreds of others do not apply
    assert BROKER_KEYS <= set(lakelog["broker"]), sorted(BROKER_KEYS - set(lakelog["broker"]))
    kafka["broker"] = {k: v for k, v in kafka["broker"].items() if k in lakelog["broker"]}
    assert_same(kafka, lakelog, {"**/min.insync.replicas/1": "replication", "**/min.insync.replicas/3": "replication",
                                 "*/confluent.*": "lakelog-configs", "*/lakelog.*": "lakelog-configs",
                                 "*/log.retention.check.interval.ms": "lakelog-configs",
                                 "broker/log.retention.check.interval.ms/*": "lakelog-configs",
                                 "broker/socket.request.max.bytes/*": "broker-configs"})


def records(target: Target, t: str) -> dict:
    a = target.admin()
    create_topic(target, t, 2)
    p = Producer(target.conf(**{"linger.ms": 0}))
    for i in range(10):
        p.produce(t, value=f"v{i}".encode(), partition=i % 2, timestamp=1_700_000_000_000 + i * 1000)
    assert p.flush(TIMEOUT) == 0
    out: dict = {}
    out["delete"] = each(a.delete_records([TopicPartition(t, 0, 3), TopicPartition(t, 1, -1)],
                                          request_timeout=TIMEOUT, operation_timeout=TIMEOUT),
                         lambda r: r.low_watermark)
    out["delete_past_end"] = each(a.delete_records([TopicPartition(t, 0, 99)], request_timeout=TIMEOUT),
                                  lambda r: r.low_watermark)
    out["delete_before_start"] = each(a.delete_records([TopicPartition(t, 0, 1)], request_timeout=TIMEOUT),
                                      lambda r: r.low_watermark)
    specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
             "max_timestamp": OffsetSpec.max_timestamp(), "before_start": OffsetSpec.for_timestamp(1_700_000_000_000),
             "at_6": OffsetSpec.for_timestamp(1_700_000_006_000), "after_end": OffsetSpec.for_timestamp(1_800_000_000_000)}
    for name, spec in specs.items():
        out[f"list_{name}"] = each(a.list_offsets({TopicPartition(t, p): spec for p in (0, 1)},
                                                  request_timeout=TIMEOUT),
                                   lambda r: [r.offset, r.timestamp, r.leader_epoch])
    c = Consumer(target.conf(**{"group.id": unique("wm")}))
    out["watermarks"] = [list(c.get_watermark_offsets(TopicPartition(t, p), timeout=TIMEOUT)) for p in (0, 1)]
    c.close()
    return out


def test_records(targets):
    kafka, lakelog = run_both(targets, records, unique("rec"))
    assert kafka["watermarks"] == [[3, 5], [5, 5]]
    # partition 1 lost every record to DeleteRecords: Kafka still names its last one
    assert_same(kafka, lakelog, {"list_max_timestamp/*partition=1,*/*": "max-timestamp"})


def consumer_groups(target: Target, t: str) -> dict:
    a = target.admin()
    create_topic(target, t, 2)
    group, active, unknown = f"{t}-offsets", f"{t}-active", f"{t}-unknown"  # the same names on both sides
    out: dict = {}
    tps = [TopicPartition(t, 0, 4), TopicPartition(t, 1, 7)]
    out["alter"] = each(a.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)],
                                                       request_timeout=TIMEOUT),
                        lambda r: sorted([tp.partition, tp.offset, error_name(tp.error)] for tp in r.topic_partitions))
    out["offsets"] = each(a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                        request_timeout=TIMEOUT),
                          lambda r: sorted([tp.topic == t, tp.partition, tp.offset] for tp in r.topic_partitions))
    p = Producer(target.conf())
    p.produce(t, value=b"x", partition=0)
    p.flush(TIMEOUT)
    c = Consumer(target.conf(**{"group.id": active, "auto.offset.reset": "earliest", "session.timeout.ms": 10000}))
    try:
        c.subscribe([t])
        deadline = time.monotonic() + TIMEOUT
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)

        def describe(*groups: str) -> dict:
            return each(a.describe_consumer_groups(list(groups), request_timeout=TIMEOUT,
                                                   include_authorized_operations=True),
                        lambda d: {"simple": d.is_simple_consumer_group, "state": d.state.name,
                                   "type": d.type.name, "assignor": d.partition_assignor,
                                   "coordinator": d.coordinator.id,
                                   "members": [sorted([tp.topic == t, tp.partition]
                                                      for tp in m.assignment.topic_partitions) for m in d.members],
                                   "operations": sorted(o.name for o in d.authorized_operations or [])})

        out["describe"] = describe(group, active, unknown)
        listed = a.list_consumer_groups(request_timeout=TIMEOUT).result(TIMEOUT)
        out["listed"] = sorted([g.group_id, g.is_simple_consumer_group, g.state.name, g.type.name]
                               for g in listed.valid if g.group_id in (group, active))
        out["delete_active"] = each(a.delete_consumer_groups([active], request_timeout=TIMEOUT))
    finally:
        c.close()
    out["delete"] = each(a.delete_consumer_groups([group, unknown], request_timeout=TIMEOUT))
    out["offsets_after_delete"] = each(a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                                     request_timeout=TIMEOUT),
                                       lambda r: sorted([tp.partition, tp.offset] for tp in r.topic_partitions))
    return out


def test_consumer_groups(targets):
    kafka, lakelog = run_both(targets, consumer_groups, unique("grp"))
    assert list(kafka["delete_active"].values()) == [{"error": "NON_EMPTY_GROUP"}]
    assert_same(kafka, lakelog)


def acls(target: Target, t: str) -> dict:
    a = target.admin()
    principal = f"User:{t}"
    bindings = [AclBinding(ResourceType.TOPIC, t, ResourcePatternType.LITERAL, principal, "*", AclOperation.READ,
                           AclPermissionType.ALLOW),
                AclBinding(ResourceType.TOPIC, f"{t}-", ResourcePatternType.PREFIXED, principal, "*",
                           AclOperation.WRITE, AclPermissionType.ALLOW),
                AclBinding(ResourceType.GROUP, t, ResourcePatternType.LITERAL, principal, "*", AclOperation.ALL,
                           AclPermissionType.DENY)]
    def show(bs):
        if isinstance(bs, dict):  # an error
            return bs
        return sorted([b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host, b.operation.name,
                       b.permission_type.name] for b in bs)

    out: dict = {"create": [outcome(f) for f in a.create_acls(bindings, request_timeout=TIMEOUT).values()]}
    mine = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None, AclOperation.ANY,
                            AclPermissionType.ANY)
    out["describe"] = show(outcome(a.describe_acls(mine, request_timeout=TIMEOUT)))
    topic_read = AclBindingFilter(ResourceType.TOPIC, t, ResourcePatternType.MATCH, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    out["describe_match"] = show(outcome(a.describe_acls(topic_read, request_timeout=TIMEOUT)))
    out["delete"] = [show(outcome(f)) for f in a.delete_acls([AclBindingFilter(
        ResourceType.GROUP, None, ResourcePatternType.ANY, principal, None, AclOperation.ANY,
        AclPermissionType.ANY)], request_timeout=TIMEOUT).values()]
    out["after_delete"] = show(outcome(a.describe_acls(mine, request_timeout=TIMEOUT)))
    a.delete_acls([mine], request_timeout=TIMEOUT)
    return out


def test_acls_without_an_authorizer(targets):
    """Neither cluster has an authorizer (lakelog: no ``--auth-file``): the ACL APIs say security is disabled."""
    kafka, lakelog = run_both(targets, acls, unique("acl"))
    assert kafka["create"] == [{"error": "SECURITY_DISABLED"}] * 3
    assert_same(kafka, lakelog)


def scram(target: Target, t: str) -> dict:
    a = target.admin()
    user = t
    out: dict = {}
    out["describe_unknown"] = each(a.describe_user_scram_credentials([user], request_timeout=TIMEOUT),
                                   lambda d: d)
    out["upsert"] = [each(a.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(mechanism, iterations), b"pw", *salt)], request_timeout=TIMEOUT))
        for mechanism, iterations, salt in ((ScramMechanism.SCRAM_SHA_256, 4096, [b"salt"]),
                                            (ScramMechanism.SCRAM_SHA_512, 8192, []))]
    out["twice_in_one_request"] = each(a.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")] * 2, request_timeout=TIMEOUT))
    show = lambda d: sorted([i.mechanism.name, i.iterations] for i in d.scram_credential_infos)  # noqa: E731
    out["describe"] = each(a.describe_user_scram_credentials([user], request_timeout=TIMEOUT), show)
    out["too_few_iterations"] = each(a.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10), b"pw")], request_timeout=TIMEOUT))
    out["delete"] = each(a.alter_user_scram_credentials([
        UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)], request_timeout=TIMEOUT))
    out["after_delete"] = each(a.describe_user_scram_credentials([user], request_timeout=TIMEOUT), show)
    return out


def test_scram_credentials(targets):
    kafka, lakelog = run_both(targets, scram, unique("scram"))
    assert kafka["describe"] == {kafka_user(kafka): [["SCRAM_SHA_256", 4096], ["SCRAM_SHA_512", 8192]]}
    assert_same(kafka, lakelog, {"*/scram-*": "identity"})


def kafka_user(obs: dict) -> str:
    return next(iter(obs["describe"]))


def cluster(target: Target) -> dict:
    a = target.admin()
    d = a.describe_cluster(request_timeout=TIMEOUT, include_authorized_operations=True).result(TIMEOUT)
    return {"controller": d.controller.id, "nodes": [[n.id, n.host] for n in d.nodes],
            "operations": sorted(o.name for o in d.authorized_operations or [])}


def test_describe_cluster(targets):
    kafka, lakelog = run_both(targets, cluster)
    assert kafka["nodes"] == [[1, "127.0.0.1"]]
    assert_same(kafka, lakelog)
