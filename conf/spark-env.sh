# lakelog's Spark environment: sourced by Spark's launch scripts (bash) from SPARK_CONF_DIR=<repo>/conf, and
# through the installed PySpark's conf/spark-env.sh (python -m lakelog.spark.spark_env), which points there.
#
# Spark's launcher gives every JVM --add-modules=jdk.incubator.vector, and the JVM then prints
# "WARNING: Using incubator modules: jdk.incubator.vector" on stderr, a line no log4j setting reaches and
# nothing the user asked for. Drop that one line from the JVM's stderr, and nothing else.
if [ -n "${BASH_VERSION:-}" ] && [ -z "${LAKELOG_JVM_STDERR_FILTER:-}" ] && command -v grep >/dev/null 2>&1; then
  LAKELOG_JVM_STDERR_FILTER=1
  exec 2> >(grep --line-buffered -v -x 'WARNING: Using incubator modules: jdk.incubator.vector' >&2)
fi
