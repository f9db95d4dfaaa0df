# The whole set-up is `make demo` or `make test`: each creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
NPM_TOOLS := .tools/node_modules/.installed

.PHONY: install demo test check fmt bench bench-load bench-lint bench-sql npm-tools clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

# The real MCP peers the tests drive (Inspector CLI, official conformance suite). Where npm is
# absent the tests that need them skip with a reason (and fail under CI=true).
npm-tools: $(NPM_TOOLS)

$(NPM_TOOLS): package.json
	@if command -v npm >/dev/null 2>&1; then \
		mkdir -p .tools && cp package.json .tools/package.json && \
		cd .tools && npm install --no-audit --no-fund --loglevel=error && touch node_modules/.installed; \
	else echo "npm not found: the Inspector and conformance tests will skip"; fi

demo: $(STAMP)
	$(PY) examples/demo.py

# Most tests wait on servers and subprocesses, not on the CPU: `make test` runs them in three
# processes, one file per worker (13-17 min instead of ~37), the `serial` ones (they fingerprint the
# whole server) afterwards, PostgreSQL's beside the rest, and last the `alone` ones that measure the
# machine. `TEST_WORKERS=0 make test` runs everything in one process.
# --durations: each part's slowest tests in the CI log (docs/testing.md: where the time goes).
TEST_WORKERS ?= 3

test: $(STAMP) npm-tools
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m 'not serial' --durations=30
	$(PY) -m pytest -q -m 'serial and postgres and not alone' --durations=15 > .serial-postgres.log 2>&1 & pg=$$!; \
	$(PY) -m pytest -q -m 'serial and not postgres and not alone' --durations=15; rest=$$?; \
	wait $$pg; pgrc=$$?; cat .serial-postgres.log; test $$rest -eq 0 -a $$pgrc -eq 0
	$(PY) -m pytest -q -m 'serial and alone'

check: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

fmt: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(STAMP)
	$(PY) bench/protocol.py

bench-load: $(STAMP)
	$(PY) bench/load.py && $(PY) bench/load.py --sql

bench-lint: $(STAMP)
	$(PY) bench/lint.py

bench-sql: $(STAMP)
	$(PY) bench/sql.py

clean:
	rm -rf $(VENV) .tools .pytest_cache .mypy_cache .ruff_cache
