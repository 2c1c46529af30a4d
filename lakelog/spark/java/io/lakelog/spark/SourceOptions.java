package io.lakelog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.Serializable;
import java.util.*;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * The source's options: the same names, precedence, defaults and messages as lakelog/spark/source_options.py
 * (the Python source), so both paths reject and accept the same options with the same words.
 */
public final class SourceOptions implements Serializable {
    public static final long EARLIEST = -2, LATEST = -1;
    static final String[] NAMES = {"path", "subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
        "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy", "failOnDataLoss", "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
        "maxTriggerDelay", "minPartitions", "includeHeaders", "groupId"};
    static final Map<String, String> OPTION_NAMES = new HashMap<>();
    static final Set<String> IGNORED = new HashSet<>(Arrays.asList("groupidprefix", "kafkaconsumer.polltimeoutms",
        "fetchoffset.numretries", "fetchoffset.retryintervalms", "maxoffsetspertriggercompat",
        "startingoffsetsbytimestampstrategy.compat"));
    static final String[] STRATEGY_KEYS = {"subscribe", "subscribepattern", "assign"};
    static final String[] STREAMING_ONLY = {"maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay", "groupid"};
    static final String[] BATCH_ONLY = {"endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"};
    static final String OFFSETS_EXAMPLE = "{\"topicA\":{\"0\":23,\"1\":-1},\"topicB\":{\"0\":-2}}";
    static final String TIMESTAMPS_EXAMPLE = "{\"topicA\":{\"0\":1700000000000,\"1\":1700000000000}}";
    static final String ASSIGN_EXAMPLE = "{\"topicA\":[0,1],\"topicB\":[2,4]}";
    static final ObjectMapper JSON = new ObjectMapper();

    static {
        for (String n : NAMES) OPTION_NAMES.put(n.toLowerCase(Locale.ROOT), n);
    }

    /** An offset spec: earliest, latest, per-partition offsets, one timestamp, or per-partition timestamps. */
    public static final class Spec implements Serializable {
        public enum Kind { EARLIEST, LATEST, OFFSETS, GLOBAL_TIMESTAMP, TIMESTAMPS }
        public final Kind kind;
        public final TreeMap<TP, Long> values; // OFFSETS / TIMESTAMPS
        public final long timestampMs;         // GLOBAL_TIMESTAMP

        Spec(Kind kind, TreeMap<TP, Long> values, long ts) {
            this.kind = kind;
            this.values = values;
            this.timestampMs = ts;
        }
    }

    public String root;
    public final TreeMap<String, String> storage = new TreeMap<>();
    public String kind; // subscribe | subscribePattern | assign
    public final List<String> topics = new ArrayList<>();
    public String pattern = "";
    public final TreeMap<String, TreeSet<Integer>> assignment = new TreeMap<>();
    public Spec starting, ending;
    public String strategy = "error";
    public boolean failOnDataLoss = true, includeHeaders = false;
    public Long maxOffsetsPerTrigger, minOffsetsPerTrigger, minPartitions;
    public long maxTriggerDelayMs = 15 * 60 * 1000L;
    public String groupId;
    public final Set<String> given = new HashSet<>();

    static String display(String key) {
        return OPTION_NAMES.getOrDefault(key, key);
    }

    static LakelogError invalid(String key, String message) {
        return LakelogError.invalidOption(key, message);
    }

    public boolean matches(String topic) {
        if (kind.equals("subscribePattern")) return Pattern.compile(pattern).matcher(topic).matches();
        if (kind.equals("assign")) return assignment.containsKey(topic);
        return topics.contains(topic);
    }

    private static JsonNode json(String key, String text, String example) {
        try {
            return JSON.readTree(text);
        } catch (Exception e) {
            throw invalid(key, "Invalid value for option '" + display(key) + "': expected e.g. " + example + ", got " + text);
        }
    }

