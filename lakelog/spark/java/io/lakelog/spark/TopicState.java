package io.lakelog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.example.data.Group;
import org.apache.parquet.hadoop.ParquetReader;
import org.apache.parquet.hadoop.example.GroupReadSupport;
import org.apache.parquet.schema.GroupType;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.nio.charset.StandardCharsets;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.*;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A topic's state at one Delta version, read from its Delta log by the JVM: the newest checkpoint (found through
 * {@code _last_checkpoint}, or the newest one at or below a requested version) plus the JSON commits after it.
 * The same state as lakelog's Python {@code TopicSnapshot}: configuration, {@code txn} versions (the
 * {@code lakelog.leo.<P>} high watermarks and {@code lakelog.lso.<P>} log start floors) and live segments.
 * Anything it does not understand (a reader feature, a deletion vector, a multi-part checkpoint) fails.
 */
public final class TopicState {
    static final Pattern SEGMENT_NAME = Pattern.compile("^partition=(-?\\d+)/(\\d{20})-[^/]+\\.parquet$");
    static final ObjectMapper JSON = new ObjectMapper();
    public static final String LEO = "lakelog.leo.", LSO = "lakelog.lso.";
    /**
     * Commits are read in windows that double up to this many requests at once: on object storage each read is a
     * round trip (S3A: a HEAD and a GET), so a tail of n commits costs about log2(n) + n / 32 round trips rather
     * than n, while a look that finds no new commit still reads one name (BENCHMARKS.md, "Spark on S3").
     */
    static final int COMMIT_WINDOW_MAX = 32;
    private static final ThreadPoolExecutor COMMIT_READS = new ThreadPoolExecutor(COMMIT_WINDOW_MAX,
        COMMIT_WINDOW_MAX, 30, TimeUnit.SECONDS, new LinkedBlockingQueue<>(), r -> {
            Thread t = new Thread(r, "lakelog-delta-log-read");
            t.setDaemon(true);
            return t;
        });

    static {
        COMMIT_READS.allowCoreThreadTimeOut(true);
    }

    public final String topic;
    public long version = -1;
    public Map<String, String> configuration = new HashMap<>();
    /** The table schema as last committed ({@code metaData.schemaString}): where typed columns are declared. */
    public String schemaString;
    public Map<String, Long> txns = new HashMap<>();
    public Map<String, Segment> byPath = new HashMap<>();
    private Map<Integer, List<Segment>> parts; // sorted by base offset, built lazily

    TopicState(String topic) {
        this.topic = topic;
    }

    // -- derived values ---------------------------------------------------------------------
    public int partitionCount() {
        return Integer.parseInt(configuration.getOrDefault("lakelog.partitions", "1"));
    }

    public boolean deleted() {
        return "true".equals(configuration.get("lakelog.deleted"));
    }

    public long highWatermark(int p) {
        return txns.getOrDefault(LEO + p, 0L);
    }

    public List<Segment> segments(int p) {
        if (parts == null) {
            Map<Integer, List<Segment>> m = new HashMap<>();
            for (Segment s : byPath.values()) m.computeIfAbsent(s.partition(), k -> new ArrayList<>()).add(s);
            for (List<Segment> l : m.values()) l.sort(Comparator.comparingLong(Segment::baseOffset));
            parts = m;
        }
        return parts.getOrDefault(p, Collections.emptyList());
    }

    public long logStartOffset(int p) {
        long floor = txns.getOrDefault(LSO + p, 0L), hw = highWatermark(p);
        List<Segment> segs = segments(p);
        long first = segs.isEmpty() ? hw : segs.get(0).baseOffset();
        return Math.min(Math.max(floor, first), hw);
    }

    /** Segments holding offsets >= offset, in offset order (lakelog's SegmentIndex.segments_from). */
    public List<Segment> segmentsFrom(int p, long offset) {
        List<Segment> segs = segments(p);
        int lo = 0, hi = segs.size();
        while (lo < hi) { // bisect_right over base offsets
            int mid = (lo + hi) >>> 1;
            if (segs.get(mid).baseOffset() <= offset) lo = mid + 1; else hi = mid;
        }
        int i = Math.max(lo - 1, 0);
        List<Segment> out = new ArrayList<>();
        for (Segment s : segs.subList(i, segs.size())) if (s.lastOffset() >= offset) out.add(s);
        return out;
    }

