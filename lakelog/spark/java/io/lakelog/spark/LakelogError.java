package io.lakelog.spark;

/** A lakelog error with Kafka's name and code, worded like the Python source's ("NAME (code): message"). */
public class LakelogError extends RuntimeException {
    public final String name;
    public final int code;
    public final String option; // the option an INVALID_CONFIG names, else null

    public LakelogError(String name, int code, String message, String option) {
        super(name + " (" + code + "): " + message);
        this.name = name;
        this.code = code;
        this.option = option;
    }

    public static LakelogError invalidOption(String option, String message) {
        return new LakelogError("INVALID_CONFIG", 40, message, option);
    }

    public static LakelogError offsetOutOfRange(String message) {
        return new LakelogError("OFFSET_OUT_OF_RANGE", 1, message, null);
    }

    public static LakelogError unknownTopic(String message) {
        return new LakelogError("UNKNOWN_TOPIC_OR_PARTITION", 3, message, null);
    }

    public static LakelogError unsupported(String message) {
        return new LakelogError("UNSUPPORTED_VERSION", 35, message, null);
    }
}
