package io.lakelog.spark;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.sources.RelationProvider;
import org.apache.spark.sql.sources.SchemaRelationProvider;
import org.apache.spark.sql.types.*;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

import java.util.*;

/**
 * {@code format("lakelog")} on the JVM. Batch reads are a {@link HadoopFsRelation} over the segment files the
 * topics' Delta logs list ({@link LakelogFileIndex}), read by Spark's vectorized Parquet reader
 * ({@link LakelogParquetFormat}); streaming reads are a {@link LakelogMicroBatchStream} reading with the same
 * reader. Every read of an {@code s3://} root when hadoop-aws's S3AFileSystem is not on the classpath (or when
 * {@code spark.lakelog.jvm.enabled=false}, or on a Spark version the jar was not built for) goes to lakelog's
 * Python data source of the same name.
 *
 * <p>Spark uses the V2 {@link TableProvider} side first; the table it gets here declares only streaming reads, so
 * batch reads fall back to the V1 {@link RelationProvider} side, while a fallback gets the Python source's table,
 * which reads both.
 */
public class LakelogSource implements DataSourceRegister, RelationProvider, SchemaRelationProvider, TableProvider {
    public static final String NAME = "lakelog";
    public static final String ENABLED_CONF = "spark.lakelog.jvm.enabled";
    static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(LakelogSource.class);
    static final Set<String> SAID = Collections.synchronizedSet(new HashSet<>());
    static final StructType HEADERS = new StructType().add("key", DataTypes.StringType).add("value", DataTypes.BinaryType);
    static final StructType KAFKA = new StructType()
        .add("key", DataTypes.BinaryType).add("value", DataTypes.BinaryType).add("topic", DataTypes.StringType)
        .add("partition", DataTypes.IntegerType).add("offset", DataTypes.LongType)
        .add("timestamp", DataTypes.TimestampType).add("timestampType", DataTypes.IntegerType);
    static final StructType KAFKA_WITH_HEADERS = KAFKA.add("headers", new ArrayType(HEADERS, true));

    private PythonDataSourceV2 python;

    @Override
    public String shortName() {
        return NAME;
    }

    public static StructType kafkaSchema(boolean headers) {
        return headers ? KAFKA_WITH_HEADERS : KAFKA;
    }

    private PythonDataSourceV2 python() {
        if (python == null) {
            python = new PythonDataSourceV2();
            python.setShortName(NAME);
        }
        return python;
    }

    private static void sayOnce(String line) {
        if (SAID.add(line)) LOG.warn(line);
    }

    /** Why this read goes to the Python source (null: it runs on the JVM). */
    static String fallbackReason(Map<String, String> options) {
        SparkSession spark = SparkSession.active();
        if ("false".equalsIgnoreCase(spark.conf().get(ENABLED_CONF, "true")))
            return ENABLED_CONF + " is false";
        String version = spark.version();
        if (!(version.startsWith("4.2.") || version.startsWith("4.3.") || version.startsWith("4.4.")))
            return "the JVM source was built for Spark 4.2-4.4 and this is Spark " + version;
        String path = null;
        for (Map.Entry<String, String> e : options.entrySet())
            if (e.getKey().equalsIgnoreCase("path")) path = e.getValue();
        if (Root.isS3(Root.rawRoot(path)) && !Root.s3aAvailable())
            return "the root is on S3 and hadoop-aws (org.apache.hadoop.fs.s3a.S3AFileSystem) is not on the classpath "
                + "(see docs/spark.md, \"S3 roots on the JVM\")";
        return null;
    }

    static boolean fallback(Map<String, String> options) {
        String why = fallbackReason(options);
        if (why != null) sayOnce("lakelog: reading through the Python data source because " + why);
        return why != null;
    }

