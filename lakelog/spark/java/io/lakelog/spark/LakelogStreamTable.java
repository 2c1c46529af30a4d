package io.lakelog.spark;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import java.util.EnumSet;
import java.util.Set;

/**
 * The V2 table of a JVM lakelog read: streaming reads only ({@link LakelogMicroBatchStream}); a batch read of
 * {@code format("lakelog")} then takes the V1 path ({@link LakelogSource#createRelation}).
 */
final class LakelogStreamTable implements SupportsRead {
    private final StructType schema;

    LakelogStreamTable(StructType schema) {
        this.schema = schema;
    }

    @Override public String name() { return LakelogSource.NAME; }
    @Override @SuppressWarnings("deprecation") public StructType schema() { return schema; }
    @Override public Set<TableCapability> capabilities() { return EnumSet.of(TableCapability.MICRO_BATCH_READ); }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        SparkSession session = SparkSession.active();
        return () -> new Scan() {
            @Override public StructType readSchema() { return schema; }
            @Override public String description() { return "lakelog stream"; }
            @Override public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
                SourceOptions o = SourceOptions.parse(options).checkStreaming();
                LakelogSource.checkUserSchema(schema, o);
                return new LakelogMicroBatchStream(o, schema, session);
            }
        };
    }
}
