package io.lakelog.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

import java.io.FileNotFoundException;
import java.util.ArrayList;
import java.util.List;

/**
 * Reads a micro-batch's {@link SegmentInputPartition}s with the batch path's reader: Spark's (vectorized) Parquet
 * reader over the segment files, boundary files cut to their exact offsets ({@link TrimmingReader}). That reader
 * yields the data columns then {@code topic, partition} (partition values); this factory puts them in the
 * stream's schema order. A file gone since planning (retention, delete-records) fails the task with the data-loss
 * message, or is skipped with a warning when {@code failOnDataLoss} is false.
 */
final class SegmentReaderFactory implements PartitionReaderFactory {
    private final TrimmingReader reader;
    private final boolean columnar, failOnDataLoss;
    private final int[] order;         // output column i is the reader's column order[i]
    private final DataType[] types;    // output column types

    SegmentReaderFactory(TrimmingReader reader, boolean columnar, boolean failOnDataLoss, int[] order, DataType[] types) {
        this.reader = reader;
        this.columnar = columnar;
        this.failOnDataLoss = failOnDataLoss;
        this.order = order;
        this.types = types;
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
        return columnar;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        List<Expression> exprs = new ArrayList<>();
        for (int i = 0; i < order.length; i++) exprs.add(new BoundReference(order[i], types[i], true));
        UnsafeProjection project = UnsafeProjection.create(CollectionConverters.asScala(exprs).toSeq());
        Files<InternalRow> files = new Files<>((SegmentInputPartition) partition);
        return new PartitionReader<>() {
            InternalRow row;

            @Override public boolean next() {
                Object o = files.next();
                if (o == null) return false;
                row = project.apply((InternalRow) o);
                return true;
            }
            @Override public InternalRow get() { return row; }
            @Override public void close() { }
        };
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
        Files<ColumnarBatch> files = new Files<>((SegmentInputPartition) partition);
        return new PartitionReader<>() {
            ColumnarBatch batch;

            @Override public boolean next() {
                Object o = files.next();
                if (o == null) return false;
                ColumnarBatch b = (ColumnarBatch) o;
                ColumnVector[] cols = new ColumnVector[order.length];
                for (int i = 0; i < cols.length; i++) cols[i] = b.column(order[i]);
                batch = new ColumnarBatch(cols, b.numRows());
                return true;
            }
            @Override public ColumnarBatch get() { return batch; }
            @Override public void close() { }
        };
    }

    /** The partition's files read one after the other: rows or batches (as the Parquet reader returns them). */
    private final class Files<T> {
        private final SegmentInputPartition p;
        private final TrimmingReader r;
        private int next;
        private Iterator<InternalRow> current;
        private PartitionedFile file;

        Files(SegmentInputPartition p) {
            this.p = p;
            this.r = reader.withTrims(p.trims());
        }

        /** The next row or batch, or null at the end. */
        Object next() {
            while (true) {
                try {
                    if (current == null) {
                        if (next >= p.files().length) return null;
                        file = p.files()[next++];
                        current = r.apply(file);
                    }
                    if (current.hasNext()) return current.next();
                    current = null;
                } catch (Exception e) { // Scala code throws FileNotFoundException unchecked
                    if (!isMissing(e)) throw e;
                    // the Python source's words (lakelog/spark/slice_reader.py)
                    String key = TrimmingReader.key(file.toPath());
                    long[] span = p.spans().getOrDefault(key, new long[]{-1, -1});
                    String[] parts = key.split("/", 2);
                    String message = "Segment " + parts[1] + " of " + parts[0] + "-" + file.partitionValues().getInt(1)
                        + " holding offsets [" + span[0] + ", " + span[1] + ") was removed after the read was planned.";
                    if (failOnDataLoss) throw LakelogError.offsetOutOfRange(message + " " + Planner.HINT_TRUE);
                    Planner.LOG.warn(message + " " + Planner.HINT_FALSE);
                    current = null;
                }
            }
        }
    }

    static boolean isMissing(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) if (t instanceof FileNotFoundException) return true;
        return false;
    }
}
