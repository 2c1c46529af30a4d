package io.lakelog.spark;

import java.io.Serializable;

/** A (topic, partition) pair, ordered by topic then partition. */
public record TP(String topic, int partition) implements Comparable<TP>, Serializable {
    @Override
    public int compareTo(TP o) {
        int c = topic.compareTo(o.topic);
        return c != 0 ? c : Integer.compare(partition, o.partition);
    }

    @Override
    public String toString() {
        return topic + "-" + partition;
    }
}
