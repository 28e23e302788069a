# Two commands: `make run` and `make test`. Both create .venv from the lock files first:
# `make run` installs the runtime (requirements.lock) only, `make test` the developer tools too
# (requirements-dev.lock: pytest, playwright, mypy, schemathesis, ...). Both build the documentation
# site (docs/ into site/, which the app serves at /docs/) when a page of it changed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/pip install --quiet --disable-pip-version-check --require-hashes

.PHONY: run test docs lint lock bench-review bench-team clean

$(BIN)/.runtime: requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(PIP) -r requirements.lock
	touch $@

# The developer tools depend on runtime packages, so pip is given both locks (with
# --require-hashes every package must be pinned in a file it reads).
$(BIN)/.dev: $(BIN)/.runtime requirements-dev.lock
	$(PIP) -r requirements.lock -r requirements-dev.lock
	touch $@

# mkdocs.yml is strict: a broken link or anchor fails the build. bench/README.md is included.
DOCS_SOURCES := mkdocs.yml bench/README.md $(shell find docs -type f)
site/index.html: $(BIN)/.runtime $(DOCS_SOURCES)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build
	touch $@

docs: site/index.html

run: $(BIN)/.runtime site/index.html
	$(BIN)/python -m gamut_site.devrun

# Tests marked slow (six fault tests that wait on real servers, 8 s to 80 s each, and the 30 s
# accessibility scan of every page for every role) run in
# .ci/run's PostgreSQL pass, not here: `make test` stays under ten minutes on two cores.
test: $(BIN)/.dev site/index.html
	$(BIN)/python -m pytest -q -m "not slow"

lint: $(BIN)/.dev
	$(BIN)/ruff check .
	$(BIN)/mypy

# Rewrite both locks from pyproject.toml (needs uv: pip install uv). uv keeps the versions the
# locks already pin unless pyproject.toml asks for others (add --upgrade to move them). The dev
# lock holds only what the runtime lock does not, at the runtime lock's versions.
UV_COMPILE := uv pip compile pyproject.toml --python-version 3.11 --generate-hashes \
	--custom-compile-command "make lock"
lock:
	$(UV_COMPILE) -o requirements.lock
	$(UV_COMPILE) --extra dev -c requirements.lock -o requirements-dev.lock \
		$$(sed -n 's/^\([A-Za-z0-9._-]*\)==.*/--no-emit-package \1/p' requirements.lock)

bench-review: $(BIN)/.dev
	bench/run_review_bench.sh

bench-team: $(BIN)/.dev
	bench/run_team_bench.sh

clean:
	rm -rf var/ site/ $(VENV)
