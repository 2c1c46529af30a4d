package io.lakelog.spark;

import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.execution.datasources.PartitionedFile;

import java.util.Map;

/**
 * One task of a micro-batch: segment files (or byte splits of them) in offset order; {@code trims}: the exact
 * [start, end) range of the batch's partition for the files holding offsets outside it; {@code spans}: the
 * [start, end) offsets each file contributes (for messages). Keys as {@link TrimmingReader#key}.
 */
record SegmentInputPartition(PartitionedFile[] files, Map<String, long[]> trims, Map<String, long[]> spans)
    implements InputPartition {
}
