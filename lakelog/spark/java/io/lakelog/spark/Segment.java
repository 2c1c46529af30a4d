package io.lakelog.spark;

import java.io.Serializable;

/** One segment file (a Delta add action): the same fields as lakelog's Arrow index. */
public record Segment(int partition, long baseOffset, long lastOffset, long records, long bytes, long minTimestamp,
                      long maxTimestamp, String path, long modificationTime) implements Serializable {
}