    /** Position of the first segment whose running max timestamp >= tsUs. */
    public int firstSegmentWithMaxTimestampAtLeast(int p, long tsUs) {
        long running = Long.MIN_VALUE;
        List<Segment> segs = segments(p);
        for (int i = 0; i < segs.size(); i++) {
            running = Math.max(running, segs.get(i).maxTimestamp());
            if (running >= tsUs) return i;
        }
        return segs.size();
    }

    // -- replay -------------------------------------------------------------------------------
    private void checkProtocol(int minReader, Collection<String> readerFeatures) {
        if (minReader > 3 || minReader == 2 || (readerFeatures != null && !readerFeatures.isEmpty()))
            throw LakelogError.unsupported("topic " + topic + " uses Delta reader version " + minReader
                + (readerFeatures == null || readerFeatures.isEmpty() ? "" : " with reader features " + readerFeatures)
                + ", which lakelog's JVM reader does not support (it reads reader version 1 tables with no features)");
    }

    private void setConfiguration(Map<String, String> conf) {
        if (!Objects.equals(conf.get("lakelog.topicId"), configuration.get("lakelog.topicId"))) {
            byPath = new HashMap<>(); // a new incarnation: nothing of the old one carries over
            txns = new HashMap<>();
        }
        configuration = conf;
    }

    private void addSegment(String path, long size, long modTime, String stats, boolean hasDeletionVector) {
        if (hasDeletionVector) throw LakelogError.unsupported("segment " + path + " of topic " + topic + " has a "
            + "deletion vector, which lakelog's JVM reader does not support");
        Segment s = segmentFromAdd(path, size, modTime, stats);
        if (s != null && !byPath.containsKey(path)) byPath.put(path, s);
    }

    static Segment segmentFromAdd(String path, long size, long modTime, String statsText) {
        Matcher m = SEGMENT_NAME.matcher(path);
        if (!m.matches()) return null;
        JsonNode stats;
        try {
            stats = statsText == null ? JSON.createObjectNode() : JSON.readTree(statsText);
        } catch (IOException e) {
            throw new IllegalStateException("bad stats of " + path, e);
        }
        JsonNode mins = stats.path("minValues"), maxs = stats.path("maxValues");
        long base = Long.parseLong(m.group(2));
        long records = stats.path("numRecords").asLong(0);
        JsonNode last = maxs.get("offset");
        return new Segment(Integer.parseInt(m.group(1)), base,
            last != null && !last.isNull() ? last.asLong() : base + records - 1, records, size,
            parseTs(mins.path("timestamp").asText(null), Long.MIN_VALUE),
            parseTs(maxs.path("timestamp").asText(null), Long.MAX_VALUE), path, modTime);
    }

    static long parseTs(String text, long dflt) {
        if (text == null || text.isEmpty()) return dflt;
        String t = text.replace("Z", "+00:00");
        java.time.Instant i;
        try {
            i = OffsetDateTime.parse(t).toInstant();
        } catch (Exception e) {
            i = LocalDateTime.parse(t).toInstant(ZoneOffset.UTC);
        }
        return i.getEpochSecond() * 1_000_000L + i.getNano() / 1000;
    }

    void applyCommit(long v, String text) throws IOException {
        for (String line : text.split("\n")) {
            if (line.isBlank()) continue;
            JsonNode a = JSON.readTree(line);
            if (a.has("add")) {
                JsonNode add = a.get("add");
                JsonNode dv = add.get("deletionVector");
                addSegment(add.get("path").asText(), add.path("size").asLong(0), add.path("modificationTime").asLong(0),
                    add.hasNonNull("stats") ? (add.get("stats").isTextual() ? add.get("stats").asText()
                        : add.get("stats").toString()) : null, dv != null && !dv.isNull());
            } else if (a.has("remove")) {
                removeSegment(a.get("remove").get("path").asText());
            } else if (a.has("txn")) {
                txns.put(a.get("txn").get("appId").asText(), a.get("txn").get("version").asLong());
            } else if (a.has("metaData")) {
                Map<String, String> conf = new HashMap<>();
                a.get("metaData").path("configuration").fields().forEachRemaining(e ->
                    conf.put(e.getKey(), e.getValue().isNull() ? null : e.getValue().asText()));
                setConfiguration(conf);
                if (a.get("metaData").hasNonNull("schemaString")) schemaString = a.get("metaData").get("schemaString").asText();
            } else if (a.has("protocol")) {
                JsonNode p = a.get("protocol");
                List<String> features = new ArrayList<>();
                p.path("readerFeatures").forEach(f -> features.add(f.asText()));
                checkProtocol(p.path("minReaderVersion").asInt(1), features);
            }
        }
        version = v;
    }

