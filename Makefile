# lakelog: `make demo` and `make test` do all set-up on a fresh machine (Python 3.11, Java 17, pip).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JAVA_SOURCES := $(shell find lakelog/spark/java -type f)
JAR := lakelog/spark/jars/lakelog-spark.jar

.PHONY: install demo test test-deps debian-packages reference bench clean

$(STAMP): pyproject.toml
	@echo "==> Installing lakelog and its dependencies into $(VENV) (the first time downloads PySpark: a few minutes)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	$(PY) -m lakelog.spark.spark_env  # Spark's Python workers run $(PY), activated venv or not
	$(PY) -m lakelog.spark.jvm  # the JVM format("lakelog"): javac against pyspark/jars, installed into pyspark/jars
	touch $(STAMP)

# Rebuild the JVM source when its Java sources change (the install step above builds it the first time).
$(JAR): $(JAVA_SOURCES) | $(STAMP)
	$(PY) -m lakelog.spark.jvm
	@touch $(JAR) 2>/dev/null || true

install: $(STAMP) $(JAR)

demo: $(STAMP) $(JAR)
	$(PY) -m lakelog.demo

# Test files run in parallel, one file per worker at a time (module-scoped servers and Spark sessions stay shared);
# the slowest tests are listed at the end, to keep the suite under its 20 minutes on 2 cores.
TEST_WORKERS ?= 3

# test-deps: everything the suite needs beyond .venv, found or installed before the first test runs, so a
# missing piece stops `make test` at once with the command that fixes it. To add a piece (a reference artifact,
# a tool), write a target that fetches or checks it and add it here with one line of its own:
#     test-deps: my-target
test-deps: debian-packages

# Chromium (the pages' browser tests), kcat (the Kafka listener's) and Node.js with npm (kafkajs, below): apt-get
# as root, else the command to run
debian-packages:
	@.ci/debian-packages 'chromium|chromium-browser=chromium' kcat=kcat node=nodejs npm=npm

# The reference artifacts (Apache Kafka, Spark's Kafka source, ...) the tests and benchmarks compare against:
# pinned in reference/maven.lock, fetched once into ~/.cache/lakelog/reference, checked every time; the peers'
# suites (franz-go's kgo tests built from the Go module proxy, kafkajs from npm) built and installed there once.
reference: $(STAMP)
	$(PY) -m reference fetch
	$(PY) -m reference peers
test-deps: reference

# delta-spark with its own Spark, for the openness tests (tests/spark/test_delta_spark.py): no Delta release is built
# for pyspark 4.3 yet (delta-spark 4.4.0 pins pyspark <= 4.2.0 and its jars call Spark 4.2's internals), so it runs
# in a venv of its own with the pyspark it pins; its jars come from reference/ (set delta-spark).
DELTA_VENV := .venv-delta
$(DELTA_VENV)/.installed:
	$(PYTHON) -m venv $(DELTA_VENV)
	$(DELTA_VENV)/bin/python -m pip install --quiet "delta-spark==4.4.0" "pyspark==4.2.0"
	touch $@

test-deps: $(DELTA_VENV)/.installed

test: test-deps $(STAMP) $(JAR)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25 $(PYTEST_ARGS)

bench: $(STAMP) $(JAR) reference
	$(PY) -m bench.run $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(DELTA_VENV) lakelog-data demo-data .pytest_cache build *.egg-info
