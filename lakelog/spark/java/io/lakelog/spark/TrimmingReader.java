package io.lakelog.spark;

import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import scala.Function1;
import scala.collection.AbstractIterator;
import scala.collection.Iterator;
import scala.runtime.AbstractFunction1;

import java.io.Serializable;
import java.util.Map;

/**
 * Reads a planned file; a boundary file (one holding offsets outside its partition's range) is cut to its exact
 * [start, end) range: rows are in offset order, so a batch keeps one contiguous run of rows, found by binary search.
 * When the query did not ask for {@code offset}, the boundary reader reads it anyway and drops it here.
 */
final class TrimmingReader extends AbstractFunction1<PartitionedFile, Iterator<InternalRow>> implements Serializable {
    private final Function1<PartitionedFile, Iterator<InternalRow>> base, boundary;
    private final Map<String, Function1<PartitionedFile, Iterator<InternalRow>>> byRange;
    private final Map<String, long[]> trims;
    private final int offsetCol, nData, nPart;
    private final boolean extra;
    private final DataType[] outTypes;

    TrimmingReader(Function1<PartitionedFile, Iterator<InternalRow>> base,
                   Function1<PartitionedFile, Iterator<InternalRow>> boundary,
                   Map<String, Function1<PartitionedFile, Iterator<InternalRow>>> byRange, Map<String, long[]> trims,
                   int offsetCol, boolean extra, int nData, int nPart, DataType[] outTypes) {
        this.base = base;
        this.boundary = boundary;
        this.byRange = byRange;
        this.trims = trims;
        this.offsetCol = offsetCol;
        this.extra = extra;
        this.nData = nData;
        this.nPart = nPart;
        this.outTypes = outTypes;
    }

    /** The same readers cutting the files of {@code other} instead (a micro-batch's input partition's own). */
    TrimmingReader withTrims(Map<String, long[]> other) {
        return new TrimmingReader(base, boundary, byRange, other, offsetCol, extra, nData, nPart, outTypes);
    }

    static String key(Path p) {
        Path parent = p.getParent();
        return parent.getParent().getName() + "/" + parent.getName() + "/" + p.getName();
    }

    @Override
    @SuppressWarnings("unchecked")
    public Iterator<InternalRow> apply(PartitionedFile file) {
        long[] r = trims.get(key(file.toPath()));
        if (r == null) return base.apply(file);
        Function1<PartitionedFile, Iterator<InternalRow>> reader = byRange.getOrDefault(r[0] + ":" + r[1], boundary);
        Iterator<Object> in = (Iterator<Object>) (Object) reader.apply(file);
        return (Iterator<InternalRow>) (Object) new Trim(in, r[0], r[1]);
    }

    private final class Trim extends AbstractIterator<Object> {
        private final Iterator<Object> in;
        private final long start, end;
        private Object next;

        Trim(Iterator<Object> in, long start, long end) {
            this.in = in;
            this.start = start;
            this.end = end;
        }

        @Override
        public boolean hasNext() {
            while (next == null && in.hasNext()) {
                Object o = in.next();
                next = o instanceof ColumnarBatch ? cut((ColumnarBatch) o) : keep((InternalRow) o);
            }
            return next != null;
        }

        @Override
        public Object next() {
            if (!hasNext()) throw new java.util.NoSuchElementException();
            Object o = next;
            next = null;
            return o;
        }

        private int lowerBound(ColumnVector v, int n, long x) {
            int lo = 0, hi = n;
            while (lo < hi) {
                int mid = (lo + hi) >>> 1;
                if (v.getLong(mid) < x) lo = mid + 1; else hi = mid;
            }
            return lo;
        }

        private ColumnarBatch cut(ColumnarBatch b) {
            int n = b.numRows();
            ColumnVector offs = b.column(offsetCol);
            int lo = n == 0 || offs.getLong(0) >= start ? 0 : lowerBound(offs, n, start);
            int hi = n == 0 || offs.getLong(n - 1) < end ? n : lowerBound(offs, n, end);
            if (hi <= lo) return null;
            if (lo == 0 && hi == n && !extra) return b;
            ColumnVector[] cols = new ColumnVector[nData + nPart];
            for (int i = 0; i < cols.length; i++) {
                ColumnVector c = b.column(extra && i >= nData ? i + 1 : i);
                cols[i] = lo == 0 ? c : new SlicedVector(c, lo);
            }
            return new ColumnarBatch(cols, hi - lo);
        }

        private InternalRow keep(InternalRow row) {
            long off = row.getLong(offsetCol);
            if (off < start || off >= end) return null;
            if (!extra) return row;
            Object[] values = new Object[nData + nPart];
            for (int i = 0; i < values.length; i++) {
                int src = i >= nData ? i + 1 : i;
                values[i] = row.isNullAt(src) ? null : row.get(src, outTypes[i]);
            }
            return new GenericInternalRow(values);
        }
    }
}
