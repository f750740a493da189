# The README's two commands: `make demo` and `make test`. Each sets itself up.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# Browser assets from npm (package.json, pinned by package-lock.json): plotly.js's
# partial bundle, served by config/staticfiles.py. Without npm the pages serve the
# full plotly.js of the Python plotly package instead, so the demo still works.
NODE_STAMP := node_modules/.installed-stamp

.PHONY: demo test lint format install bench bench-policy bench-load clean

$(STAMP): pyproject.toml
	scripts/build-deps.sh
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

$(NODE_STAMP): package.json package-lock.json
	@if command -v npm >/dev/null; then \
	  { npm ci --no-audit --no-fund --loglevel=error && touch $(NODE_STAMP); } || \
	    echo "install: npm ci failed; charts use the full plotly.js instead" >&2; \
	else \
	  echo "install: npm not found; charts use the full plotly.js (4.7 MB) of the" \
	    "Python plotly package instead of the partial bundle in package.json" >&2; \
	fi

install: $(STAMP) $(NODE_STAMP)

# `make demo PORT=8123 HOST=0.0.0.0`: where the demo's web server listens.
PORT ?= 8000
HOST ?= 127.0.0.1

demo: install
	DJANGO_SECURE=0 $(PY) manage.py run_demo --host $(HOST) --port $(PORT)

# pytest-xdist's processes for `make test` (TEST_WORKERS=0: none, all in this one).
# Tests that start processes of their own (marker spawns) run one after another on one
# of them (tests/conftest.py); each gets its own database, Redis database and var/
# folder (config/test_workers.py).
TEST_WORKERS ?= 2

test: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	DJANGO_SECURE=0 $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=25 $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/lint-imports

format: $(STAMP)
	$(VENV)/bin/ruff check --fix . && $(VENV)/bin/ruff format .

bench: $(STAMP)
	$(PY) -m engine.bench

# 20,000 pending jobs replayed with 0, 250 and 500 update_share/set_capacity actions.
bench-policy: $(STAMP)
	$(PY) -m engine.bench_policy

# The web tier under gunicorn with 200 then 400 API clients (scripts/bench_load.py):
# needs PostgreSQL and Redis (BENCH_DATABASE_URL, BENCH_REDIS_URL; see --help), and
# takes about 7 minutes; BENCH_LOAD_ARGS="--duration 30" for a short run.
bench-load: $(STAMP)
	$(PY) -c "import aiohttp, uvloop" 2>/dev/null || $(PY) -m pip install --quiet -e '.[test,bench]'
	$(PY) scripts/bench_load.py $(BENCH_LOAD_ARGS)

clean:
	rm -rf var/ .pytest_cache
