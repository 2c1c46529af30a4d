package io.lakelog.spark;

import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.SparkSessionExtensionsProvider;
import scala.runtime.BoxedUnit;

/**
 * The session extensions of the lakelog jar, found by Spark through {@code META-INF/services} when the jar is on
 * the driver's classpath (no {@code spark.sql.extensions} setting): {@link StreamColumnPruning}. Without them
 * streams still read correctly, with every column.
 */
public final class LakelogExtensions implements SparkSessionExtensionsProvider {
    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        extensions.injectOptimizerRule(session -> new StreamColumnPruning());
        return BoxedUnit.UNIT;
    }
}
