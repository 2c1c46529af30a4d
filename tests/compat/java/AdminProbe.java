import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.FenceProducersOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

/**
 * Kafka's Java AdminClient against one cluster: every admin API lakelog serves, called in order on topics named
 * after args[1], and what each answered (a value, or the exception's class) printed as one JSON object, to compare
 * between Apache Kafka and lakelog. Usage: AdminProbe BOOTSTRAP NAME.
 */
public final class AdminProbe {
    private static final Map<String, Object> OUT = new TreeMap<>();

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        String t = args[1];
        ConfigResource topic = new ConfigResource(ConfigResource.Type.TOPIC, t);
        TopicPartition p0 = new TopicPartition(t, 0);
        TopicPartition p1 = new TopicPartition(t, 1);
        String group = t + "-group";
        try (Admin a = Admin.create(props)) {
            call("01_createTopics", () -> a.createTopics(List.of(
                new NewTopic(t, 2, (short) 1).configs(Map.of("retention.ms", "3600000")),
                new NewTopic(t + "-x", 1, (short) 1))).all().get());
            call("02_createTopics_exists", () -> a.createTopics(List.of(new NewTopic(t, 2, (short) 1))).all().get());
            call("03_listTopics", () -> a.listTopics().names().get().stream().filter(n -> n.startsWith(t)).sorted()
                .collect(Collectors.toList()));
            call("04_describeTopics", () -> {
                Map<String, TopicDescription> d = a.describeTopics(List.of(t),
                    new DescribeTopicsOptions().includeAuthorizedOperations(true)).allTopicNames().get();
                TopicDescription td = d.get(t);
                return List.of(td.isInternal(), td.partitions().stream().map(p -> List.of(p.partition(),
                    p.leader().id(), p.replicas().size(), p.isr().size())).collect(Collectors.toList()),
                    sorted(td.authorizedOperations()));
            });
            call("05_createPartitions", () -> a.createPartitions(Map.of(t + "-x", NewPartitions.increaseTo(3)))
                .all().get());
            call("06_createPartitions_fewer", () -> a.createPartitions(Map.of(t + "-x", NewPartitions.increaseTo(2)))
                .all().get());
            call("07_describeConfigs", () -> configs(a, topic));
            call("08_incrementalAlterConfigs", () -> a.incrementalAlterConfigs(Map.of(topic, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "1000"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND))))
                .all().get());
            call("09_describeConfigs_after", () -> configsOnce(a, topic, "retention.ms", "1000"));
            call("10_incrementalAlterConfigs_subtract_delete", () -> a.incrementalAlterConfigs(Map.of(topic, List.of(
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.SUBTRACT),
                new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE)))).all().get());
            call("11_incrementalAlterConfigs_invalid", () -> a.incrementalAlterConfigs(Map.of(topic, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all().get());
            call("13_describeConfigs_final", () -> configsOnce(a, topic, "retention.ms", "3600000"));
            call("14_describeCluster", () -> {
                var d = a.describeCluster(new DescribeClusterOptions().includeAuthorizedOperations(true));
                return List.of(d.nodes().get().stream().map(n -> n.id()).collect(Collectors.toList()),
                    d.controller().get().id(), sorted(d.authorizedOperations().get()));
            });
            call("15_deleteRecords", () -> {
                produce(args[0], t);
                return a.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(2))).lowWatermarks().get(p0).get()
                    .lowWatermark();
            });
            for (var spec : Map.of("earliest", OffsetSpec.earliest(), "latest", OffsetSpec.latest(),
                    "maxTimestamp", OffsetSpec.maxTimestamp(), "forTimestamp", OffsetSpec.forTimestamp(1700000003000L))
                    .entrySet()) {
                call("16_listOffsets_" + spec.getKey(), () -> {
                    ListOffsetsResult r = a.listOffsets(Map.of(p0, spec.getValue(), p1, spec.getValue()));
                    List<Object> got = new ArrayList<>();
                    for (TopicPartition tp : List.of(p0, p1)) {
                        var info = r.partitionResult(tp).get();
                        got.add(List.of(info.offset(), info.timestamp(), info.leaderEpoch().orElse(-1)));
                    }
                    return got;
                });
            }
            call("17_alterConsumerGroupOffsets", () -> a.alterConsumerGroupOffsets(group, Map.of(
                p0, new OffsetAndMetadata(3), p1, new OffsetAndMetadata(1, "meta"))).all().get());
            call("18_listConsumerGroupOffsets", () -> a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                .get().entrySet().stream().map(e -> List.of(e.getKey().partition(), e.getValue().offset(),
                    e.getValue().metadata())).sorted((x, y) -> x.get(0).toString().compareTo(y.get(0).toString()))
                .collect(Collectors.toList()));
            call("19_listGroups", () -> a.listGroups().all().get().stream().filter(g -> g.groupId().equals(group))
                .map(g -> List.of(g.groupId(), String.valueOf(g.type().orElse(null)),
                    String.valueOf(g.protocol()), String.valueOf(g.groupState().orElse(null))))
                .collect(Collectors.toList()));
            call("20_describeConsumerGroups", () -> {
                ConsumerGroupDescription d = a.describeConsumerGroups(List.of(group)).all().get().get(group);
                return List.of(d.isSimpleConsumerGroup(), String.valueOf(d.groupState()), d.members().size(),
                    d.coordinator().id(), String.valueOf(d.type()));
            });
            call("21_deleteConsumerGroupOffsets", () -> a.deleteConsumerGroupOffsets(group, java.util.Set.of(p1))
                .all().get());
            call("22_deleteConsumerGroups", () -> a.deleteConsumerGroups(List.of(group)).all().get());
            call("23_deleteConsumerGroups_unknown", () -> a.deleteConsumerGroups(List.of(group)).all().get());
            call("24_describeAcls", () -> a.describeAcls(AclBindingFilter.ANY).values().get().size());
            call("25_createAcls", () -> a.createAcls(List.of(new AclBinding(
                new ResourcePattern(ResourceType.TOPIC, t, PatternType.LITERAL),
                new AccessControlEntry("User:" + t, "*", AclOperation.READ, AclPermissionType.ALLOW)))).all().get());
            call("26_alterUserScramCredentials", () -> a.alterUserScramCredentials(List.<UserScramCredentialAlteration>of(
                new UserScramCredentialUpsertion(t, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                    "secret"))).all().get());
            call("27_describeUserScramCredentials", () -> a.describeUserScramCredentials(List.of(t)).description(t)
                .get().credentialInfos().stream().map(i -> List.of(i.mechanism().name(), i.iterations()))
                .collect(Collectors.toList()));
            ClientQuotaEntity client = new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, t));
            call("28_alterClientQuotas", () -> a.alterClientQuotas(List.of(new ClientQuotaAlteration(client, List.of(
                new ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0),
                new ClientQuotaAlteration.Op("request_percentage", 50.0))))).all().get());
            call("29_describeClientQuotas", () -> quotasOnce(a, client));
            call("30_fenceProducers", () -> {
                a.fenceProducers(List.of(t + "-txn"), new FenceProducersOptions()).all().get();
                return "fenced";
            });
            call("31_deleteTopics", () -> a.deleteTopics(List.of(t + "-x", t + "-missing")).topicNameValues()
                .entrySet().stream().sorted(Map.Entry.comparingByKey()).map(e -> outcome(() -> e.getValue().get()))
                .collect(Collectors.toList()));
        }
        System.out.println(json(OUT));
    }

    private static void produce(String bootstrap, String t) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        try (var producer = new org.apache.kafka.clients.producer.KafkaProducer<String, String>(p)) {
            for (int i = 0; i < 6; i++) {
                producer.send(new org.apache.kafka.clients.producer.ProducerRecord<>(t, i % 2, 1700000000000L + i * 1000L,
                    "k" + i, "v" + i)).get();
            }
        }
    }

    /** The configs once ``key`` is described with ``value``: Kafka's brokers apply an alteration after answering
     * it (KRaft replays it from the metadata log), so an immediate describe may show the old value. */
    private static Object configsOnce(Admin a, ConfigResource r, String key, String value) throws Exception {
        long deadline = System.currentTimeMillis() + 30000;
        while (true) {
            @SuppressWarnings("unchecked")
            Map<String, List<Object>> got = (Map<String, List<Object>>) configs(a, r);
            if (value.equals(got.get(key).get(0)) || System.currentTimeMillis() > deadline) {
                return got;
            }
            Thread.sleep(100);
        }
    }

    /** The quotas of ``client`` once any are described: Kafka's brokers apply an alteration after answering it. */
    private static Object quotasOnce(Admin a, ClientQuotaEntity client) throws Exception {
        long deadline = System.currentTimeMillis() + 30000;
        while (true) {
            Map<String, Double> got = new TreeMap<>(a.describeClientQuotas(ClientQuotaFilter.all()).entities().get()
                .getOrDefault(client, Map.of()));
            if (!got.isEmpty() || System.currentTimeMillis() > deadline) {
                return got;
            }
            Thread.sleep(100);
        }
    }

    private static Object configs(Admin a, ConfigResource r) throws Exception {
        Config c = a.describeConfigs(List.of(r)).all().get().get(r);
        Map<String, Object> out = new TreeMap<>();
        for (ConfigEntry e : c.entries()) {
            out.put(e.name(), List.of(String.valueOf(e.value()), e.source().name(), e.isReadOnly(), e.isSensitive(),
                String.valueOf(e.type())));
        }
        return out;
    }

    private static List<String> sorted(Collection<AclOperation> ops) {
        return ops == null ? null : ops.stream().map(Enum::name).sorted().collect(Collectors.toList());
    }

    private static Object outcome(Callable<?> c) {
        try {
            Object v = c.call();
            return v == null ? "ok" : v;
        } catch (ExecutionException e) {
            return "error: " + e.getCause().getClass().getSimpleName();
        } catch (Exception e) {
            return "error: " + e.getClass().getSimpleName();
        }
    }

    private static void call(String name, Callable<?> c) {
        OUT.put(name, outcome(c));
    }

    private static String json(Object v) {
        if (v == null) {
            return "null";
        }
        if (v instanceof Map) {
            return ((Map<?, ?>) v).entrySet().stream().map(e -> ToolRunner.json(e.getKey().toString()) + ": "
                + json(e.getValue())).collect(Collectors.joining(", ", "{", "}"));
        }
        if (v instanceof Collection) {
            return ((Collection<?>) v).stream().map(AdminProbe::json).collect(Collectors.joining(", ", "[", "]"));
        }
        if (v instanceof Number || v instanceof Boolean) {
            return v.toString();
        }
        return ToolRunner.json(v.toString());
    }
}
