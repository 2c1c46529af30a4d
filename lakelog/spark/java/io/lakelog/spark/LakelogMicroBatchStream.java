package io.lakelog.spark;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.paths.SparkPath;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.*;
import org.apache.spark.sql.execution.datasources.FileFormat$;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import scala.jdk.javaapi.CollectionConverters;

import java.util.*;

/**
 * {@code spark.readStream.format("lakelog")} on the JVM, with the Python source's semantics
 * (lakelog/spark/spark_source.py LakelogStreamReader): offsets are the Kafka source's JSON ({@link LakelogOffset});
 * a new query starts at the group's committed offsets ({@code groupId}), else at startingOffsets /
 * startingTimestamp / startingOffsetsByTimestamp (default latest); maxOffsetsPerTrigger is split over partitions
 * by lag ({@link RateLimit}); minOffsetsPerTrigger waits for data up to maxTriggerDelay; Trigger.AvailableNow stops
 * at the high watermarks of the query's start; partitions that appear later start at their log start offset.
 *
 * <p>Runs on the driver; it keeps the subscribed topics' states and advances them by their Delta logs' new
 * commits. Micro-batches are read by the batch path's Parquet reader ({@link SegmentReaderFactory}).
 *
 * <p>With {@code groupId} the end of every completed micro-batch is committed to the group in
 * {@code __consumer_offsets} ({@link ConsumerGroupOffsets}). Spark reports a batch done through {@link #commit}
 * only when it plans the next one -- for Trigger.AvailableNow the last batch's commit comes on the next run -- so
 * the start of every {@link #latestOffset} call is committed too: the engine asks only once the batch ending
 * there completed.
 */
public final class LakelogMicroBatchStream implements MicroBatchStream, SupportsTriggerAvailableNow, ReportsSourceMetrics {
    static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(LakelogMicroBatchStream.class);
    static final StructType PARTITION_SCHEMA = new StructType()
        .add("topic", DataTypes.StringType).add("partition", DataTypes.IntegerType);

    private final SourceOptions o;
    private final Root root;
    private final Configuration conf;
    private final StructType schema;
    private final SparkSession session;
    private final Planner planner;
    private Map<TP, Long> target;     // AvailableNow: the high watermarks when the query started
    private Map<TP, Long> latest;     // for reportLatestOffset
    private Map<TP, Long> committed;  // the group's offsets last committed by this stream
    private long lastTriggerMs;
    private Map<String, long[]> lastTrims = new HashMap<>(), lastSpans = new HashMap<>();
    private ConsumerGroupOffsets group;
    private volatile Set<String> readColumns; // the columns the query reads (StreamColumnPruning); null: all

    LakelogMicroBatchStream(SourceOptions o, StructType schema, SparkSession session) {
        this.o = o;
        this.root = Root.resolve(o.root, o.storage);
        this.session = session;
        this.conf = LakelogSource.hadoopConf(session, root);
        this.schema = schema;
        this.planner = Planner.forPlanning(o, root, conf);
    }

    private SparkSession spark() {
        return SparkSession.getActiveSession().getOrElse(() -> session);
    }

    private ConsumerGroupOffsets group() {
        if (group == null) group = new ConsumerGroupOffsets(root, conf);
        return group;
    }

    // -- offsets ---------------------------------------------------------------------------------------------
    @Override
    public Offset initialOffset() {
        planner.advance();
        List<TP> tps = planner.partitions();
        Map<TP, Long> fromGroup = o.groupId != null ? group().fetch(o.groupId) : Map.of();
        List<TP> missing = new ArrayList<>();
        for (TP tp : tps) if (!fromGroup.containsKey(tp)) missing.add(tp);
        Map<TP, Long> starts = new TreeMap<>(missing.isEmpty() ? Map.of()
            : planner.resolveStarting(o.starting, missing, tps));
        if (o.starting.kind == SourceOptions.Spec.Kind.LATEST) {
            long skipped = 0;
            Set<String> topics = new TreeSet<>();
            for (TP tp : missing) {
                skipped += starts.get(tp) - planner.lso(tp);
                topics.add(tp.topic());
            }
            // Kafka's default, kept; but an AvailableNow query on an existing topic then reads nothing.
            if (skipped > 0) LOG.info("the stream starts at latest (startingOffsets' default for streams, as in Kafka's "
                + "source): " + skipped + " records already in " + String.join(", ", topics) + " are not read; set "
                + "startingOffsets=earliest to read them");
        }
        for (TP tp : tps) if (fromGroup.containsKey(tp)) starts.put(tp, fromGroup.get(tp));
        return new LakelogOffset(starts);
    }

