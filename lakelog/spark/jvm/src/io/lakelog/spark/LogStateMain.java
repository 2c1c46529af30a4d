package io.lakelog.spark;

import org.apache.hadoop.conf.Configuration;

/**
 * {@code java -cp <jar>:<spark jars> io.lakelog.spark.LogStateMain <table path> [version ...]}: the topic's
 * state (see {@link TopicLog#toJson}) at each version given, or at the latest, one JSON line each.
 * A table this reader does not understand exits with status 3 and the reason on stderr.
 */
public final class LogStateMain {
    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: LogStateMain <table path> [version ...]");
            System.exit(2);
        }
        DeltaLogReader reader = new DeltaLogReader(args[0], new Configuration());
        try {
            if (args.length == 1) {
                System.out.println(reader.read(-1).toJson());
            }
            for (int i = 1; i < args.length; i++) {
                System.out.println(reader.read(Long.parseLong(args[i])).toJson());
            }
        } catch (UnsupportedTableException e) {
            System.err.println("unsupported table: " + e.getMessage());
            System.exit(3);
        }
    }
}
