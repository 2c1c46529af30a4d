package io.lakelog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.example.data.Group;
import org.apache.parquet.example.data.simple.SimpleGroupFactory;
import org.apache.parquet.hadoop.ParquetFileWriter;
import org.apache.parquet.hadoop.ParquetReader;
import org.apache.parquet.hadoop.ParquetWriter;
import org.apache.parquet.hadoop.api.ReadSupport;
import org.apache.parquet.hadoop.example.ExampleParquetWriter;
import org.apache.parquet.hadoop.example.GroupReadSupport;
import org.apache.parquet.hadoop.metadata.CompressionCodecName;
import org.apache.parquet.hadoop.util.HadoopOutputFile;
import org.apache.parquet.io.api.Binary;
import org.apache.parquet.schema.MessageType;
import org.apache.parquet.schema.MessageTypeParser;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.*;

/**
 * A consumer group's committed offsets in the internal compacted topic {@code __consumer_offsets}, read and
 * written the way lakelog/group/consumer_offsets.py does: key JSON {@code ["group","topic",partition]}, value JSON
 * {@code {"offset":O,"metadata":"spark","commit_timestamp":ms}} (null: deleted), every key of a group in partition
 * {@code murmur2(group) % partitions}; the latest record of a key wins.
 *
 * <p>A commit appends one segment file (lakelog's file schema) and creates the Delta commit
 * {@code _delta_log/<version + 1>.json} put-if-absent, with the add action and the txn {@code lakelog.leo.<P>} = new
 * log end offset, as lakelog/writer/committer.py {@code _commit_direct} writes it; when another commit took the
 * version, the log is re-read and the commit retried at the new log end. Put-if-absent is a hard link on local
 * roots and S3's conditional PUT ({@code If-None-Match: *}, {@link S3ConditionalCreate}) on S3 roots. A commit whose
 * put was refused checks whether the commit in its place is its own (an earlier attempt whose answer was lost, then
 * retried by the S3 client), by the {@code lakelog.commitId} of its commitInfo, so it is never written twice.
 */
public final class ConsumerGroupOffsets {
    static final String TOPIC = "__consumer_offsets";
    static final int PARTITIONS = 8;
    static final int MAX_ATTEMPTS = 50;
    static final ObjectMapper JSON = new ObjectMapper();
    static final DateTimeFormatter STATS_TS = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")
        .withZone(ZoneOffset.UTC);
    static final MessageType FILE_SCHEMA = MessageTypeParser.parseMessageType("message schema {\n"
        + "  required int64 offset;\n"
        + "  required int64 timestamp (TIMESTAMP(MICROS,true));\n"
        + "  required int32 timestampType;\n"
        + "  optional binary key;\n"
        + "  optional binary value;\n"
        + "  optional group headers (LIST) {\n"
        + "    repeated group list {\n"
        + "      optional group element {\n"
        + "        optional binary key (STRING);\n"
        + "        optional binary value;\n"
        + "      }\n"
        + "    }\n"
        + "  }\n"
        + "  required int64 producerId;\n"
        + "  required int32 producerEpoch (INTEGER(16,true));\n"
        + "  required int32 sequence;\n"
        + "}");
    /** The Delta schema of a topic table (lakelog/storage/record_schema.py TABLE_SCHEMA). */
    static final String TABLE_SCHEMA_JSON = "{\"type\":\"struct\",\"fields\":["
        + "{\"name\":\"partition\",\"type\":\"integer\",\"nullable\":false,\"metadata\":{}},"
        + "{\"name\":\"offset\",\"type\":\"long\",\"nullable\":false,\"metadata\":{}},"
        + "{\"name\":\"timestamp\",\"type\":\"timestamp\",\"nullable\":false,\"metadata\":{}},"
        + "{\"name\":\"timestampType\",\"type\":\"integer\",\"nullable\":false,\"metadata\":{}},"
        + "{\"name\":\"key\",\"type\":\"binary\",\"nullable\":true,\"metadata\":{}},"
        + "{\"name\":\"value\",\"type\":\"binary\",\"nullable\":true,\"metadata\":{}},"
        + "{\"name\":\"headers\",\"type\":{\"type\":\"array\",\"elementType\":{\"type\":\"struct\",\"fields\":["
        + "{\"name\":\"key\",\"type\":\"string\",\"nullable\":true,\"metadata\":{}},"
        + "{\"name\":\"value\",\"type\":\"binary\",\"nullable\":true,\"metadata\":{}}]},\"containsNull\":true},"
        + "\"nullable\":true,\"metadata\":{}},"
        + "{\"name\":\"producerId\",\"type\":\"long\",\"nullable\":false,\"metadata\":{}},"
        + "{\"name\":\"producerEpoch\",\"type\":\"short\",\"nullable\":false,\"metadata\":{}},"
        + "{\"name\":\"sequence\",\"type\":\"integer\",\"nullable\":false,\"metadata\":{}}]}";
    static final String ENGINE = "lakelog-jvm-commit";

