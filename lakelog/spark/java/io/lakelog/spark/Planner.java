package io.lakelog.spark;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.example.data.Group;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.ParquetReader;
import org.apache.parquet.hadoop.api.ReadSupport;
import org.apache.parquet.hadoop.example.GroupReadSupport;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.parquet.schema.MessageType;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.*;
import java.util.regex.Pattern;

/**
 * The subscribed topics' states taken at planning, and the batch rules of lakelog/spark/source_offsets.py over
 * them: starting and ending offsets, data-loss checks, and the exact [start, end) range of every partition.
 */
public final class Planner {
    static final Pattern LEGAL_TOPIC = Pattern.compile("[a-zA-Z0-9._-]+");
    static final String HINT_TRUE = "Some data may have been lost because it is not available in lakelog any more: it "
        + "was removed by retention or delete-records, or the topic was deleted, before it was processed. If you don't "
        + "want the query to fail in such cases, set the source option \"failOnDataLoss\" to \"false\".";
    static final String HINT_FALSE = "Some data may have been lost because it is not available in lakelog any more; "
        + "continuing from the log start offset because \"failOnDataLoss\" is \"false\".";
    static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(Planner.class);

    /** One partition's records start <= offset < end. */
    public record Range(TP tp, long start, long end) implements java.io.Serializable {
    }

    /**
     * A segment's share of a range: offsets lo <= offset < hi of it are read; {@code trimmed} when the range cuts
     * the file (it must then be read with the range's offset filter); {@code bytes} its size pro rata.
     */
    public record Slice(Segment seg, long lo, long hi, boolean trimmed, long bytes) {
    }

    /** The slices of the segments holding offsets of {@code r}, in offset order (the topic's state must be loaded). */
    public List<Slice> slices(Range r) {
        List<Slice> out = new ArrayList<>();
        for (Segment seg : states.get(r.tp().topic()).segmentsFrom(r.tp().partition(), r.start())) {
            if (seg.baseOffset() >= r.end()) break;
            long lo = Math.max(r.start(), seg.baseOffset()), hi = Math.min(r.end(), seg.lastOffset() + 1);
            if (lo >= hi) continue;
            long span = Math.max(1, seg.lastOffset() + 1 - seg.baseOffset());
            out.add(new Slice(seg, lo, hi, r.start() > seg.baseOffset() || r.end() <= seg.lastOffset(),
                Math.max(1, seg.bytes() * (hi - lo) / span)));
        }
        return out;
    }

    final SourceOptions o;
    final Root root;
    final Configuration conf;
    final FileSystem fs;
    public final TreeMap<String, TopicState> states = new TreeMap<>();