    private void removeSegment(String path) {
        byPath.remove(path);
    }

    // -- checkpoint ------------------------------------------------------------------------------
    private static boolean present(Group g, String field) {
        GroupType t = g.getType();
        return t.containsField(field) && g.getFieldRepetitionCount(field) > 0;
    }

    private static String str(Group g, String field) {
        return present(g, field) ? g.getString(field, 0) : null;
    }

    private static Map<String, String> map(Group g, String field) {
        Map<String, String> out = new HashMap<>();
        if (!present(g, field)) return out;
        Group m = g.getGroup(field, 0);
        String rep = m.getType().getFieldName(0);
        for (int i = 0; i < m.getFieldRepetitionCount(rep); i++) {
            Group kv = m.getGroup(rep, i);
            String k = kv.getString(0, 0);
            out.put(k, kv.getFieldRepetitionCount(1) > 0 ? kv.getString(1, 0) : null);
        }
        return out;
    }

    void applyCheckpoint(Configuration conf, Path file, long v) throws IOException {
        Map<String, String> metaConf = null;
        try (ParquetReader<Group> r = ParquetReader.builder(new GroupReadSupport(), file).withConf(conf).build()) {
            for (Group g = r.read(); g != null; g = r.read()) {
                if (present(g, "add")) {
                    Group add = g.getGroup("add", 0);
                    addSegment(add.getString("path", 0), present(add, "size") ? add.getLong("size", 0) : 0,
                        present(add, "modificationTime") ? add.getLong("modificationTime", 0) : 0, str(add, "stats"),
                        present(add, "deletionVector"));
                } else if (present(g, "txn")) {
                    Group t = g.getGroup("txn", 0);
                    txns.put(t.getString("appId", 0), t.getLong("version", 0));
                } else if (present(g, "metaData")) {
                    metaConf = map(g.getGroup("metaData", 0), "configuration");
                    String schema = str(g.getGroup("metaData", 0), "schemaString");
                    if (schema != null) schemaString = schema;
                } else if (present(g, "protocol")) {
                    Group p = g.getGroup("protocol", 0);
                    List<String> features = new ArrayList<>();
                    if (present(p, "readerFeatures")) {
                        Group l = p.getGroup("readerFeatures", 0);
                        String rep = l.getType().getFieldName(0);
                        for (int i = 0; i < l.getFieldRepetitionCount(rep); i++) {
                            Group el = l.getGroup(rep, i);
                            features.add(el.getString(0, 0));
                        }
                    }
                    checkProtocol(present(p, "minReaderVersion") ? p.getInteger("minReaderVersion", 0) : 1, features);
                }
            }
        }
        if (metaConf != null) configuration = metaConf; // a checkpoint holds one incarnation's state
        version = v;
    }

    // -- loading ------------------------------------------------------------------------------------
    static String commitName(long v) {
        return String.format("%020d.json", v);
    }