    private final Root root;
    private final Configuration conf, writeConf;
    private final FileSystem fs;
    private final Path table;

    ConsumerGroupOffsets(Root root, Configuration conf) {
        this.root = root;
        this.conf = conf;
        try {
            FileSystem f = root.fs(conf);
            // the raw local filesystem: no .crc side files next to segments and commits
            this.fs = f instanceof LocalFileSystem l ? l.getRawFileSystem() : f;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        this.table = root.topicPath(TOPIC);
        this.writeConf = new Configuration(conf);
        writeConf.set("fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem"); // no .crc next to segments
        writeConf.setBoolean("fs.file.impl.disable.cache", true);
    }

    /** The store of a root given as the source's path (for the tests, which drive it through py4j). */
    public static ConsumerGroupOffsets of(String root) {
        return of(root, new TreeMap<>());
    }

    /** The store of a root with the source's storage options (keys without their {@code storage.} prefix). */
    public static ConsumerGroupOffsets of(String root, Map<String, String> storage) {
        return of(root, storage, "auto");
    }

    /** ... with S3 commits created through {@code mode} ({@link S3ConditionalCreate#MODE}: auto, s3a or sdk). */
    public static ConsumerGroupOffsets of(String root, Map<String, String> storage, String mode) {
        Root r = Root.resolve(root, storage);
        Configuration conf = r.conf(new Configuration());
        conf.set(S3ConditionalCreate.MODE, mode);
        return new ConsumerGroupOffsets(r, conf);
    }

    /** {@link #commit} with the offsets as the offsets JSON {@code {"topic":{"0":12}}}. */
    public void commitJson(String group, String offsets) {
        commit(group, LakelogOffset.parse(offsets).offsets);
    }

    /** {@link #fetch} as the offsets JSON. */
    public String fetchJson(String group) {
        return new LakelogOffset(fetch(group)).json();
    }

    /** Kafka's Utils.murmur2 (seed 0x9747b28c), as lakelog/writer/partitioner.py. */
    static int murmur2(byte[] data) {
        int length = data.length, seed = 0x9747b28c, m = 0x5bd1e995, r = 24;
        int h = seed ^ length;
        int length4 = length / 4;
        for (int i = 0; i < length4; i++) {
            int i4 = i * 4;
            int k = (data[i4] & 0xff) + ((data[i4 + 1] & 0xff) << 8) + ((data[i4 + 2] & 0xff) << 16)
                + ((data[i4 + 3] & 0xff) << 24);
            k *= m;
            k ^= k >>> r;
            k *= m;
            h *= m;
            h ^= k;
        }
        switch (length % 4) {
            case 3: h ^= (data[(length & ~3) + 2] & 0xff) << 16;
            case 2: h ^= (data[(length & ~3) + 1] & 0xff) << 8;
            case 1: h ^= data[length & ~3] & 0xff;
                h *= m;
        }
        h ^= h >>> 13;
        h *= m;
        h ^= h >>> 15;
        return h;
    }

    static int partitionFor(String group, int partitions) {
        return (murmur2(group.getBytes(StandardCharsets.UTF_8)) & 0x7fffffff) % partitions;
    }

    private TopicState load() {
        try {
            return TopicState.load(fs, conf, table, TOPIC, -1);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The group's committed offsets (every topic). */
    Map<TP, Long> fetch(String group) {
        for (int attempt = 0; ; attempt++) {
            try {
                return fetchOnce(group);
            } catch (FileNotFoundException e) {
                // compaction replaced a segment between reading the log and the file: read the new state
                if (attempt >= 3) throw new UncheckedIOException(e);
            }
        }
    }

    private Map<TP, Long> fetchOnce(String group) throws FileNotFoundException {
        TopicState s = load();
        Map<TP, Long> out = new TreeMap<>();
        if (s.version < 0 || s.deleted()) return out;
        int p = partitionFor(group, s.partitionCount());
        long lso = s.logStartOffset(p), hw = s.highWatermark(p);
        Configuration c = new Configuration(conf);
        c.set(ReadSupport.PARQUET_READ_SCHEMA, new MessageType("m", FILE_SCHEMA.getType("offset"),
            FILE_SCHEMA.getType("key"), FILE_SCHEMA.getType("value")).toString());
        for (Segment seg : s.segmentsFrom(p, lso)) {
            try (ParquetReader<Group> r = ParquetReader.builder(new GroupReadSupport(), new Path(table, seg.path()))
                .withConf(c).build()) {
                for (Group g = r.read(); g != null; g = r.read()) {
                    long off = g.getLong("offset", 0);
                    if (off < lso || off >= hw || g.getFieldRepetitionCount("key") == 0) continue;
                    JsonNode key;
                    try {
                        key = JSON.readTree(g.getBinary("key", 0).getBytes());
                    } catch (IOException e) {
                        continue; // not an offset-commit key: ignored, as Kafka ignores unknown key versions
                    }
                    if (key == null || !key.isArray() || key.size() != 3 || !group.equals(key.get(0).asText())) continue;
                    TP tp = new TP(key.get(1).asText(), key.get(2).asInt());
                    if (g.getFieldRepetitionCount("value") == 0) {
                        out.remove(tp);
                        continue;
                    }
                    try {
                        out.put(tp, JSON.readTree(g.getBinary("value", 0).getBytes()).get("offset").asLong());
                    } catch (IOException | NullPointerException e) {
                        // a malformed value is skipped, as the Python store skips it
                    }
                }
            } catch (FileNotFoundException e) {
                throw e;
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        return out;
    }

    /** Commit {@code offsets} for {@code group} atomically (one segment, one Delta commit). */
    void commit(String group, Map<TP, Long> offsets) {
        String commitId = UUID.randomUUID().toString().replace("-", "");
        for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
            TopicState s = load();
            if (s.version < 0 || s.deleted()) {
                create(s.version);
                continue;
            }
            int p = partitionFor(group, s.partitionCount());
            long leo = s.highWatermark(p), now = System.currentTimeMillis();
            String rel = String.format("partition=%d/%020d-%s.parquet", p, leo, UUID.randomUUID().toString().replace("-", ""));
            Path file = new Path(table, rel);
            long size = writeSegment(file, group, offsets, leo, now);
            ArrayNode lines = JSON.createArrayNode();
            ObjectNode info = lines.addObject().putObject("commitInfo");
            info.put("timestamp", now).put("operation", "WRITE");
            info.putObject("operationParameters").put("mode", "Append").put("partitionBy", "[\"partition\"]");
            info.put("engineInfo", ENGINE).put("clientVersion", ENGINE).put("isBlindAppend", true)
                .put("lakelog.commitId", commitId).put("lakelog.operation", "append");
            ObjectNode add = lines.addObject().putObject("add");
            add.put("path", rel);
            add.putObject("partitionValues").put("partition", String.valueOf(p));
            add.put("size", size).put("modificationTime", now).put("dataChange", true);
            ObjectNode stats = JSON.createObjectNode();
            String ts = STATS_TS.format(Instant.ofEpochMilli(now));
            stats.put("numRecords", offsets.size());
            stats.putObject("minValues").put("offset", leo).put("timestamp", ts);
            stats.putObject("maxValues").put("offset", leo + offsets.size() - 1).put("timestamp", ts);
            stats.putObject("nullCount").put("offset", 0).put("timestamp", 0);
            add.put("stats", stats.toString());
            lines.addObject().putObject("txn").put("appId", TopicState.LEO + p).put("version", leo + offsets.size())
                .put("lastUpdated", now);
            if (putIfAbsent(commitPath(s.version + 1), lines) || committedAs(s.version + 1, commitId)) return;
            try {
                fs.delete(file, false); // never referenced: the retry writes the records at the new log end
            } catch (IOException ignored) {
                // an orphan is harmless: vacuum removes it
            }
        }
        throw new IllegalStateException("committing the offsets of group " + group + " kept conflicting with other "
            + "commits to " + TOPIC + " (" + MAX_ATTEMPTS + " attempts)");
    }

    private Path commitPath(long version) {
        return new Path(new Path(table, "_delta_log"), TopicState.commitName(version));
    }

    /** Create the topic (version {@code current + 1}); losing the race to another creator is fine. */
    private void create(long current) {
        long now = System.currentTimeMillis();
        ArrayNode lines = JSON.createArrayNode();
        lines.addObject().putObject("commitInfo").put("timestamp", now).put("operation", "CREATE TABLE")
            .put("clientVersion", ENGINE).put("lakelog.operation", "create");
        if (current < 0) lines.addObject().putObject("protocol").put("minReaderVersion", 1).put("minWriterVersion", 2);
        ObjectNode meta = lines.addObject().putObject("metaData");
        meta.put("id", UUID.randomUUID().toString()).put("name", TOPIC).putNull("description");
        meta.putObject("format").put("provider", "parquet").putObject("options");
        meta.put("schemaString", TABLE_SCHEMA_JSON);
        meta.putArray("partitionColumns").add("partition");
        meta.put("createdTime", now);
        meta.putObject("configuration").put("lakelog.topicId", UUID.randomUUID().toString().replace("-", ""))
            .put("cleanup.policy", "compact").put("lakelog.partitions", String.valueOf(PARTITIONS));
        putIfAbsent(commitPath(current + 1), lines);
    }

    private long writeSegment(Path file, String group, Map<TP, Long> offsets, long base, long now) {
        SimpleGroupFactory f = new SimpleGroupFactory(FILE_SCHEMA);
        try (ParquetWriter<Group> w = ExampleParquetWriter.builder(HadoopOutputFile.fromPath(file, writeConf))
            .withType(FILE_SCHEMA).withConf(writeConf).withCompressionCodec(CompressionCodecName.SNAPPY)
            .withDictionaryEncoding(false).withWriteMode(ParquetFileWriter.Mode.CREATE).build()) {
            long off = base;
            for (Map.Entry<TP, Long> e : offsets.entrySet()) {
                ArrayNode key = JSON.createArrayNode().add(group).add(e.getKey().topic()).add(e.getKey().partition());
                ObjectNode value = JSON.createObjectNode().put("offset", e.getValue()).put("metadata", "spark")
                    .put("commit_timestamp", now);
                Group g = f.newGroup();
                g.add("offset", off++);
                g.add("timestamp", now * 1000);
                g.add("timestampType", 0);
                g.add("key", Binary.fromConstantByteArray(key.toString().getBytes(StandardCharsets.UTF_8)));
                g.add("value", Binary.fromConstantByteArray(value.toString().getBytes(StandardCharsets.UTF_8)));
                g.add("producerId", -1L);
                g.add("producerEpoch", -1);
                g.add("sequence", -1);
                w.write(g);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        try {
            return fs.getFileStatus(file).getLen();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Whether the commit file of {@code version} is the one with this commitId (its own, created by a lost try). */
    private boolean committedAs(long version, String commitId) {
        try {
            String text = TopicState.readText(fs, commitPath(version));
            for (String line : text.split("\n")) {
                JsonNode info = line.isBlank() ? null : JSON.readTree(line).get("commitInfo");
                if (info != null) return commitId.equals(info.path("lakelog.commitId").asText(null));
            }
            return false;
        } catch (FileNotFoundException e) {
            return false;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Create {@code target} holding the lines unless it exists: false when it does (another commit won). */
    private boolean putIfAbsent(Path target, ArrayNode lines) {
        StringBuilder body = new StringBuilder();
        for (JsonNode l : lines) body.append(l.toString()).append('\n');
        byte[] bytes = body.toString().getBytes(StandardCharsets.UTF_8);
        try {
            if (root.s3) return S3ConditionalCreate.create(fs, conf, target, bytes);
            Path tmp = new Path(target.getParent(), "." + UUID.randomUUID().toString().replace("-", "") + ".tmp");
            fs.mkdirs(target.getParent());
            try (OutputStream out = fs.create(tmp, false)) {
                out.write(bytes);
            }
            try {
                Files.createLink(Paths.get(target.toUri()), Paths.get(tmp.toUri())); // atomic, never replaces
                return true;
            } catch (FileAlreadyExistsException e) {
                return false;
            } finally {
                fs.delete(tmp, false);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
