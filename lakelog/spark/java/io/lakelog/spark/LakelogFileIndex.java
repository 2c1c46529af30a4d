package io.lakelog.spark;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.*;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.FileStatusWithMetadata;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

import java.util.*;

/**
 * The files of a lakelog batch read, from the topics' Delta logs (no directory listing): every segment overlapping
 * the planned [start, end) range of each subscribed partition. It applies the query's partition filters itself
 * (Spark does not re-apply partition-only filters above a scan) and skips segments that the query's {@code offset}
 * and {@code timestamp} predicates rule out by the segments' statistics (Spark re-applies those predicates).
 * The plan is made once, at the first planning call, and kept until {@link #refresh()}.
 */
public final class LakelogFileIndex implements FileIndex {
    static final long BLOCK_SIZE = 64L << 20;

    /** One planned segment file. */
    record Entry(TP tp, Segment seg, Path path, boolean trimmed) {
    }

    /** What one planning produced. */
    static final class Plan {
        final List<Entry> entries = new ArrayList<>();
        final Map<String, long[]> trims = new HashMap<>();
        long bytes;
    }

    private final SourceOptions o;
    private final Root root;
    private final Configuration conf;
    private final StructType partitionSchema;
    private Plan plan;

    LakelogFileIndex(SourceOptions o, Root root, Configuration conf, StructType partitionSchema) {
        this.o = o;
        this.root = root;
        this.conf = conf;
        this.partitionSchema = partitionSchema;
    }

    synchronized Plan plan() {
        if (plan == null) {
            o.checkBatch();
            Planner planner = Planner.forPlanning(o, root, conf).advance();
            Plan p = new Plan();
            for (Planner.Range r : planner.batchRanges()) {
                if (r.start() >= r.end()) continue;
                for (Planner.Slice sl : planner.slices(r)) {
                    Segment seg = sl.seg();
                    if (sl.trimmed()) p.trims.put(r.tp().topic() + "/" + seg.path(), new long[]{r.start(), r.end()});
                    p.entries.add(new Entry(r.tp(), seg, new Path(root.topicPath(r.tp().topic()), seg.path()),
                        sl.trimmed()));
                    p.bytes += sl.bytes();
                }
            }
            plan = p;
        }
        return plan;
    }

    @Override
    public Seq<Path> rootPaths() {
        return CollectionConverters.asScala(Collections.singletonList(root.topicsDir())).toList();
    }

    private static Expression bind(Expression e, StructType schema) {
        return (Expression) e.transform(new AbstractPartialFunction<Expression, Expression>() {
            @Override
            public boolean isDefinedAt(Expression x) {
                return x instanceof AttributeReference;
            }

            @Override
            public Expression apply(Expression x) {
                String name = ((AttributeReference) x).name();
                for (int i = 0; i < schema.length(); i++)
                    if (schema.fields()[i].name().equalsIgnoreCase(name))
                        return new BoundReference(i, schema.fields()[i].dataType(), true);
                throw new IllegalArgumentException("not a partition column: " + name);
            }
        });
    }

    private InternalRow values(TP tp) {
        Object[] v = new Object[partitionSchema.length()];
        for (int i = 0; i < v.length; i++)
            v[i] = partitionSchema.fields()[i].name().equals("topic") ? UTF8String.fromString(tp.topic()) : tp.partition();
        return new GenericInternalRow(v);
    }

    /** Whether a segment may hold rows satisfying {@code e}, judged by its offset and timestamp bounds. */
    static boolean mayMatch(Expression e, Segment s) {
        if (e instanceof And a) return mayMatch(a.left(), s) && mayMatch(a.right(), s);
        if (e instanceof Or or) return mayMatch(or.left(), s) || mayMatch(or.right(), s);
        if (!(e instanceof BinaryComparison c)) return true;
        Expression l = c.left(), r = c.right();
        boolean flipped = false;
        if (l instanceof Literal && r instanceof AttributeReference) {
            Expression t = l; l = r; r = t; flipped = true;
        }
        if (!(l instanceof AttributeReference attr) || !(r instanceof Literal lit) || !(lit.value() instanceof Long))
            return true;
        long v = (Long) lit.value(), min, max;
        if (attr.name().equalsIgnoreCase("offset")) { min = s.baseOffset(); max = s.lastOffset(); }
        else if (attr.name().equalsIgnoreCase("timestamp")) { min = s.minTimestamp(); max = s.maxTimestamp(); }
        else return true;
        String op = c.symbol();
        if (flipped) op = switch (op) { case "<" -> ">"; case "<=" -> ">="; case ">" -> "<"; case ">=" -> "<="; default -> op; };
        return switch (op) {
            case "=", "<=>" -> min <= v && v <= max;
            case ">" -> max > v;
            case ">=" -> max >= v;
            case "<" -> min < v;
            case "<=" -> min <= v;
            default -> true;
        };
    }

    @Override
    public Seq<PartitionDirectory> listFiles(Seq<Expression> partitionFilters, Seq<Expression> dataFilters) {
        List<Expression> pf = new ArrayList<>();
        for (Expression e : CollectionConverters.asJava(partitionFilters)) {
            try {
                pf.add(bind(e, partitionSchema));
            } catch (RuntimeException ignored) {
                // not evaluable here (e.g. a dynamic pruning subquery): Spark applies it
            }
        }
        List<Expression> df = CollectionConverters.asJava(dataFilters);
        Map<TP, List<FileStatusWithMetadata>> byTp = new TreeMap<>();
        Map<TP, Boolean> selected = new HashMap<>();
        for (Entry en : plan().entries) {
            boolean keep = selected.computeIfAbsent(en.tp(), tp -> {
                InternalRow row = values(tp);
                for (Expression e : pf) {
                    Object v;
                    try {
                        v = e.eval(row);
                    } catch (RuntimeException ex) {
                        continue;
                    }
                    if (!Boolean.TRUE.equals(v)) return false;
                }
                return true;
            });
            if (!keep) continue;
            boolean match = true;
            for (Expression e : df) match &= mayMatch(e, en.seg());
            if (!match) continue;
            FileStatus st = new FileStatus(en.seg().bytes(), false, 1, BLOCK_SIZE, en.seg().modificationTime(), en.path());
            byTp.computeIfAbsent(en.tp(), k -> new ArrayList<>()).add(
                new FileStatusWithMetadata(st, scala.collection.immutable.Map$.MODULE$.empty()));
        }
        List<PartitionDirectory> out = new ArrayList<>();
        for (Map.Entry<TP, List<FileStatusWithMetadata>> e : byTp.entrySet())
            out.add(new PartitionDirectory(values(e.getKey()), CollectionConverters.asScala(e.getValue()).toList()));
        return CollectionConverters.asScala(out).toList();
    }

    @Override
    public String[] inputFiles() {
        return plan().entries.stream().map(e -> e.path().toString()).toArray(String[]::new);
    }

    @Override
    public synchronized void refresh() {
        plan = null;
    }

    @Override
    public long sizeInBytes() {
        return plan().bytes;
    }

    @Override
    public StructType partitionSchema() {
        return partitionSchema;
    }

    @Override
    public String toString() {
        return "LakelogFileIndex(" + root.display() + ")";
    }
}
