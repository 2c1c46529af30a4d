package io.lakelog.spark;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.Function1;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

import java.util.*;

/**
 * Spark's Parquet format (vectorized reader, row-group and page skipping, splits) over lakelog's segment files,
 * cutting the boundary files of the planned offset ranges to their exact ranges.
 */
public class LakelogParquetFormat extends ParquetFileFormat {
    static final int MAX_RANGE_READERS = 32;
    private final transient LakelogFileIndex index;

    public LakelogParquetFormat(LakelogFileIndex index) {
        this.index = index;
    }

    private Map<String, long[]> trims() {
        return index == null ? Collections.emptyMap() : index.plan().trims;
    }

    @Override
    public Option<scala.collection.immutable.Seq<String>> vectorTypes(StructType requiredSchema, StructType partitionSchema,
                                                                       SQLConf conf) {
        Option<scala.collection.immutable.Seq<String>> types = super.vectorTypes(requiredSchema, partitionSchema, conf);
        if (trims().isEmpty() || types.isEmpty()) return types;
        List<String> generic = new ArrayList<>();
        for (int i = 0; i < types.get().size(); i++) generic.add("org.apache.spark.sql.vectorized.ColumnVector");
        return Option.apply(CollectionConverters.asScala(generic).toList());
    }

    @Override
    public Function1<PartitionedFile, Iterator<InternalRow>> buildReaderWithPartitionValues(
        SparkSession spark, StructType dataSchema, StructType partitionSchema, StructType requiredSchema,
        Seq<Filter> filters, scala.collection.immutable.Map<String, String> options, Configuration hadoopConf) {
        Map<String, long[]> trims = trims();
        if (trims.isEmpty())
            return super.buildReaderWithPartitionValues(spark, dataSchema, partitionSchema, requiredSchema, filters,
                options, hadoopConf);
        return trimmingReader(spark, dataSchema, partitionSchema, requiredSchema, filters, options, hadoopConf, trims);
    }

    /**
     * A reader cutting the files named in {@code trims} (keys as {@link TrimmingReader#key}) to their ranges. Those
     * ranges are also pushed to Parquet as offset filters (row-group skipping) for up to {@link #MAX_RANGE_READERS}
     * distinct ranges; the cut itself is exact either way.
     */
    TrimmingReader trimmingReader(SparkSession spark, StructType dataSchema, StructType partitionSchema,
                                  StructType requiredSchema, Seq<Filter> filters,
                                  scala.collection.immutable.Map<String, String> options, Configuration hadoopConf,
                                  Map<String, long[]> trims) {
        Function1<PartitionedFile, Iterator<InternalRow>> base =
            super.buildReaderWithPartitionValues(spark, dataSchema, partitionSchema, requiredSchema, filters, options, hadoopConf);
        int offsetCol = Arrays.asList(requiredSchema.fieldNames()).indexOf("offset");
        boolean extra = offsetCol < 0;
        StructType ext = requiredSchema;
        if (extra) {
            offsetCol = requiredSchema.length();
            ext = requiredSchema.add(new StructField("offset", DataTypes.LongType, true, org.apache.spark.sql.types.Metadata.empty()));
        }
        Function1<PartitionedFile, Iterator<InternalRow>> boundary = extra
            ? super.buildReaderWithPartitionValues(spark, dataSchema, partitionSchema, ext, filters, options, hadoopConf)
            : base;
        Map<String, Function1<PartitionedFile, Iterator<InternalRow>>> byRange = new HashMap<>();
        for (long[] r : new HashSet<>(trims.values())) {
            String k = r[0] + ":" + r[1];
            if (byRange.containsKey(k) || byRange.size() >= MAX_RANGE_READERS) continue;
            List<Filter> fs = new ArrayList<>(CollectionConverters.asJava(filters));
            fs.add(new GreaterThanOrEqual("offset", r[0]));
            fs.add(new LessThan("offset", r[1]));
            byRange.put(k, super.buildReaderWithPartitionValues(spark, dataSchema, partitionSchema, ext,
                CollectionConverters.asScala(fs).toList(), options, hadoopConf));
        }
        DataType[] outTypes = new DataType[requiredSchema.length() + partitionSchema.length()];
        for (int i = 0; i < requiredSchema.length(); i++) outTypes[i] = requiredSchema.fields()[i].dataType();
        for (int i = 0; i < partitionSchema.length(); i++)
            outTypes[requiredSchema.length() + i] = partitionSchema.fields()[i].dataType();
        return new TrimmingReader(base, boundary, byRange, new HashMap<>(trims), offsetCol, extra,
            requiredSchema.length(), partitionSchema.length(), outTypes);
    }

    @Override
    public String toString() {
        return "lakelog";
    }
}