    private static TreeMap<TP, Long> partitionMap(String key, String text, String example) {
        JsonNode obj = json(key, text, example);
        String bad = "Invalid value for option '" + display(key) + "': expected e.g. " + example + ", got " + text;
        if (obj == null || !obj.isObject() || obj.size() == 0) throw invalid(key, bad);
        TreeMap<TP, Long> out = new TreeMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = obj.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> t = it.next();
            if (!t.getValue().isObject()) throw invalid(key, bad);
            for (Iterator<Map.Entry<String, JsonNode>> ps = t.getValue().fields(); ps.hasNext(); ) {
                Map.Entry<String, JsonNode> p = ps.next();
                int partition;
                try {
                    partition = Integer.parseInt(p.getKey().trim());
                } catch (NumberFormatException e) {
                    throw invalid(key, "Invalid value for option '" + display(key) + "': partition '" + p.getKey()
                        + "' of topic '" + t.getKey() + "' is not an integer");
                }
                if (partition < 0) throw invalid(key, "Invalid value for option '" + display(key) + "': partition "
                    + partition + " of topic '" + t.getKey() + "' is negative");
                if (!p.getValue().isIntegralNumber()) throw invalid(key, bad);
                out.put(new TP(t.getKey(), partition), p.getValue().asLong());
            }
        }
        return out;
    }

    private void parseSubscription(Map<String, String> opts) {
        List<String> g = new ArrayList<>();
        for (String k : STRATEGY_KEYS) if (opts.containsKey(k)) g.add(k);
        String names = "subscribe, subscribePattern, assign";
        if (g.isEmpty()) throw invalid("subscribe", "One of the following options must be specified for the lakelog "
            + "source: " + names + ". See docs/spark.md for details.");
        if (g.size() > 1) {
            List<String> shown = new ArrayList<>();
            for (String k : g) shown.add(display(k));
            throw invalid(g.get(1), "Only one of the following options can be specified for the lakelog source: "
                + names + " (got " + String.join(", ", shown) + ").");
        }
        String key = g.get(0), value = opts.get(key);
        if (key.equals("subscribe")) {
            kind = "subscribe";
            for (String t : value.split(",")) if (!t.trim().isEmpty() && !topics.contains(t.trim())) topics.add(t.trim());
            if (topics.isEmpty()) throw invalid(key, "No topics to subscribe to as specified value for option "
                + "'subscribe' is '" + value + "'");
            return;
        }
        if (key.equals("subscribepattern")) {
            kind = "subscribePattern";
            pattern = value.trim();
            if (pattern.isEmpty()) throw invalid(key, "Pattern to subscribe is empty as specified value for option "
                + "'subscribePattern' is '" + value + "'");
            try {
                Pattern.compile(pattern);
            } catch (PatternSyntaxException e) {
                throw invalid(key, "Invalid value for option 'subscribePattern': '" + pattern
                    + "' is not a regular expression (" + e.getDescription() + ")");
            }
            return;
        }
        kind = "assign";
        if (!value.trim().startsWith("{")) throw invalid(key, "No topicpartitions to assign as specified value for "
            + "option 'assign' is '" + value + "'");
        JsonNode obj = json(key, value, ASSIGN_EXAMPLE);
        String bad = "Invalid value for option 'assign': expected e.g. " + ASSIGN_EXAMPLE + ", got " + value;
        if (!obj.isObject() || obj.size() == 0) throw invalid(key, bad);
        for (Iterator<Map.Entry<String, JsonNode>> it = obj.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> t = it.next();
            JsonNode parts = t.getValue();
            if (!parts.isArray() || parts.size() == 0) throw invalid(key, bad);
            TreeSet<Integer> set = new TreeSet<>();
            for (JsonNode p : parts) {
                if (!p.isIntegralNumber() || p.asLong() < 0) throw invalid(key, bad);
                set.add(p.asInt());
            }
            assignment.put(t.getKey(), set);
        }
    }

    private static Spec parseSpec(Map<String, String> opts, String side) {
        String tsKey = side + "timestamp", byTsKey = side + "offsetsbytimestamp", offKey = side + "offsets";
        if (opts.containsKey(tsKey)) {
            String text = opts.get(tsKey).trim();
            long ts;
            try {
                ts = Long.parseLong(text);
            } catch (NumberFormatException e) {
                throw invalid(tsKey, "Invalid value for option '" + display(tsKey) + "': expected a single long value "
                    + "(epoch milliseconds), got " + text);
            }
            if (ts < 0) throw invalid(tsKey, "Invalid value for option '" + display(tsKey) + "': a timestamp must be "
                + ">= 0, got " + ts);
            return new Spec(Spec.Kind.GLOBAL_TIMESTAMP, null, ts);
        }
        if (opts.containsKey(byTsKey)) {
            TreeMap<TP, Long> m = partitionMap(byTsKey, opts.get(byTsKey).trim(), TIMESTAMPS_EXAMPLE);
            for (Map.Entry<TP, Long> e : m.entrySet())
                if (e.getValue() < 0) throw invalid(byTsKey, "Invalid value for option '" + display(byTsKey)
                    + "': timestamp " + e.getValue() + " for " + e.getKey() + " is negative");
            return new Spec(Spec.Kind.TIMESTAMPS, m, 0);
        }
        if (opts.containsKey(offKey)) {
            String text = opts.get(offKey).trim();
            if (text.equalsIgnoreCase("earliest")) return new Spec(Spec.Kind.EARLIEST, null, 0);
            if (text.equalsIgnoreCase("latest")) return new Spec(Spec.Kind.LATEST, null, 0);
            TreeMap<TP, Long> m = partitionMap(offKey, text, OFFSETS_EXAMPLE);
            for (Map.Entry<TP, Long> e : m.entrySet())
                if (e.getValue() < EARLIEST) throw invalid(offKey, "Invalid value for option '" + display(offKey)
                    + "': offset " + e.getValue() + " for " + e.getKey() + " is not an offset, -1 (latest) or -2 (earliest)");
            return new Spec(Spec.Kind.OFFSETS, m, 0);
        }
        return null;
    }

    private static boolean bool(Map<String, String> opts, String key, boolean dflt) {
        if (!opts.containsKey(key)) return dflt;
        String v = opts.get(key).trim().toLowerCase(Locale.ROOT);
        if (!v.equals("true") && !v.equals("false")) throw invalid(key, "Invalid value for option '" + display(key)
            + "': expected true or false, got " + opts.get(key));
        return v.equals("true");
    }

    private static Long positive(Map<String, String> opts, String key) {
        if (!opts.containsKey(key)) return null;
        long n;
        try {
            n = Long.parseLong(opts.get(key).trim());
        } catch (NumberFormatException e) {
            throw invalid(key, "Invalid value for option '" + display(key) + "': expected a positive integer, got "
                + opts.get(key));
        }
        if (n <= 0) throw invalid(key, display(key) + " must be positive, got " + n);
        return n;
    }

    static final Pattern DURATION = Pattern.compile("^\\s*(\\d+)\\s*(ms|s|m|min|h|d)?\\s*$", Pattern.CASE_INSENSITIVE);

    static long durationMs(String key, String text) {
        Matcher m = DURATION.matcher(text);
        if (!m.matches()) throw invalid(key, "Invalid value for option '" + display(key) + "': expected a duration "
            + "such as 15m, 30s or 500ms, got " + text);
        long n = Long.parseLong(m.group(1));
        String u = m.group(2) == null ? "ms" : m.group(2).toLowerCase(Locale.ROOT);
        switch (u) {
            case "s": return n * 1000;
            case "m": case "min": return n * 60_000;
            case "h": return n * 3_600_000;
            case "d": return n * 86_400_000;
            default: return n;
        }
    }

    /** Validate the options both batch and streaming queries share (throws INVALID_CONFIG). */
    public static SourceOptions parse(Map<String, String> options) {
        Map<String, String> opts = new HashMap<>();
        for (Map.Entry<String, String> e : options.entrySet()) opts.put(e.getKey().toLowerCase(Locale.ROOT), e.getValue());
        SourceOptions o = new SourceOptions();
        for (String k : opts.keySet()) {
            if (k.startsWith("storage.")) o.storage.put(k.substring("storage.".length()), opts.get(k));
            else if (!OPTION_NAMES.containsKey(k) && !k.startsWith("kafka.") && !IGNORED.contains(k))
                throw invalid(k, "Unknown option '" + k + "' for the lakelog source; known options: "
                    + String.join(", ", NAMES) + ", storage.<key>");
        }
        if (opts.containsKey("kafka.auto.offset.reset")) throw invalid("kafka.auto.offset.reset", "Kafka option "
            + "'auto.offset.reset' is not supported. Instead set the source option 'startingOffsets' to 'earliest' or 'latest'.");
        String isolation = opts.get("kafka.isolation.level");
        if (isolation != null && !isolation.trim().equalsIgnoreCase("read_committed")
            && !isolation.trim().equalsIgnoreCase("read_uncommitted"))
            // both levels read the same rows: a topic table never holds uncommitted or aborted transactional data
            throw invalid("kafka.isolation.level", "Invalid value for option 'kafka.isolation.level': expected "
                + "read_committed or read_uncommitted, got " + isolation);
        o.parseSubscription(opts);
        String strategy = opts.getOrDefault("startingoffsetsbytimestampstrategy", "error").trim().toLowerCase(Locale.ROOT);
        if (!strategy.equals("error") && !strategy.equals("latest")) throw invalid("startingoffsetsbytimestampstrategy",
            "Invalid value for option 'startingOffsetsByTimestampStrategy': expected error or latest, got "
                + opts.get("startingoffsetsbytimestampstrategy"));
        o.strategy = strategy;
        Spec starting = parseSpec(opts, "starting"), ending = parseSpec(opts, "ending");
        if (starting != null && ending != null && starting.kind == Spec.Kind.OFFSETS && ending.kind == Spec.Kind.OFFSETS) {
            for (Map.Entry<TP, Long> e : starting.values.entrySet()) {
                Long end = ending.values.get(e.getKey());
                long s = e.getValue();
                if (end != null && s >= 0 && end >= 0 && end < s) throw invalid("endingoffsets", "endingOffsets for "
                    + e.getKey() + " (" + end + ") is before startingOffsets (" + s + ")");
            }
        }
        if (starting != null && ending != null && starting.kind == Spec.Kind.GLOBAL_TIMESTAMP
            && ending.kind == Spec.Kind.GLOBAL_TIMESTAMP && ending.timestampMs < starting.timestampMs)
            throw invalid("endingtimestamp", "endingTimestamp (" + ending.timestampMs + ") is before startingTimestamp ("
                + starting.timestampMs + ")");
        String groupId = opts.get("groupid");
        if (groupId != null && groupId.trim().isEmpty()) throw invalid("groupid", "Invalid value for option 'groupId': "
            + "the group id must not be empty");
        if (opts.containsKey("maxtriggerdelay")) o.maxTriggerDelayMs = durationMs("maxtriggerdelay", opts.get("maxtriggerdelay"));
        o.maxOffsetsPerTrigger = positive(opts, "maxoffsetspertrigger");
        o.minOffsetsPerTrigger = positive(opts, "minoffsetspertrigger");
        if (o.maxOffsetsPerTrigger != null && o.minOffsetsPerTrigger != null && o.minOffsetsPerTrigger > o.maxOffsetsPerTrigger)
            throw invalid("minoffsetspertrigger", "minOffsetsPerTrigger (" + o.minOffsetsPerTrigger + ") is greater than "
                + "maxOffsetsPerTrigger (" + o.maxOffsetsPerTrigger + ")");
        String path = opts.get("path");
        o.root = path == null || path.isEmpty() ? null : path;
        o.starting = starting != null ? starting : new Spec(Spec.Kind.EARLIEST, null, 0);
        o.ending = ending != null ? ending : new Spec(Spec.Kind.LATEST, null, 0);
        o.failOnDataLoss = bool(opts, "failondataloss", true);
        o.minPartitions = positive(opts, "minpartitions");
        o.includeHeaders = bool(opts, "includeheaders", false);
        o.groupId = groupId == null ? null : groupId.trim();
        o.given.addAll(opts.keySet());
        return o;
    }

    /** Batch rules: no streaming-only options; starting can't be latest, ending can't be earliest. */
    public SourceOptions checkBatch() {
        for (String key : STREAMING_ONLY)
            if (given.contains(key)) throw invalid(key, "Option '" + display(key) + "' is only valid in streaming "
                + "queries (spark.readStream), not in batch queries");
        if (starting.kind == Spec.Kind.LATEST) throw invalid("startingoffsets", "starting offset can't be latest for "
            + "batch queries on lakelog (option 'startingOffsets')");
        if (starting.kind == Spec.Kind.OFFSETS)
            for (Map.Entry<TP, Long> e : starting.values.entrySet())
                if (e.getValue() == LATEST) throw invalid("startingoffsets", "startingOffsets for " + e.getKey()
                    + " can't be latest (-1) for batch queries on lakelog");
        if (ending.kind == Spec.Kind.EARLIEST) throw invalid("endingoffsets", "ending offset can't be earliest for "
            + "batch queries on lakelog (option 'endingOffsets')");
        if (ending.kind == Spec.Kind.OFFSETS)
            for (Map.Entry<TP, Long> e : ending.values.entrySet())
                if (e.getValue() == EARLIEST) throw invalid("endingoffsets", "ending offset for " + e.getKey()
                    + " can't be earliest (-2) for batch queries on lakelog (option 'endingOffsets')");
        return this;
    }

    /** Streaming rules: no ending options; the starting default is latest, as in the Kafka source. */
    public SourceOptions checkStreaming() {
        for (String key : BATCH_ONLY)
            if (given.contains(key)) throw invalid(key, "Option '" + display(key) + "' is not valid in streaming "
                + "queries (ending offsets apply to batch queries only)");
        if (!given.contains("startingoffsets") && !given.contains("startingtimestamp")
            && !given.contains("startingoffsetsbytimestamp")) starting = new Spec(Spec.Kind.LATEST, null, 0);
        return this;
    }
}
