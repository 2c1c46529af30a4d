package io.lakelog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A topic's state at one Delta version, as lakelog's Python TopicSnapshot derives it: the configuration
 * (lakelog.partitions, lakelog.topicId, lakelog.deleted), the live segments, and the txn versions
 * (lakelog.leo.P is the high watermark, lakelog.lso.P the delete-records floor). Actions are applied in
 * commit order; a metaData action with another topic id starts a new incarnation. Not thread-safe.
 */
public final class TopicLog {
    static final String PARTITIONS = "lakelog.partitions";
    static final String TOPIC_ID = "lakelog.topicId";
    static final String DELETED = "lakelog.deleted";
    static final String LEO = "lakelog.leo.";
    static final String LSO = "lakelog.lso.";
    private static final Pattern SEGMENT = Pattern.compile("^partition=(-?\\d+)/(\\d{20})-[^/]+\\.parquet$");
    private static final ObjectMapper JSON = new ObjectMapper();

    long version = -1;
    Map<String, String> configuration = new HashMap<>();
    final Map<String, SegmentFile> segments = new HashMap<>();
    final Map<String, Long> txns = new HashMap<>();

    public long version() {
        return version;
    }

    public int partitionCount() {
        return Integer.parseInt(configuration.getOrDefault(PARTITIONS, "1"));
    }

    public boolean deleted() {
        return "true".equals(configuration.get(DELETED));
    }

    public String topicId() {
        return configuration.get(TOPIC_ID);
    }

    public long highWatermark(int partition) {
        return txns.getOrDefault(LEO + partition, 0L);
    }

    /** The delete-records floor or the first segment's base, whichever is higher, never above the HW. */
    public long logStartOffset(int partition) {
        long floor = txns.getOrDefault(LSO + partition, 0L);
        long hw = highWatermark(partition);
        long first = segments.values().stream().filter(s -> s.partition == partition)
                .mapToLong(s -> s.baseOffset).min().orElse(hw);
        return Math.min(Math.max(floor, first), hw);
    }

    /** Live segments of a partition in offset order. */
    public List<SegmentFile> segments(int partition) {
        List<SegmentFile> out = new ArrayList<>();
        for (SegmentFile s : segments.values()) {
            if (s.partition == partition) {
                out.add(s);
            }
        }
        out.sort(Comparator.comparingLong((SegmentFile s) -> s.baseOffset).thenComparing(s -> s.path));
        return out;
    }

    void setConfiguration(Map<String, String> next) {
        if (!java.util.Objects.equals(next.get(TOPIC_ID), configuration.get(TOPIC_ID))) {
            segments.clear();  // a new incarnation: nothing of the old one carries over
            txns.clear();
        }
        configuration = new HashMap<>(next);
    }

    void checkProtocol(int minReaderVersion, List<String> readerFeatures) {
        if (minReaderVersion > 3 || (readerFeatures != null && !readerFeatures.isEmpty())) {
            throw new UnsupportedTableException("the table needs reader version " + minReaderVersion
                    + " with features " + readerFeatures + "; lakelog's JVM reader knows reader version 1 only");
        }
    }

    void add(String path, long size, String stats, boolean hasDeletionVector) {
        if (hasDeletionVector) {
            throw new UnsupportedTableException("segment " + path + " has a deletion vector; lakelog never writes one");
        }
        Matcher m = SEGMENT.matcher(path);
        if (!m.matches()) {
            return;  // not a segment (lakelog writes no other data files)
        }
        long base = Long.parseLong(m.group(2));
        long records = 0;
        Long last = null;
        if (stats != null && !stats.isEmpty()) {
            try {
                JsonNode node = JSON.readTree(stats);
                records = node.path("numRecords").asLong(0);
                JsonNode max = node.path("maxValues").path("offset");
                if (max.isNumber()) {
                    last = max.asLong();
                }
            } catch (java.io.IOException e) {
                throw new UnsupportedTableException("unreadable stats of " + path + ": " + e.getMessage());
            }
        }
        segments.put(path, new SegmentFile(path, Integer.parseInt(m.group(1)), base,
                last != null ? last : base + records - 1, records, size));
    }

    void remove(String path) {
        segments.remove(path);
    }

    void txn(String appId, long v) {
        txns.put(appId, v);
    }

    /** The state as JSON (for tools and the parity test): version, partitions with hw, lso and segments. */
    public String toJson() {
        Map<String, Object> out = new TreeMap<>();
        out.put("version", version);
        out.put("topic_id", topicId());
        out.put("deleted", deleted());
        List<Map<String, Object>> parts = new ArrayList<>();
        for (int p = 0; p < partitionCount(); p++) {
            Map<String, Object> part = new TreeMap<>();
            part.put("partition", p);
            part.put("high_watermark", highWatermark(p));
            part.put("log_start_offset", logStartOffset(p));
            List<String> paths = new ArrayList<>();
            for (SegmentFile s : segments(p)) {
                paths.add(s.path);
            }
            part.put("segments", paths);
            parts.add(part);
        }
        out.put("partitions", parts);
        try {
            return JSON.writeValueAsString(out);
        } catch (java.io.IOException e) {
            throw new IllegalStateException(e);
        }
    }
}