    static String readText(FileSystem fs, Path p) throws IOException {
        try (FSDataInputStream in = fs.open(p)) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    /** Newest single-file checkpoint version at or below {@code until} (any if until < 0), or -1. */
    static long checkpointAtOrBelow(FileSystem fs, Path log, long until) throws IOException {
        if (until < 0) {
            try {
                JsonNode last = JSON.readTree(readText(fs, new Path(log, "_last_checkpoint")));
                if (last.has("parts") && last.get("parts").asInt(1) > 1) throw LakelogError.unsupported(
                    "multi-part checkpoints are not supported by lakelog's JVM reader (" + log + ")");
                if (last.has("v2Checkpoint")) throw LakelogError.unsupported("V2 checkpoints are not supported by "
                    + "lakelog's JVM reader (" + log + ")");
                return last.get("version").asLong();
            } catch (FileNotFoundException e) {
                return -1;
            }
        }
        long best = -1;
        FileStatus[] st;
        try {
            st = fs.listStatus(log);
        } catch (FileNotFoundException e) {
            return -1;
        }
        for (FileStatus s : st) {
            String n = s.getPath().getName();
            if (n.matches("\\d{20}\\.checkpoint\\.parquet")) {
                long v = Long.parseLong(n.substring(0, 20));
                if (v <= until && v > best) best = v;
            }
        }
        return best;
    }

    /** The topic's state at {@code until} (its latest version if until < 0); version -1 if it has no table. */
    public static TopicState load(FileSystem fs, Configuration conf, Path table, String topic, long until) throws IOException {
        Path log = new Path(table, "_delta_log");
        for (int attempt = 0; ; attempt++) {
            TopicState s = new TopicState(topic);
            long cp = checkpointAtOrBelow(fs, log, until);
            if (cp >= 0) {
                Path file = new Path(log, String.format("%020d.checkpoint.parquet", cp));
                if (fs.exists(file)) s.applyCheckpoint(conf, file, cp);
            }
            long next = s.version + 1;
            for (String text : readCommits(fs, log, next, until, 4)) s.applyCommit(next++, text);
            boolean gone = (until >= 0 && next <= until) || (until < 0 && s.version < cp);
            if (!gone) return s;
            if (attempt >= 3) throw new IOException("the Delta log of " + table + " has no commit after version "
                + s.version + " although a checkpoint or the requested version lies beyond it");
        }
    }

    /**
     * Advance this state to the latest version by the JSON commits after it. False when the next commit was cleaned
     * up behind a checkpoint (as lakelog/storage/delta_log.py's LogTailGone): the caller must load afresh.
     */
    public boolean advance(FileSystem fs, Path table) throws IOException {
        Path log = new Path(table, "_delta_log");
        long next = version + 1;
        List<String> texts = readCommits(fs, log, next, -1, 1);
        if (texts.isEmpty()) return next > checkpointAtOrBelow(fs, log, -1);
        for (String text : texts) applyCommit(next++, text);
        parts = null;
        return true;
    }

    /**
     * The texts of the commits {@code from}, {@code from + 1}, ... up to {@code until} (no bound if negative),
     * ending before the first that does not exist; read concurrently in windows of {@code window} commits, doubled
     * per round up to {@link #COMMIT_WINDOW_MAX}. Commits are contiguous (each is created only once the one before
     * exists), so the result is the log as it was at some moment during the call.
     */
    static List<String> readCommits(FileSystem fs, Path log, long from, long until, int window) throws IOException {
        List<String> out = new ArrayList<>();
        for (long v = from; until < 0 || v <= until; window = Math.min(2 * window, COMMIT_WINDOW_MAX)) {
            int n = (int) (until < 0 ? window : Math.min(window, until - v + 1));
            List<Future<String>> reads = new ArrayList<>(n);
            for (long w = v; w < v + n; w++) {
                Path p = new Path(log, commitName(w));
                reads.add(COMMIT_READS.submit(() -> {
                    try {
                        return readText(fs, p);
                    } catch (FileNotFoundException e) {
                        return null;
                    }
                }));
            }
            try {
                for (Future<String> f : reads) {
                    String text = f.get();
                    if (text == null) return out;
                    out.add(text);
                }
            } catch (ExecutionException e) {
                Throwable c = e.getCause();
                if (c instanceof IOException io) throw io;
                if (c instanceof RuntimeException re) throw re;
                throw new IOException(c);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new InterruptedIOException("interrupted reading the Delta log " + log);
            } finally {
                for (Future<String> f : reads) f.cancel(false); // after a missing commit: the rest are not needed
            }
            v += n;
        }
        return out;
    }

    /** This state as JSON (for the parity test against the Python reader). */
    public String toJson() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("version", version);
        out.put("configuration", new TreeMap<>(configuration));
        out.put("txns", new TreeMap<>(txns));
        List<Object> segs = new ArrayList<>();
        List<Segment> all = new ArrayList<>(byPath.values());
        all.sort(Comparator.comparingInt(Segment::partition).thenComparingLong(Segment::baseOffset));
        for (Segment s : all) segs.add(Arrays.asList(s.partition(), s.baseOffset(), s.lastOffset(), s.records(), s.bytes(),
            s.minTimestamp(), s.maxTimestamp(), s.path()));
        out.put("segments", segs);
        Map<String, Object> hw = new TreeMap<>(), lso = new TreeMap<>();
        for (int p = 0; p < partitionCount(); p++) {
            hw.put(String.valueOf(p), highWatermark(p));
            lso.put(String.valueOf(p), logStartOffset(p));
        }
        out.put("high_watermarks", hw);
        out.put("log_start_offsets", lso);
        try {
            return JSON.writeValueAsString(out);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }
}
