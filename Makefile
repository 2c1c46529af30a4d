# lakelog: `make demo` and `make test` do all set-up on a fresh machine (Python 3.11, Java 17, pip).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JAVA_SOURCES := $(shell find lakelog/spark/java -type f)
JAR := lakelog/spark/jars/lakelog-spark.jar

.PHONY: install demo test bench clean

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

test: $(STAMP) $(JAR)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=25 $(PYTEST_ARGS)

bench: $(STAMP) $(JAR)
	$(PY) -m bench.run $(BENCH_ARGS)

clean:
	rm -rf $(VENV) lakelog-data demo-data .pytest_cache build *.egg-info