    @Override
    public Offset deserializeOffset(String json) {
        return LakelogOffset.parse(json);
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
        if (o.maxOffsetsPerTrigger != null) return ReadLimit.maxRows(o.maxOffsetsPerTrigger);
        if (o.minOffsetsPerTrigger != null) return ReadLimit.minRows(o.minOffsetsPerTrigger, o.maxTriggerDelayMs);
        return ReadLimit.allAvailable();
    }

    @Override
    public void prepareForTriggerAvailableNow() {
        planner.advance();
        Map<TP, Long> t = new TreeMap<>();
        for (TP tp : planner.partitions()) t.put(tp, planner.hw(tp));
        target = t;
    }

    @Override
    public Offset latestOffset() {
        throw new UnsupportedOperationException("latestOffset(Offset, ReadLimit) should be called instead of this method");
    }

    @Override
    public Offset latestOffset(Offset startOffset, ReadLimit limit) {
        Map<TP, Long> beginGiven = ((LakelogOffset) startOffset).offsets;
        if (o.groupId != null) commitGroup(beginGiven);
        planner.advance();
        TreeMap<TP, Long> now = new TreeMap<>();
        for (TP tp : planner.partitions()) now.put(tp, planner.hw(tp));
        latest = new TreeMap<>(now);
        if (target != null) { // AvailableNow: nothing that arrived after the query started
            TreeMap<TP, Long> capped = new TreeMap<>();
            for (Map.Entry<TP, Long> e : now.entrySet())
                if (target.containsKey(e.getKey())) capped.put(e.getKey(), Math.min(e.getValue(), target.get(e.getKey())));
            now = capped;
        }
        Map<TP, Long> begin = new TreeMap<>();
        long available = 0;
        for (Map.Entry<TP, Long> e : now.entrySet()) {
            TP tp = e.getKey();
            long b = beginGiven.containsKey(tp) ? beginGiven.get(tp) : planner.lso(tp);
            begin.put(tp, b);
            e.setValue(Math.max(e.getValue(), b)); // never move a partition backwards
            available += e.getValue() - b;
        }
        boolean usesOptions = limit.equals(getDefaultReadLimit());
        long nowMs = System.currentTimeMillis();
        Long minRows = usesOptions ? o.minOffsetsPerTrigger
            : limit instanceof ReadMinRows m ? (Long) m.minRows() : null;
        if (minRows != null && target == null && available < minRows && nowMs - lastTriggerMs < o.maxTriggerDelayMs)
            return startOffset;
        Long maxRows = usesOptions ? o.maxOffsetsPerTrigger : limit instanceof ReadMaxRows m ? (Long) m.maxRows() : null;
        TreeMap<TP, Long> end = maxRows != null ? RateLimit.apply(begin, now, maxRows) : now;
        for (Map.Entry<TP, Long> e : beginGiven.entrySet()) end.putIfAbsent(e.getKey(), e.getValue()); // unsubscribed
        if (end.equals(beginGiven)) return startOffset;
        lastTriggerMs = nowMs;
        return new LakelogOffset(end);
    }

    @Override
    public Offset reportLatestOffset() {
        return latest == null || latest.isEmpty() ? null : new LakelogOffset(latest);
    }

