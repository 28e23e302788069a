# Two commands: `make run` and `make test`. Both create .venv from the lock file first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint lock bench-review clean

$(BIN)/.installed: requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --require-hashes -r requirements.lock
	touch $@

run: $(BIN)/.installed
	$(BIN)/python -m gamut_site.devrun

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy

# Rewrite requirements.lock from pyproject.toml (needs uv: pip install uv).
lock:
	uv pip compile pyproject.toml --extra dev --python-version 3.11 --generate-hashes -o requirements.lock

bench-review: $(BIN)/.installed
	bench/run_review_bench.sh

clean:
	rm -rf var/ $(VENV)
