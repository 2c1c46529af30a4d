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
 * with the source's {@code storage.*} options translated to {@code fs.s3a.*} (only when S3AFileSystem, from
 * hadoop-aws, is on the classpath; without it the provider hands the read to the Python source).
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

    public static boolean s3aAvailable() {
        try {
            Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem", false, Root.class.getClassLoader());
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

    public static Root resolve(String given, Map<String, String> storage) {
        String raw = rawRoot(given);
        if (isS3(raw)) {
            URI u = URI.create(raw);
            String path = u.getPath() == null ? "" : u.getPath().replaceAll("/+$", "");
            Root r = new Root("s3a://" + u.getHost() + path, true);
            for (Map.Entry<String, String> e : storage.entrySet()) {
                String k = e.getKey().toLowerCase(Locale.ROOT), v = e.getValue();
                switch (k) {
                    case "aws_access_key_id": case "access_key_id": r.hadoopOptions.put("fs.s3a.access.key", v); break;
                    case "aws_secret_access_key": case "secret_access_key": r.hadoopOptions.put("fs.s3a.secret.key", v); break;
                    case "aws_session_token": case "session_token": r.hadoopOptions.put("fs.s3a.session.token", v); break;
                    case "aws_endpoint_url": case "endpoint_url": case "aws_endpoint": case "endpoint":
                        r.hadoopOptions.put("fs.s3a.endpoint", v);
                        r.hadoopOptions.put("fs.s3a.path.style.access", "true");
                        if (v.startsWith("http://")) r.hadoopOptions.put("fs.s3a.connection.ssl.enabled", "false");
                        break;
                    case "aws_region": case "region": r.hadoopOptions.put("fs.s3a.endpoint.region", v); break;
                    case "aws_allow_http": case "allow_http":
                        if (v.equalsIgnoreCase("true")) r.hadoopOptions.put("fs.s3a.connection.ssl.enabled", "false");
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
