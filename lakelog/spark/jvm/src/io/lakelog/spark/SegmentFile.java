package io.lakelog.spark;

/** One live segment file of a topic table, as its Delta add action describes it. Immutable. */
public final class SegmentFile {
    public final String path;        // table-relative: partition=P/<20-digit base offset>-<unique>.parquet
    public final int partition;
    public final long baseOffset;
    public final long lastOffset;    // base + records - 1 for an empty segment (lastOffset < baseOffset)
    public final long records;
    public final long bytes;

    SegmentFile(String path, int partition, long baseOffset, long lastOffset, long records, long bytes) {
        this.path = path;
        this.partition = partition;
        this.baseOffset = baseOffset;
        this.lastOffset = lastOffset;
        this.records = records;
        this.bytes = bytes;
    }
}
