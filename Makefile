# lakelog: `make demo` and `make test` do all set-up on a fresh machine (Python 3.11, Java 17, pip).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m lakelog.demo

test: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m bench.run $(BENCH_ARGS)

clean:
	rm -rf $(VENV) lakelog-data demo-data .pytest_cache build *.egg-info
