package io.lakelog.spark;

import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.execution.datasources.PartitionedFile;

import java.util.Map;

/**
 * One task of a micro-batch: segment files (or byte splits of them) in offset order, and the exact [start, end)
 * offsets of those that hold offsets outside the batch (keys as {@link TrimmingReader#key}).
 */
record SegmentInputPartition(PartitionedFile[] files, Map<String, long[]> trims) implements InputPartition {
}
