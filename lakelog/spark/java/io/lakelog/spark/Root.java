package io.lakelog.spark;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

import java.io.IOException;
import java.io.Serializable;
import java.net.URI;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

/**
 * A lakelog root on a Hadoop FileSystem: a local directory, or {@code s3://bucket/prefix} mapped to {@code s3a://}
 * with the driver's AWS environment and the source's {@code storage.*} options translated to {@code fs.s3a.*}, which
 * travel with the read to the executors (only when S3AFileSystem, from hadoop-aws, is on the classpath; without it
 * the provider hands the read to the Python source).
 */
public final class Root implements Serializable {
    public final String uri;                 // Hadoop URI of the root, no trailing slash
    public final boolean s3;
    public final Map<String, String> hadoopOptions = new HashMap<>();

    private Root(String uri, boolean s3) {
        this.uri = uri;
        this.s3 = s3;
    }

    public static boolean isS3(String raw) {
        String r = raw == null ? "" : raw.toLowerCase(Locale.ROOT);
        return r.startsWith("s3://") || r.startsWith("s3a://");
    }

    /**
     * Whether S3AFileSystem can be loaded: from Spark's own class path (hadoop-aws in $SPARK_HOME/jars, as on managed
     * Spark) or from the jars a session added ({@code --packages}, {@code --jars}, {@code spark.jars}), which Spark
     * puts on the context class loader, a child of the one that loaded this class.
     */
    public static boolean s3aAvailable() {
        ClassLoader context = Thread.currentThread().getContextClassLoader();
        try {
            Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem", false, context != null ? context : Root.class.getClassLoader());
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }

    public static String rawRoot(String given) {
        if (given != null) return given;
        String env = System.getenv("LAKELOG_ROOT");
        return env != null && !env.isEmpty() ? env : "./lakelog-data";
    }

    /** The AWS environment variables lakelog's Python StorageRoot reads, as storage keys (the first set wins). */
    static final String[][] ENV_KEYS = {
        {"AWS_ENDPOINT_URL_S3", "aws_endpoint_url"}, {"AWS_ENDPOINT_URL", "aws_endpoint_url"},
        {"AWS_ACCESS_KEY_ID", "aws_access_key_id"}, {"AWS_SECRET_ACCESS_KEY", "aws_secret_access_key"},
        {"AWS_SESSION_TOKEN", "aws_session_token"}, {"AWS_REGION", "aws_region"},
        {"AWS_DEFAULT_REGION", "aws_region"}, {"AWS_ALLOW_HTTP", "aws_allow_http"}};
    static final Map<String, String> ALIASES = Map.of("endpoint", "aws_endpoint_url", "endpoint_url",
        "aws_endpoint_url", "aws_endpoint", "aws_endpoint_url", "access_key_id", "aws_access_key_id",
        "secret_access_key", "aws_secret_access_key", "session_token", "aws_session_token", "region", "aws_region",
        "allow_http", "aws_allow_http");

    /**
     * The root's storage options as lakelog's Python StorageRoot takes them: the driver's AWS environment
     * variables, overridden by the {@code storage.*} options (keys lower-cased, aliases resolved).
     */
    static Map<String, String> storageOptions(Map<String, String> storage, Map<String, String> env) {
        Map<String, String> out = new HashMap<>();
        for (String[] e : ENV_KEYS) {
            String v = env.get(e[0]);
            if (v != null && !v.isEmpty()) out.putIfAbsent(e[1], v);
        }
        for (Map.Entry<String, String> e : storage.entrySet()) {
            String k = e.getKey().toLowerCase(Locale.ROOT);
            out.put(ALIASES.getOrDefault(k, k), e.getValue());
        }
        return out;
    }

    public static Root resolve(String given, Map<String, String> storage) {
        return resolve(given, storage, System.getenv());
    }

    static Root resolve(String given, Map<String, String> storage, Map<String, String> env) {
        String raw = rawRoot(given);
        if (isS3(raw)) {
            URI u = URI.create(raw);
            String path = u.getPath() == null ? "" : u.getPath().replaceAll("/+$", "");
            Root r = new Root("s3a://" + u.getHost() + path, true);
            Map<String, String> opts = storageOptions(storage, env);
            String endpoint = opts.get("aws_endpoint_url");
            for (Map.Entry<String, String> e : opts.entrySet()) {
                String k = e.getKey(), v = e.getValue();
                switch (k) {
                    case "aws_access_key_id": r.hadoopOptions.put("fs.s3a.access.key", v); break;
                    case "aws_secret_access_key": r.hadoopOptions.put("fs.s3a.secret.key", v); break;
                    case "aws_session_token":
                        r.hadoopOptions.put("fs.s3a.session.token", v);
                        r.hadoopOptions.put("fs.s3a.aws.credentials.provider",
                            "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider");
                        break;
                    case "aws_endpoint_url":
                        r.hadoopOptions.put("fs.s3a.endpoint", v);
                        r.hadoopOptions.put("fs.s3a.path.style.access", "true");
                        if (v.startsWith("http://")) r.hadoopOptions.put("fs.s3a.connection.ssl.enabled", "false");
                        break;
                    case "aws_region": r.hadoopOptions.put("fs.s3a.endpoint.region", v); break;
                    case "aws_allow_http":
                        if (v.equalsIgnoreCase("true") && (endpoint == null || !endpoint.startsWith("https://")))
                            r.hadoopOptions.put("fs.s3a.connection.ssl.enabled", "false");
                        break;
                    default:
                        if (k.startsWith("fs.s3a.")) r.hadoopOptions.put(k, v);
                }
            }
            return r;
        }
        String p = raw.startsWith("file://") ? raw.substring("file://".length()) : raw;
        if (p.startsWith("~")) p = System.getProperty("user.home") + p.substring(1);
        return new Root("file://" + Paths.get(p).toAbsolutePath().normalize().toString().replaceAll("/+$", ""), false);
    }

    public Path topicPath(String topic) {
        return new Path(uri + "/topics/" + topic);
    }

    public Path topicsDir() {
        return new Path(uri + "/topics");
    }

    public Configuration conf(Configuration base) {
        Configuration c = new Configuration(base);
        hadoopOptions.forEach(c::set);
        return c;
    }

    public FileSystem fs(Configuration conf) throws IOException {
        return topicsDir().getFileSystem(conf);
    }

    /** The root as lakelog's Python spells it (for messages): a local path or s3://. */
    public String display() {
        return s3 ? "s3://" + uri.substring("s3a://".length()) : uri.substring("file://".length());
    }
}
