# traincast: `make demo` and `make test` work on a fresh machine with nothing but Python.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[all,dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/traincast study

# the tests in parallel, one worker per core (at most 4: each imports torch)
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --maxprocesses 4

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

clean:
	rm -rf $(VENV) traincast-study traincast.duckdb
