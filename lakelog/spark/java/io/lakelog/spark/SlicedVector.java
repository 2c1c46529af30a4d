package io.lakelog.spark;

import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/** A view of another column vector starting at row {@code offset}: how a boundary batch drops its leading rows. */
final class SlicedVector extends ColumnVector {
    private final ColumnVector base;
    private final int offset;

    SlicedVector(ColumnVector base, int offset) {
        super(base.dataType());
        this.base = base;
        this.offset = offset;
    }

    @Override public void close() { }
    @Override public boolean hasNull() { return base.hasNull(); }
    @Override public int numNulls() { return base.numNulls(); }
    @Override public boolean isNullAt(int r) { return base.isNullAt(r + offset); }
    @Override public boolean getBoolean(int r) { return base.getBoolean(r + offset); }
    @Override public byte getByte(int r) { return base.getByte(r + offset); }
    @Override public short getShort(int r) { return base.getShort(r + offset); }
    @Override public int getInt(int r) { return base.getInt(r + offset); }
    @Override public long getLong(int r) { return base.getLong(r + offset); }
    @Override public float getFloat(int r) { return base.getFloat(r + offset); }
    @Override public double getDouble(int r) { return base.getDouble(r + offset); }
    @Override public ColumnarArray getArray(int r) { return base.getArray(r + offset); }
    @Override public ColumnarMap getMap(int r) { return base.getMap(r + offset); }
    @Override public Decimal getDecimal(int r, int p, int s) { return base.getDecimal(r + offset, p, s); }
    @Override public UTF8String getUTF8String(int r) { return base.getUTF8String(r + offset); }
    @Override public byte[] getBinary(int r) { return base.getBinary(r + offset); }
    @Override public ColumnVector getChild(int i) { return new SlicedVector(base.getChild(i), offset); }
}
