package io.lakelog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.spark.sql.connector.read.streaming.Offset;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.*;

/**
 * A stream position: the next offset of every partition, as the Kafka source's checkpoint JSON
 * {@code {"topic":{"0":12,"1":40}}} (the Python source's format too, so either one resumes the other's checkpoint).
 */
public final class LakelogOffset extends Offset {
    static final ObjectMapper JSON = new ObjectMapper();
    public final TreeMap<TP, Long> offsets;

    public LakelogOffset(Map<TP, Long> offsets) {
        this.offsets = new TreeMap<>(offsets);
    }

    public static LakelogOffset parse(String json) {
        TreeMap<TP, Long> out = new TreeMap<>();
        try {
            JsonNode obj = JSON.readTree(json);
            if (obj != null && obj.isObject())
                obj.fields().forEachRemaining(t -> t.getValue().fields().forEachRemaining(p ->
                    out.put(new TP(t.getKey(), Integer.parseInt(p.getKey())), p.getValue().asLong())));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return new LakelogOffset(out);
    }

    @Override
    public String json() {
        ObjectNode root = JSON.createObjectNode();
        for (Map.Entry<TP, Long> e : offsets.entrySet()) {
            ObjectNode t = root.has(e.getKey().topic()) ? (ObjectNode) root.get(e.getKey().topic())
                : root.putObject(e.getKey().topic());
            t.put(String.valueOf(e.getKey().partition()), e.getValue());
        }
        return root.toString();
    }
}
