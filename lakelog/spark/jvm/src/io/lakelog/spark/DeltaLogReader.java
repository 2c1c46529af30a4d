package io.lakelog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.example.data.Group;
import org.apache.parquet.hadoop.ParquetReader;
import org.apache.parquet.hadoop.api.ReadSupport;
import org.apache.parquet.hadoop.example.GroupReadSupport;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.parquet.io.InputFile;

import java.io.BufferedReader;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads a topic table's Delta log into a {@link TopicLog}: the newest classic checkpoint at or below the
 * wanted version (named by {@code _last_checkpoint}), then the JSON commits after it, each applied in order.
 * Storage goes through Hadoop's FileSystem (local paths, hdfs, s3a, ...). Thread-safe: no shared state.
 */
public final class DeltaLogReader {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final Path table;
    private final Configuration conf;

    public DeltaLogReader(String tablePath, Configuration conf) {
        this.table = new Path(tablePath);
        this.conf = conf;
    }

    /** The state at {@code version} (or the latest when negative). */
    public TopicLog read(long version) throws IOException {
        FileSystem fs = table.getFileSystem(conf);
        TopicLog log = new TopicLog();
        long checkpoint = lastCheckpoint(fs);
        if (checkpoint >= 0 && (version < 0 || checkpoint <= version)) {
            readCheckpoint(fs, checkpoint, log);
            log.version = checkpoint;
        }
        for (long v = log.version + 1; version < 0 || v <= version; v++) {
            Path commit = new Path(table, String.format("_delta_log/%020d.json", v));
            List<String> lines;
            try {
                lines = readLines(fs, commit);
            } catch (FileNotFoundException e) {
                if (version >= 0) {
                    throw new IOException("commit " + v + " of " + table + " is missing");
                }
                break;
            }
            for (String line : lines) {
                if (!line.isBlank()) {
                    applyJson(log, JSON.readTree(line));
                }
            }
            log.version = v;
        }
        return log;
    }

    private long lastCheckpoint(FileSystem fs) throws IOException {
        try {
            List<String> lines = readLines(fs, new Path(table, "_delta_log/_last_checkpoint"));
            return lines.isEmpty() ? -1 : JSON.readTree(lines.get(0)).path("version").asLong(-1);
        } catch (FileNotFoundException e) {
            return -1;
        }
    }

    private static List<String> readLines(FileSystem fs, Path path) throws IOException {
        List<String> out = new ArrayList<>();
        try (FSDataInputStream in = fs.open(path);
             BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
            for (String line = r.readLine(); line != null; line = r.readLine()) {
                out.add(line);
            }
        }
        return out;
    }

    static void applyJson(TopicLog log, JsonNode action) {
        if (action.has("add")) {
            JsonNode a = action.get("add");
            log.add(a.get("path").asText(), a.path("size").asLong(0), a.path("stats").isTextual()
                    ? a.get("stats").asText() : null, a.hasNonNull("deletionVector"));
        } else if (action.has("remove")) {
            log.remove(action.get("remove").get("path").asText());
        } else if (action.has("txn")) {
            log.txn(action.get("txn").get("appId").asText(), action.get("txn").get("version").asLong());
        } else if (action.has("metaData")) {
            Map<String, String> conf = new HashMap<>();
            for (Map.Entry<String, JsonNode> e : action.get("metaData").path("configuration").properties()) {
                conf.put(e.getKey(), e.getValue().asText());
            }
            log.setConfiguration(conf);
        } else if (action.has("protocol")) {
            JsonNode p = action.get("protocol");
            log.checkProtocol(p.path("minReaderVersion").asInt(1), strings(p.path("readerFeatures")));
        }
    }

    private static List<String> strings(JsonNode array) {
        List<String> out = new ArrayList<>();
        array.forEach(n -> out.add(n.asText()));
        return out;
    }

    /** A classic single-file checkpoint: one action per row, in the columns add, remove, txn, metaData,
     *  protocol (multi-part and V2 checkpoints are refused). */
    private void readCheckpoint(FileSystem fs, long version, TopicLog log) throws IOException {
        Path file = new Path(table, String.format("_delta_log/%020d.checkpoint.parquet", version));
        if (!fs.exists(file)) {
            throw new UnsupportedTableException("checkpoint " + version + " of " + table
                    + " is not a single-file classic checkpoint");
        }
        List<Group> adds = new ArrayList<>();
        List<Group> txns = new ArrayList<>();
        try (ParquetReader<Group> reader = new GroupReader(HadoopInputFile.fromPath(file, conf)).build()) {
            for (Group row = reader.read(); row != null; row = reader.read()) {
                if (present(row, "metaData")) {
                    Group m = row.getGroup("metaData", 0);
                    log.setConfiguration(map(m, "configuration"));
                } else if (present(row, "protocol")) {
                    Group p = row.getGroup("protocol", 0);
                    log.checkProtocol(p.getInteger("minReaderVersion", 0), list(p, "readerFeatures"));
                } else if (present(row, "txn")) {
                    txns.add(row.getGroup("txn", 0));
                } else if (present(row, "add")) {
                    adds.add(row.getGroup("add", 0));
                }
            }
        }
        // A checkpoint's rows come in any order: txns and adds go in once the incarnation (metaData) is known.
        for (Group t : txns) {
            log.txn(t.getString("appId", 0), t.getLong("version", 0));
        }
        for (Group a : adds) {
            log.add(a.getString("path", 0), a.getLong("size", 0),
                    a.getFieldRepetitionCount("stats") > 0 ? a.getString("stats", 0) : null,
                    a.getType().containsField("deletionVector") && a.getFieldRepetitionCount("deletionVector") > 0);
        }
    }

    private static boolean present(Group row, String field) {
        return row.getType().containsField(field) && row.getFieldRepetitionCount(field) > 0;
    }

    private static Map<String, String> map(Group parent, String field) {
        Map<String, String> out = new HashMap<>();
        if (parent.getFieldRepetitionCount(field) == 0) {
            return out;
        }
        Group map = parent.getGroup(field, 0);
        String entries = map.getType().getFieldName(0);  // key_value (or the field's own name)
        for (int i = 0; i < map.getFieldRepetitionCount(entries); i++) {
            Group kv = map.getGroup(entries, i);
            out.put(kv.getString("key", 0), kv.getFieldRepetitionCount("value") > 0 ? kv.getString("value", 0) : null);
        }
        return out;
    }

    private static List<String> list(Group parent, String field) {
        List<String> out = new ArrayList<>();
        if (!parent.getType().containsField(field) || parent.getFieldRepetitionCount(field) == 0) {
            return out;
        }
        Group list = parent.getGroup(field, 0);
        String items = list.getType().getFieldName(0);
        for (int i = 0; i < list.getFieldRepetitionCount(items); i++) {
            Group item = list.getGroup(items, i);
            out.add(item.getString(0, 0));
        }
        return out;
    }

    /** parquet-hadoop's example Group reader over an InputFile (its Path-based builder is deprecated). */
    private static final class GroupReader extends ParquetReader.Builder<Group> {
        GroupReader(InputFile file) {
            super(file);
        }

        @Override
        protected ReadSupport<Group> getReadSupport() {
            return new GroupReadSupport();
        }
    }
}
