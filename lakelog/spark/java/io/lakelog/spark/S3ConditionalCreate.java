package io.lakelog.spark;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;

/**
 * Put-if-absent of a small object on S3: one PUT with {@code If-None-Match: *}, which S3 applies atomically (412
 * Precondition Failed when the key exists; 409 ConditionalRequestConflict while another conditional write of the key
 * is in flight). Used for Delta commit files, whose creation must never replace another writer's.
 *
 * <p>Two ways, by what the classpath offers: S3A's own conditional create ({@code createFile(path)} with
 * {@code fs.option.create.conditional.overwrite}, HADOOP-19256, Hadoop 3.4.2 and later), else a {@code PutObject}
 * with {@code ifNoneMatch("*")} through the AWS SDK v2 client S3A itself uses ({@code getS3AInternals()}, Hadoop
 * 3.4.0 and 3.4.1). The SDK is reached by reflection: the jar is compiled against pyspark's jars alone, which hold
 * no AWS SDK. {@link #MODE} ({@code auto}, {@code s3a}, {@code sdk}) picks one, for the tests of both.
 */
final class S3ConditionalCreate {
    static final String MODE = "lakelog.s3.conditional.create";
    static final String CONDITIONAL = "fs.option.create.conditional.overwrite";

    private S3ConditionalCreate() {
    }

    /** Create {@code target} holding {@code body} unless it exists: true when created, false when it existed. */
    static boolean create(FileSystem fs, Configuration conf, Path target, byte[] body) throws IOException {
        String mode = conf.get(MODE, "auto");
        if (!mode.equals("sdk")) {
            try {
                return viaS3A(fs, target, body);
            } catch (IllegalArgumentException | UnsupportedOperationException e) {
                // a Hadoop without HADOOP-19256 refuses the option it does not know when the builder builds
                if (mode.equals("s3a")) throw e;
            }
        }
        return viaSdk(fs, target, body);
    }

    static boolean viaS3A(FileSystem fs, Path target, byte[] body) throws IOException {
        FSDataOutputStreamBuilder<?, ?> b = fs.createFile(target).overwrite(true).recursive();
        b.must(CONDITIONAL, true);
        try (FSDataOutputStream out = b.build()) {
            out.write(body);
        } catch (IOException e) {
            if (conflict(e)) return false;
            throw e;
        }
        return true;
    }

    /** S3A's translation of 412 (RemoteFileChangedException) and 409 (a conditional write of the key in flight). */
    static boolean conflict(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            String name = t.getClass().getSimpleName();
            if (name.equals("RemoteFileChangedException") || name.equals("FileAlreadyExistsException")) return true;
            Integer status = statusCode(t);
            if (status != null && (status == 412 || status == 409)) return true;
        }
        return false;
    }

    /** The HTTP status of an AWS SDK v2 exception (AwsServiceException.statusCode()), or null. */
    static Integer statusCode(Throwable t) {
        try {
            Method m = t.getClass().getMethod("statusCode");
            return (Integer) m.invoke(t);
        } catch (ReflectiveOperationException | ClassCastException e) {
            return null;
        }
    }

    static boolean viaSdk(FileSystem fs, Path target, byte[] body) throws IOException {
        try {
            ClassLoader s3a = fs.getClass().getClassLoader();
            Object internals = fs.getClass().getMethod("getS3AInternals").invoke(fs);
            // through the public interface: the implementation is a private inner class
            Object client = Class.forName("org.apache.hadoop.fs.s3a.S3AInternals", true, s3a)
                .getMethod("getAmazonS3Client", String.class).invoke(internals, "lakelog conditional create");
            ClassLoader cl = client.getClass().getClassLoader();
            Class<?> request = Class.forName("software.amazon.awssdk.services.s3.model.PutObjectRequest", true, cl);
            Class<?> requestBody = Class.forName("software.amazon.awssdk.core.sync.RequestBody", true, cl);
            Method builderOf = request.getMethod("builder");
            Class<?> builderType = builderOf.getReturnType();
            Object builder = builderOf.invoke(null);
            String key = target.toUri().getPath().replaceFirst("^/", "");
            builderType.getMethod("bucket", String.class).invoke(builder, target.toUri().getHost());
            builderType.getMethod("key", String.class).invoke(builder, key);
            builderType.getMethod("ifNoneMatch", String.class).invoke(builder, "*");
            builderType.getMethod("contentLength", Long.class).invoke(builder, (long) body.length);
            Object req = builderType.getMethod("build").invoke(builder);
            Object payload = requestBody.getMethod("fromBytes", byte[].class).invoke(null, (Object) body);
            Class<?> s3Client = Class.forName("software.amazon.awssdk.services.s3.S3Client", true, cl);
            try {
                s3Client.getMethod("putObject", request, requestBody).invoke(client, req, payload);
            } catch (InvocationTargetException e) {
                if (conflict(e.getCause())) return false;
                throw e;
            }
            return true;
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof IOException io) throw io;
            throw new IOException("conditional PUT of " + target + " failed: " + cause, cause);
        } catch (ReflectiveOperationException e) {
            throw new UnsupportedOperationException("no conditional create on S3 for " + target + ": this Hadoop's "
                + "S3A has neither createFile's " + CONDITIONAL + " (Hadoop 3.4.2+) nor an AWS SDK v2 client "
                + "(Hadoop 3.4+)", e);
        }
    }
}