    // -- V2: streaming, and every read that falls back -------------------------------------------
    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        if (fallback(options)) return python().inferSchema(options);
        SourceOptions o = SourceOptions.parse(options);
        return TypedColumns.append(kafkaSchema(o.includeHeaders), validate(o));
    }

    @Override
    public Transform[] inferPartitioning(CaseInsensitiveStringMap options) {
        return new Transform[0];
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        if (fallback(properties)) return python().getTable(schema, partitioning, properties);
        return new LakelogStreamTable(schema);
    }

    @Override
    public boolean supportsExternalMetadata() {
        return true;
    }

    // -- V1: batch reads ---------------------------------------------------------------------------------------
    static Configuration hadoopConf(SparkSession spark, Root root) {
        return root.conf(spark.sparkContext().hadoopConfiguration());
    }

    /**
     * Load-time checks: subscribed topics and assigned partitions exist (as the Python source's schema()). Returns
     * the typed columns of the topics read ({@link TypedColumns}).
     */
    static StructType validate(SourceOptions o) {
        SparkSession spark = SparkSession.active();
        Root root = Root.resolve(o.root, o.storage);
        // a pattern's topics are planned too: their typed columns are part of the schema
        Planner p = Planner.forPlanning(o, root, hadoopConf(spark, root)).advance().keep();
        if (!o.kind.equals("subscribePattern")) p.partitions();
        return TypedColumns.of(p.states.values());
    }

    static StructType checkUserSchema(StructType schema, SourceOptions o) {
        Map<String, DataType> full = new HashMap<>();
        for (StructField f : KAFKA_WITH_HEADERS.fields()) full.put(f.name(), f.dataType());
        for (StructField f : schema.fields()) {
            if (TypedColumns.NAMES.contains(f.name())) continue; // typed columns: as the user's schema types them
            if (!full.containsKey(f.name()) || !full.get(f.name()).sameType(f.dataType()))
                throw LakelogError.invalidOption("schema", "The lakelog source's columns are those of the Kafka source ("
                    + KAFKA_WITH_HEADERS.simpleString() + "); a user-specified schema may only select some of them, but "
                    + "it has " + f.name() + " " + f.dataType().simpleString());
        }
        if (Arrays.asList(schema.fieldNames()).contains("headers") && !o.includeHeaders)
            throw LakelogError.invalidOption("includeheaders", "The schema has a headers column: set the option "
                + "'includeHeaders' to true");
        return schema;
    }

    @Override
    public BaseRelation createRelation(SQLContext sqlContext, scala.collection.immutable.Map<String, String> parameters) {
        return relation(sqlContext.sparkSession(), CollectionConverters.asJava(parameters), null);
    }

    @Override
    public BaseRelation createRelation(SQLContext sqlContext, scala.collection.immutable.Map<String, String> parameters,
                                       StructType schema) {
        return relation(sqlContext.sparkSession(), CollectionConverters.asJava(parameters), schema);
    }

    BaseRelation relation(SparkSession spark, Map<String, String> params, StructType userSchema) {
        String why = fallbackReason(params);
        if (why != null) throw LakelogError.unsupported("this lakelog read must go through the Python data source ("
            + why + "), which Spark only uses through spark.read/readStream.format(\"lakelog\")");
        SourceOptions o = SourceOptions.parse(params);
        Root root = Root.resolve(o.root, o.storage);
        StructType typed = validate(o);
        StructType schema = userSchema != null ? checkUserSchema(userSchema, o)
            : TypedColumns.append(kafkaSchema(o.includeHeaders), typed);
        StructType partitionSchema = new StructType();
        for (StructField f : schema.fields())
            if (f.name().equals("topic") || f.name().equals("partition")) partitionSchema = partitionSchema.add(f);
        LakelogFileIndex index = new LakelogFileIndex(o, root, hadoopConf(spark, root), partitionSchema);
        Map<String, String> relOptions = new HashMap<>(root.hadoopOptions);
        if (!o.failOnDataLoss) relOptions.put("ignoreMissingFiles", "true");
        SparkSession session = spark;
        if (o.minPartitions != null) {
            // minPartitions: split the files so the scan has at least that many tasks when the data allows
            session = ((org.apache.spark.sql.classic.SparkSession) spark).cloneSession();
            session.conf().set("spark.sql.files.minPartitionNum", String.valueOf(o.minPartitions));
            session.conf().set("spark.sql.files.openCostInBytes", "0");
        }
        return new HadoopFsRelation(index, partitionSchema, schema, Option.empty(), new LakelogParquetFormat(index),
            scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(relOptions)), session);
    }

    /** The JVM reader's state of one topic at a version (latest if < 0), as JSON: the parity test's probe. */
    public static String topicStateJson(String root, String topic, long version) throws java.io.IOException {
        return topicStateJson(root, new TreeMap<>(), topic, version);
    }

    /** {@link #topicStateJson(String, String, long)} with the source's storage options (no {@code storage.} prefix). */
    public static String topicStateJson(String root, Map<String, String> storage, String topic, long version)
        throws java.io.IOException {
        return topicState(root, storage, topic, version, false).toJson();
    }

    /** The state loaded at version {@code from}, then advanced to the latest (as a stream's planner does), as JSON. */
    public static String advancedTopicStateJson(String root, Map<String, String> storage, String topic, long from)
        throws java.io.IOException {
        return topicState(root, storage, topic, from, true).toJson();
    }

    private static TopicState topicState(String root, Map<String, String> storage, String topic, long version,
                                         boolean advance) throws java.io.IOException {
        Root r = Root.resolve(root, storage);
        Configuration conf = r.conf(new Configuration());
        TopicState s = TopicState.load(r.fs(conf), conf, r.topicPath(topic), topic, version);
        if (advance && !s.advance(r.fs(conf), r.topicPath(topic))) throw new java.io.IOException("the log was cleaned up");
        return s;
    }
}