    /**
     * Planners that a load-time validation loaded, by subscription and root, for the planning that follows it to
     * advance rather than load again: Spark calls the provider two or three times for one {@code load()} and the
     * query is planned after, and on S3 a load reads every commit since the checkpoint, a HEAD and a GET each
     * (BENCHMARKS.md, "Spark on S3"). Advancing reads only the commits since, so a reused planner is as fresh as a
     * new one. A few are kept; each is taken by one planning.
     */
    static final int KEPT = 16;
    private static final LinkedHashMap<String, Planner> VALIDATED = new LinkedHashMap<>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Planner> eldest) {
            return size() > KEPT;
        }
    };

    static String key(SourceOptions o, Root root) {
        return root.uri + "|" + new TreeMap<>(root.hadoopOptions) + "|" + o.kind + "|" + o.topics + "|" + o.pattern
            + "|" + o.assignment;
    }

    /** Keep this validated planner for the planning of the same subscription. */
    Planner keep() {
        synchronized (VALIDATED) {
            VALIDATED.put(key(o, root), this);
        }
        return this;
    }

    /** A planner for {@code o}: the states a validation of the same subscription loaded, else none (call advance). */
    static Planner forPlanning(SourceOptions o, Root root, Configuration conf) {
        Planner kept;
        synchronized (VALIDATED) {
            kept = VALIDATED.remove(key(o, root));
        }
        Planner p = new Planner(o, root, conf);
        if (kept != null) p.states.putAll(kept.states);
        return p;
    }

    public Planner(SourceOptions o, Root root, Configuration conf) {
        this.o = o;
        this.root = root;
        this.conf = conf;
        try {
            this.fs = root.fs(conf);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static void validateTopicName(String name) {
        if (name.isEmpty() || name.equals(".") || name.equals("..") || name.length() > 249
            || !LEGAL_TOPIC.matcher(name).matches())
            throw new LakelogError("INVALID_TOPIC_EXCEPTION", 17, "Topic name '" + name + "' is illegal", null);
    }

    TopicState load(String topic) {
        try {
            return TopicState.load(fs, conf, root.topicPath(topic), topic, -1);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Load every subscribed topic afresh; unknown (or deleted) topics of subscribe/assign fail. */
    public Planner refresh() {
        states.clear();
        return advance();
    }

    /**
     * Advance the loaded states by their Delta logs' new commits, load newly subscribed topics (a pattern's new
     * matches) and drop topics no longer subscribed; unknown (or deleted) topics of subscribe/assign fail.
     */
    public Planner advance() {
        List<String> wanted = new ArrayList<>();
        boolean pattern = o.kind.equals("subscribePattern");
        if (pattern) {
            Pattern p = Pattern.compile(o.pattern);
            FileStatus[] dirs;
            try {
                dirs = fs.listStatus(root.topicsDir());
            } catch (FileNotFoundException e) {
                dirs = new FileStatus[0];
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            for (FileStatus d : dirs) {
                String name = d.getPath().getName();
                if (d.isDirectory() && !name.startsWith("__") && LEGAL_TOPIC.matcher(name).matches()
                    && p.matcher(name).matches()) wanted.add(name);
            }
        } else {
            wanted.addAll(o.kind.equals("assign") ? o.assignment.keySet() : o.topics);
        }
        String option = o.kind.equals("assign") ? "assign" : "subscribe";
        for (String topic : wanted) {
            TopicState s = states.get(topic);
            if (s == null) {
                if (!pattern) validateTopicName(topic);
                s = load(topic);
            } else {
                try {
                    if (!s.advance(fs, root.topicPath(topic))) s = load(topic); // the log was cleaned up behind a checkpoint
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            }
            if (s.version < 0 || s.deleted()) {
                states.remove(topic);
                if (pattern) continue; // deleted between listing and loading
                throw LakelogError.unknownTopic("topic " + topic + " (option '" + option + "') does not exist under "
                    + root.display());
            }
            states.put(topic, s);
        }
        states.keySet().retainAll(new HashSet<>(wanted));
        return this;
    }

    public List<TP> partitions() {
        List<TP> out = new ArrayList<>();
        if (o.kind.equals("assign")) {
            for (Map.Entry<String, TreeSet<Integer>> e : o.assignment.entrySet()) {
                TopicState s = states.get(e.getKey());
                for (int p : e.getValue()) {
                    if (p >= s.partitionCount()) throw LakelogError.unknownTopic("partition " + p + " of topic "
                        + e.getKey() + " (option 'assign') does not exist: the topic has " + s.partitionCount()
                        + " partitions");
                    out.add(new TP(e.getKey(), p));
                }
            }
            return out;
        }
        for (TopicState s : states.values())
            for (int p = 0; p < s.partitionCount(); p++) out.add(new TP(s.topic, p));
        return out;
    }

    long hw(TP tp) {
        return states.get(tp.topic()).highWatermark(tp.partition());
    }

    long lso(TP tp) {
        return states.get(tp.topic()).logStartOffset(tp.partition());
    }

    static String fmt(Collection<TP> s) {
        List<String> l = new ArrayList<>();
        for (TP tp : new TreeSet<>(s)) l.add(tp.toString());
        return "{" + String.join(", ", l) + "}";
    }

    static void checkCovers(String option, Collection<TP> specified, List<TP> tps) {
        if (!new HashSet<>(specified).equals(new HashSet<>(tps)))
            throw LakelogError.invalidOption(option, "If " + SourceOptions.display(option) + " contains specific offsets, "
                + "you must specify all topic partitions. Use -1 for latest, -2 for earliest. Specified: "
                + fmt(specified) + " Assigned: " + fmt(tps));
    }

    /** First offset whose timestamp >= tsMs (Kafka's offsetsForTimes), or null. */
    Long offsetForTimestamp(TP tp, long tsMs) {
        TopicState s = states.get(tp.topic());
        if (tp.partition() >= s.partitionCount()) throw LakelogError.unknownTopic("partition " + tp.partition()
            + " of topic " + tp.topic() + " does not exist");
        long lso = s.logStartOffset(tp.partition()), tsUs = tsMs * 1000;
        List<Segment> segs = s.segments(tp.partition());
        for (int i = s.firstSegmentWithMaxTimestampAtLeast(tp.partition(), tsUs); i < segs.size(); i++) {
            Path file = new Path(root.topicPath(tp.topic()), segs.get(i).path());
            try {
                MessageType schema;
                try (ParquetFileReader r = ParquetFileReader.open(HadoopInputFile.fromPath(file, conf))) {
                    schema = r.getFooter().getFileMetaData().getSchema();
                }
                Configuration c = new Configuration(conf);
                c.set(ReadSupport.PARQUET_READ_SCHEMA,
                    new MessageType("m", schema.getType("offset"), schema.getType("timestamp")).toString());
                try (ParquetReader<Group> r = ParquetReader.builder(new GroupReadSupport(), file).withConf(c).build()) {
                    for (Group g = r.read(); g != null; g = r.read()) {
                        long off = g.getLong("offset", 0);
                        if (off >= lso && g.getLong("timestamp", 0) >= tsUs) return off;
                    }
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        return null;
    }

    Map<TP, Long> resolveStarting(SourceOptions.Spec spec, List<TP> tps) {
        return resolveStarting(spec, tps, tps);
    }

    /**
     * Starting offsets of {@code tps}; a spec naming partitions must name every partition of {@code covers}, as the
     * Kafka source requires of all subscribed partitions, also when only some (those a consumer group has no
     * committed offset for) need resolving.
     */
    Map<TP, Long> resolveStarting(SourceOptions.Spec spec, List<TP> tps, List<TP> covers) {
        Map<TP, Long> out = new TreeMap<>();
        switch (spec.kind) {
            case EARLIEST: for (TP tp : tps) out.put(tp, lso(tp)); return out;
            case LATEST: for (TP tp : tps) out.put(tp, hw(tp)); return out;
            case OFFSETS:
                checkCovers("startingoffsets", spec.values.keySet(), covers);
                for (TP tp : tps) {
                    long v = spec.values.get(tp);
                    out.put(tp, v == SourceOptions.EARLIEST ? lso(tp) : v == SourceOptions.LATEST ? hw(tp) : v);
                }
                return out;
            default:
        }
        String option = spec.kind == SourceOptions.Spec.Kind.GLOBAL_TIMESTAMP ? "startingtimestamp" : "startingoffsetsbytimestamp";
        Map<TP, Long> stamps = new TreeMap<>();
        if (spec.kind == SourceOptions.Spec.Kind.GLOBAL_TIMESTAMP) for (TP tp : tps) stamps.put(tp, spec.timestampMs);
        else {
            checkCovers(option, spec.values.keySet(), covers);
            for (TP tp : tps) stamps.put(tp, spec.values.get(tp));
        }
        for (Map.Entry<TP, Long> e : stamps.entrySet()) {
            TP tp = e.getKey();
            Long found = offsetForTimestamp(tp, e.getValue());
            if (found == null) {
                if (o.strategy.equals("latest")) found = hw(tp);
                else throw LakelogError.invalidOption(option, "No offset matched from request of topic-partition " + tp
                    + " and timestamp " + e.getValue() + " (option '" + SourceOptions.display(option) + "'); set "
                    + "'startingOffsetsByTimestampStrategy' to 'latest' to start from the latest offset instead");
            }
            out.put(tp, found);
        }
        return out;
    }

    Map<TP, Long> resolveEnding(SourceOptions.Spec spec, List<TP> tps) {
        Map<TP, Long> out = new TreeMap<>();
        switch (spec.kind) {
            case LATEST: for (TP tp : tps) out.put(tp, hw(tp)); return out;
            case OFFSETS:
                checkCovers("endingoffsets", spec.values.keySet(), tps);
                for (Map.Entry<TP, Long> e : spec.values.entrySet()) {
                    TP tp = e.getKey();
                    long v = e.getValue(), h = hw(tp);
                    if (v == SourceOptions.LATEST) v = h;
                    else if (v > h) throw LakelogError.offsetOutOfRange("endingOffsets for " + tp + " (" + v + ") is "
                        + "beyond the high watermark (" + h + "): only committed records can be read");
                    out.put(tp, v);
                }
                return out;
            case GLOBAL_TIMESTAMP:
            case TIMESTAMPS:
                Map<TP, Long> stamps = new TreeMap<>();
                if (spec.kind == SourceOptions.Spec.Kind.GLOBAL_TIMESTAMP) for (TP tp : tps) stamps.put(tp, spec.timestampMs);
                else {
                    checkCovers("endingoffsetsbytimestamp", spec.values.keySet(), tps);
                    stamps.putAll(spec.values);
                }
                for (Map.Entry<TP, Long> e : stamps.entrySet()) {
                    Long found = offsetForTimestamp(e.getKey(), e.getValue());
                    out.put(e.getKey(), found == null ? hw(e.getKey()) : found);
                }
                return out;
            default:
                throw LakelogError.invalidOption("endingoffsets", "ending offset can't be earliest");
        }
    }

    long checkDataLoss(TP tp, long start) {
        long lso = lso(tp);
        if (start >= lso) return start;
        String message = "Offsets [" + start + ", " + lso + ") of " + tp + " are no longer available: the log start "
            + "offset is " + lso + ".";
        if (o.failOnDataLoss) throw LakelogError.offsetOutOfRange(message + " " + HINT_TRUE);
        LOG.warn(message + " " + HINT_FALSE);
        return lso;
    }

    /** The batch query's ranges, resolved against the states loaded by {@link #refresh()}. */
    public List<Range> batchRanges() {
        List<TP> tps = partitions();
        Map<TP, Long> starts = resolveStarting(o.starting, tps), ends = resolveEnding(o.ending, tps);
        List<Range> out = new ArrayList<>();
        for (TP tp : tps) {
            long start = checkDataLoss(tp, starts.get(tp)), end = ends.get(tp);
            if (end < start) throw LakelogError.invalidOption("endingoffsets", "The ending offset of " + tp + " (" + end
                + ") is before its starting offset (" + start + "): check the options 'startingOffsets'/"
                + "'startingTimestamp' and 'endingOffsets'/'endingTimestamp'");
            out.add(new Range(tp, start, end));
        }
        return out;
    }
}
