package io.lakelog.spark;

import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.AttributeSet;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.datasources.v2.StreamingDataSourceV2ScanRelation;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

import java.util.*;

/**
 * Column pruning for lakelog streams, which Spark does not do for any streaming source: MicroBatchExecution builds
 * a stream's scan with the table's whole schema ("TODO: operator pushdown"), so a query reading {@code value} still
 * decodes {@code key}, {@code timestamp}, {@code headers}, ... of every record of every micro-batch.
 *
 * <p>This optimizer rule (registered by {@link LakelogExtensions}) runs on each micro-batch's plan after Spark's own
 * ColumnPruning has put a {@code Project} over the stream. When every use of a {@link LakelogMicroBatchStream} in the
 * plan sits under a {@code Project} (through {@code Filter}s), the stream's relation keeps only the columns those
 * read, and the stream is told to read only them ({@link LakelogMicroBatchStream#readColumns}): Spark builds the
 * micro-batch's reader from the stream object, which the engine keys its offsets and progress by, so the stream is
 * told rather than replaced. Any other use (a {@code foreachBatch} of the whole stream, a join on it) keeps what the
 * relation lists. Idempotent: a pruned relation reads exactly the columns above it.
 */
public final class StreamColumnPruning extends Rule<LogicalPlan> {
    @Override
    public LogicalPlan apply(LogicalPlan plan) {
        if (!plan.isStreaming()) return plan;
        Map<LakelogMicroBatchStream, Set<String>> uses = new IdentityHashMap<>();
        visit(plan, null, uses);
        if (uses.isEmpty()) return plan;
        for (Map.Entry<LakelogMicroBatchStream, Set<String>> e : uses.entrySet())
            e.getKey().readColumns(e.getValue());
        return plan.transformUp(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
            @Override
            public boolean isDefinedAt(LogicalPlan p) {
                return p instanceof StreamingDataSourceV2ScanRelation r && uses.containsKey(lakelogStream(r));
            }

            @Override
            public <A1 extends LogicalPlan, B1> B1 applyOrElse(A1 p, scala.Function1<A1, B1> otherwise) {
                if (!isDefinedAt(p)) return otherwise.apply(p);
                StreamingDataSourceV2ScanRelation r = (StreamingDataSourceV2ScanRelation) p;
                List<AttributeReference> out = outputFor(r, uses.get(lakelogStream(r)));
                if (out.equals(CollectionConverters.asJava(r.output()))) return (B1) r;
                return (B1) new StreamingDataSourceV2ScanRelation(r.relation(), r.scan(),
                    CollectionConverters.asScala(out).toList(), r.stream(), r.startOffset(), r.endOffset());
            }
        });
    }

    /**
     * The relation's output reading {@code names}, in the schema's order: its own attributes where it has them (the
     * plan above refers to those), the source's for columns another use of the same stream needs -- one stream
     * has one reader, so every relation of it must list the same columns.
     */
    private static List<AttributeReference> outputFor(StreamingDataSourceV2ScanRelation r, Set<String> names) {
        Map<String, AttributeReference> own = new HashMap<>();
        for (AttributeReference a : CollectionConverters.asJava(r.output())) own.put(a.name(), a);
        List<AttributeReference> out = new ArrayList<>();
        for (Attribute a : CollectionConverters.asJava(r.relation().output()))
            if (names.contains(a.name())) out.add(own.getOrDefault(a.name(), (AttributeReference) a));
        return out;
    }

    private static LakelogMicroBatchStream lakelogStream(StreamingDataSourceV2ScanRelation r) {
        return r.stream() instanceof LakelogMicroBatchStream s ? s : null;
    }

    /**
     * Add to {@code uses} the columns each lakelog stream under {@code node} is read for: those {@code refs} names
     * (the references of a {@code Project} above, through {@code Filter}s), or, under anything else, all the
     * relation lists now -- which after an earlier pass of this rule may be fewer than the schema: a {@code Project}
     * that became a no-op is removed by Spark, and the columns it kept are still the ones read.
     */
    private static void visit(LogicalPlan node, AttributeSet refs, Map<LakelogMicroBatchStream, Set<String>> uses) {
        if (node instanceof StreamingDataSourceV2ScanRelation r) {
            LakelogMicroBatchStream s = lakelogStream(r);
            if (s == null) return;
            Set<String> names = uses.computeIfAbsent(s, k -> new HashSet<>());
            boolean data = false;
            for (Attribute a : CollectionConverters.asJava(r.output())) {
                if (refs != null && !refs.contains(a)) continue;
                names.add(a.name());
                data |= !LakelogMicroBatchStream.PARTITION_SCHEMA.getFieldIndex(a.name()).isDefined();
            }
            // a read of no data column (count(*), or topic/partition only) still needs the rows: the cheapest
            // column says how many there are and which survive the offset cut
            if (!data) names.add("offset");
            return;
        }
        if (node instanceof Project p) {
            visit(p.child(), p.references(), uses);
            return;
        }
        if (node instanceof Filter f && refs != null) {
            visit(f.child(), refs.$plus$plus(f.references()), uses);
            return;
        }
        for (LogicalPlan c : CollectionConverters.asJava(node.children())) visit(c, null, uses);
    }
}