    @Override
    public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
        Map<String, String> out = new HashMap<>();
        if (latest == null || latestConsumedOffset.isEmpty()) return out;
        Map<TP, Long> consumed = ((LakelogOffset) latestConsumedOffset.get()).offsets;
        long behind = 0;
        for (Map.Entry<TP, Long> e : latest.entrySet()) behind += Math.max(0, e.getValue() - consumed.getOrDefault(e.getKey(), 0L));
        out.put("offsetsBehindLatest", String.valueOf(behind));
        return out;
    }

    @Override
    public void commit(Offset end) {
        if (o.groupId != null) commitGroup(((LakelogOffset) end).offsets);
    }

    private void commitGroup(Map<TP, Long> offsets) {
        if (offsets.isEmpty() || offsets.equals(committed)) return;
        group().commit(o.groupId, offsets);
        committed = new TreeMap<>(offsets);
    }

    @Override
    public void stop() {
        planner.states.clear();
    }

    // -- planning ----------------------------------------------------------------------------------------------
    private void dataLoss(String message) {
        if (o.failOnDataLoss) throw LakelogError.offsetOutOfRange(message + " " + Planner.HINT_TRUE);
        LOG.warn(message + " " + Planner.HINT_FALSE);
    }

    private boolean stale(Map<TP, Long> begin, Map<TP, Long> until) {
        for (Map.Entry<TP, Long> e : until.entrySet()) {
            TP tp = e.getKey();
            if (e.getValue() > begin.getOrDefault(tp, 0L)
                && (!planner.states.containsKey(tp.topic()) || planner.hw(tp) < e.getValue())) return true;
        }
        return false;
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
        lastTrims = new HashMap<>();
        lastSpans = new HashMap<>();
        List<Planner.Range> ranges = ranges(((LakelogOffset) start).offsets, ((LakelogOffset) end).offsets);
        return ranges.isEmpty() ? new InputPartition[0] : pack(ranges);
    }

    /** The exact offset ranges of the micro-batch (start, end], with the data-loss checks. */
    List<Planner.Range> ranges(Map<TP, Long> begin, Map<TP, Long> until) {
        if (until.isEmpty() || begin.equals(until)) return List.of();
        if (stale(begin, until)) planner.advance(); // e.g. a restarted query replays a batch planned before
        List<Planner.Range> ranges = new ArrayList<>();
        for (Map.Entry<TP, Long> e : until.entrySet()) {
            TP tp = e.getKey();
            long last = e.getValue(), s;
            boolean known = planner.states.containsKey(tp.topic());
            if (begin.containsKey(tp)) s = begin.get(tp);
            else if (known) s = planner.lso(tp); // a partition new in this batch starts at its earliest offset
            else s = last;
            if (s >= last) continue;
            if (!known || planner.hw(tp) < last) {
                dataLoss("Offsets [" + s + ", " + last + ") of " + tp + " are no longer available: the topic was "
                    + "deleted or recreated.");
                continue;
            }
            s = planner.checkDataLoss(tp, s);
            if (s < last) ranges.add(new Planner.Range(tp, s, last));
        }
        return ranges;
    }

    /** A segment file of the micro-batch: cut to the batch's offsets or whole, and the bytes it is read for. */
    private record Planned(TP tp, Segment seg, boolean trimmed, long bytes) {
    }

    /** A piece of a plan: a segment file (or a byte range of it) and its estimated bytes to read. */
    private record Piece(PartitionedFile file, long bytes) {
    }

    private static long sizeConf(SparkSession spark, String key, long dflt) {
        return org.apache.spark.network.util.JavaUtils.byteStringAsBytes(spark.conf().get(key, String.valueOf(dflt)));
    }

    /**
     * The ranges' segment files packed into tasks as Spark packs files (FilePartition.maxSplitBytes and
     * getFilePartitions: spark.sql.files.maxPartitionBytes, openCostInBytes, at least the default parallelism or
     * minPartitions tasks when the data allows), so a micro-batch runs with the batch scan's parallelism.
     */
    private InputPartition[] pack(List<Planner.Range> ranges) {
        SparkSession spark = spark();
        long openCost = sizeConf(spark, "spark.sql.files.openCostInBytes", 4L << 20);
        long maxBytes = sizeConf(spark, "spark.sql.files.maxPartitionBytes", 128L << 20);
        int minParts = spark.sparkContext().defaultParallelism();
        if (o.minPartitions != null) {
            minParts = (int) Math.min(Integer.MAX_VALUE, o.minPartitions);
            openCost = 0;
        }
        List<Planned> planned = new ArrayList<>();
        long total = 0;
        for (Planner.Range r : ranges) {
            for (Planner.Slice sl : planner.slices(r)) {
                String key = r.tp().topic() + "/" + sl.seg().path();
                if (sl.trimmed()) lastTrims.put(key, new long[]{r.start(), r.end()});
                lastSpans.put(key, new long[]{sl.lo(), sl.hi()});
                Planned p = new Planned(r.tp(), sl.seg(), sl.trimmed(), sl.bytes());
                planned.add(p);
                total += p.bytes() + openCost;
            }
        }
        long split = Math.max(1, Math.min(maxBytes, Math.max(openCost, total / Math.max(1, minParts))));
        List<Piece> pieces = new ArrayList<>();
        for (Planned p : planned) {
            InternalRow values = new GenericInternalRow(new Object[]{UTF8String.fromString(p.tp().topic()), p.tp().partition()});
            SparkPath path = SparkPath.fromPath(new Path(root.topicPath(p.tp().topic()), p.seg().path()));
            long size = p.seg().bytes();
            if (p.trimmed() || size <= split) { // a cut file is one piece: its offset filter skips most row groups
                pieces.add(new Piece(file(values, path, 0, size, p.seg()), p.bytes()));
                continue;
            }
            for (long at = 0; at < size; at += split)
                pieces.add(new Piece(file(values, path, at, Math.min(split, size - at), p.seg()), Math.min(split, size - at)));
        }
        List<InputPartition> out = new ArrayList<>();
        List<PartitionedFile> current = new ArrayList<>();
        long size = 0;
        for (Piece p : pieces) {
            if (!current.isEmpty() && size + p.bytes() > split) {
                out.add(partition(current));
                current = new ArrayList<>();
                size = 0;
            }
            current.add(p.file());
            size += p.bytes() + openCost;
        }
        if (!current.isEmpty()) out.add(partition(current));
        return out.toArray(new InputPartition[0]);
    }

    private static PartitionedFile file(InternalRow values, SparkPath path, long start, long length, Segment seg) {
        return new PartitionedFile(values, path, start, length, new String[0], seg.modificationTime(), seg.bytes(),
            scala.collection.immutable.Map$.MODULE$.empty());
    }

    private SegmentInputPartition partition(List<PartitionedFile> files) {
        Map<String, long[]> trims = new HashMap<>(), spans = new HashMap<>();
        for (PartitionedFile f : files) {
            String k = TrimmingReader.key(f.toPath());
            if (lastTrims.containsKey(k)) trims.put(k, lastTrims.get(k));
            spans.put(k, lastSpans.get(k));
        }
        return new SegmentInputPartition(files.toArray(new PartitionedFile[0]), trims, spans);
    }

    /**
     * Read only {@code names} of the schema's columns from now on. Called by {@link StreamColumnPruning}
     * while Spark plans a micro-batch, on the stream execution thread, before it asks for the reader factory.
     */
    void readColumns(Set<String> names) {
        readColumns = names.containsAll(Arrays.asList(schema.fieldNames())) ? null : Set.copyOf(names);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        SparkSession spark = spark();
        Set<String> names = readColumns;
        StructType schema = new StructType();
        for (StructField f : this.schema.fields()) if (names == null || names.contains(f.name())) schema = schema.add(f);
        StructType required = new StructType();
        for (StructField f : schema.fields())
            if (!f.name().equals("topic") && !f.name().equals("partition")) required = required.add(f);
        StructType readerSchema = required.merge(PARTITION_SCHEMA, true);
        List<String> readerNames = Arrays.asList(readerSchema.fieldNames());
        int[] order = new int[schema.length()];
        DataType[] types = new DataType[schema.length()];
        for (int i = 0; i < order.length; i++) {
            order[i] = readerNames.indexOf(schema.fields()[i].name());
            types[i] = schema.fields()[i].dataType();
        }
        boolean columnar = new ParquetFileFormat().supportBatch(spark, readerSchema);
        Map<String, String> options = new HashMap<>(root.hadoopOptions);
        options.put(FileFormat$.MODULE$.OPTION_RETURNING_BATCH(), String.valueOf(columnar));
        Configuration hadoopConf = root.conf(((org.apache.spark.sql.classic.SparkSession) spark).sessionState().newHadoopConf());
        StructType dataSchema = LakelogSource.kafkaSchema(o.includeHeaders);
        for (StructField f : this.schema.fields()) // the typed columns the stream shows are read from the files too
            if (TypedColumns.NAMES.contains(f.name())) dataSchema = dataSchema.add(f);
        StructType fileData = new StructType();
        for (StructField f : dataSchema.fields())
            if (!f.name().equals("topic") && !f.name().equals("partition")) fileData = fileData.add(f);
        TrimmingReader reader = new LakelogParquetFormat(null).trimmingReader(spark, fileData, PARTITION_SCHEMA, required,
            CollectionConverters.asScala(new ArrayList<org.apache.spark.sql.sources.Filter>()).toList(),
            scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(options)), hadoopConf, lastTrims);
        return new SegmentReaderFactory(reader, columnar, o.failOnDataLoss, order, types);
    }

    // -- probes for the parity tests, which drive this stream call by call as the engine does -------------------
    /** A stream over {@code options} (the source's options, path included) in the active session. */
    public static LakelogMicroBatchStream open(Map<String, String> options) {
        SourceOptions o = SourceOptions.parse(options).checkStreaming();
        return new LakelogMicroBatchStream(o, LakelogSource.kafkaSchema(o.includeHeaders), SparkSession.active());
    }

    /** The ranges a micro-batch from {@code start} to {@code end} (offset JSON) reads: {"t":{"0":[s,e]}}. */
    public String plannedRanges(String start, String end) {
        com.fasterxml.jackson.databind.node.ObjectNode out = LakelogOffset.JSON.createObjectNode();
        for (Planner.Range r : ranges(LakelogOffset.parse(start).offsets, LakelogOffset.parse(end).offsets)) {
            com.fasterxml.jackson.databind.node.ObjectNode t = out.has(r.tp().topic())
                ? (com.fasterxml.jackson.databind.node.ObjectNode) out.get(r.tp().topic()) : out.putObject(r.tp().topic());
            t.putArray(String.valueOf(r.tp().partition())).add(r.start()).add(r.end());
        }
        return out.toString();
    }

    @Override
    public String toString() {
        String what = switch (o.kind) {
            case "subscribePattern" -> "subscribePattern=" + o.pattern;
            case "assign" -> "assign=" + o.assignment.keySet();
            default -> "subscribe=" + String.join(",", o.topics);
        };
        return "LakelogMicroBatchStream[" + what + " @ " + root.display() + "]";
    }
}
