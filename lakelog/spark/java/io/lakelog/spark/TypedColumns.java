package io.lakelog.spark;

import org.apache.spark.sql.types.*;

import java.util.*;

/**
 * The typed columns ({@code key_record}, {@code value_record}) a read shows beside the Kafka source's columns: each
 * topic's as its Delta schema holds them (lakelog's Schema Registry typing, docs/schema-registry.md), merged over
 * the topics read as lakelog merges schema versions (struct fields by name, lists and maps through their items;
 * any other difference fails the load, naming the topics). Pure.
 */
final class TypedColumns {
    static final List<String> NAMES = List.of("key_record", "value_record");

    private TypedColumns() {
    }

    /** The typed columns of {@code states}' tables, merged; empty when none has any. */
    static StructType of(Collection<TopicState> states) {
        Map<String, DataType> merged = new LinkedHashMap<>();
        Map<String, String> from = new HashMap<>();
        for (TopicState s : states) {
            if (s.schemaString == null) continue;
            StructType table = (StructType) DataType.fromJson(s.schemaString);
            for (StructField f : table.fields()) {
                if (!NAMES.contains(f.name())) continue;
                DataType before = merged.get(f.name());
                DataType after = before == null ? f.dataType() : merge(before, f.dataType());
                if (after == null)
                    throw LakelogError.invalidOption("subscribe", "The column " + f.name() + " of topic " + s.topic
                        + " (" + f.dataType().simpleString() + ") and of topic " + from.get(f.name()) + " ("
                        + before.simpleString() + ") have no common type; read them separately");
                merged.put(f.name(), after);
                from.putIfAbsent(f.name(), s.topic);
            }
        }
        StructType out = new StructType();
        for (String name : NAMES) if (merged.containsKey(name)) out = out.add(name, merged.get(name), true);
        return out;
    }

    /** {@code kafka} followed by {@code typed}'s columns. */
    static StructType append(StructType kafka, StructType typed) {
        StructType out = kafka;
        for (StructField f : typed.fields()) out = out.add(f);
        return out;
    }

    /** The narrowest type holding both, or null. */
    static DataType merge(DataType a, DataType b) {
        if (a.sameType(b)) return a;
        if (a instanceof StructType sa && b instanceof StructType sb) {
            StructType out = new StructType();
            Set<String> names = new HashSet<>();
            for (StructField f : sa.fields()) {
                names.add(f.name());
                Optional<StructField> other = Arrays.stream(sb.fields()).filter(g -> g.name().equals(f.name())).findFirst();
                DataType t = other.isPresent() ? merge(f.dataType(), other.get().dataType()) : f.dataType();
                if (t == null) return null;
                out = out.add(f.name(), t, true);
            }
            for (StructField f : sb.fields()) if (!names.contains(f.name())) out = out.add(f.name(), f.dataType(), true);
            return out;
        }
        if (a instanceof ArrayType xa && b instanceof ArrayType xb) {
            DataType t = merge(xa.elementType(), xb.elementType());
            return t == null ? null : new ArrayType(t, true);
        }
        if (a instanceof MapType ma && b instanceof MapType mb) {
            DataType k = merge(ma.keyType(), mb.keyType()), v = merge(ma.valueType(), mb.valueType());
            return k == null || v == null ? null : new MapType(k, v, true);
        }
        return null;
    }
}
