package io.lakelog.spark;

import java.util.*;

/**
 * maxOffsetsPerTrigger's split over partitions, as lakelog/spark/source_offsets.py rate_limit: prorated by each
 * partition's lag, largest-remainder rounding so the total is exact, ties to the larger lag then the smaller
 * (topic, partition), so a limit below the partition count rotates over partitions instead of starving some.
 */
final class RateLimit {
    private RateLimit() {
    }

    /** End offsets admitting at most {@code limit} offsets in total; {@code start} holds every key of latest. */
    static TreeMap<TP, Long> apply(Map<TP, Long> start, Map<TP, Long> latest, long limit) {
        TreeMap<TP, Long> lags = new TreeMap<>();
        long total = 0;
        for (Map.Entry<TP, Long> e : latest.entrySet()) {
            long lag = Math.max(0, e.getValue() - start.get(e.getKey()));
            lags.put(e.getKey(), lag);
            total += lag;
        }
        if (total <= limit) return new TreeMap<>(latest);
        Map<TP, Double> shares = new HashMap<>();
        Map<TP, Long> take = new HashMap<>();
        long taken = 0;
        for (Map.Entry<TP, Long> e : lags.entrySet()) {
            double s = (double) limit * e.getValue() / total;
            shares.put(e.getKey(), s);
            take.put(e.getKey(), (long) Math.floor(s));
            taken += (long) Math.floor(s);
        }
        long left = limit - taken;
        List<TP> order = new ArrayList<>();
        for (TP tp : lags.keySet()) if (lags.get(tp) > take.get(tp)) order.add(tp);
        order.sort(Comparator.<TP>comparingDouble(tp -> -(shares.get(tp) - take.get(tp)))
            .thenComparingLong(tp -> -lags.get(tp)).thenComparing(tp -> tp));
        for (int i = 0; i < left && i < order.size(); i++) take.merge(order.get(i), 1L, Long::sum);
        TreeMap<TP, Long> out = new TreeMap<>();
        for (TP tp : latest.keySet()) out.put(tp, lags.get(tp) > 0 ? start.get(tp) + take.get(tp) : latest.get(tp));
        return out;
    }
}
