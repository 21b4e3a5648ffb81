# runwatch: `make demo` runs the main job, `make test` the whole suite. Both set up a
# fresh machine themselves (a .venv with the pinned CPU build of PyTorch, the web app).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build lies on disk; any other torch request may pull a multi-GB CUDA build.
TORCH := torch==2.13.0
STAMP := $(VENV)/.installed
WEB_STAMP := src/runwatch/server/static/index.html

.PHONY: all venv web demo shell test bench lint clean

all: venv web

$(STAMP): pyproject.toml Makefile
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[server,dev,recipes,hf,wandb,postgres,otel,tensorboard,grafana,hf-trainer,ray]"
	touch $(STAMP)

venv: $(STAMP)

# The web app is rebuilt only when its sources change; running runwatch needs no Node.
WEB_SRC := $(wildcard web/src/* web/index.html web/package.json web/tsconfig.json web/vite.config.ts)
WEB_DEPS := web/node_modules/.package-lock.json

$(WEB_DEPS): web/package-lock.json
	cd web && (npm ci --no-audit --no-fund --loglevel=error || npm install --no-audit --no-fund --loglevel=error)
	touch $(WEB_DEPS)

$(WEB_STAMP): $(WEB_DEPS) $(WEB_SRC)
	cd web && npm run build

web: $(WEB_STAMP)

demo: venv web
	$(BIN)/runwatch demo

# A shell with .venv active, so the README's `runwatch …` commands run as written.
shell: venv
	@echo "runwatch is on PATH in this shell ($(BIN)/runwatch); exit leaves it"
	@VIRTUAL_ENV="$(CURDIR)/$(VENV)" PATH="$(CURDIR)/$(BIN):$$PATH" $${SHELL:-/bin/sh} -i

# The suite on one worker more than the cores (pytest-xdist): the tests wait on servers,
# subprocesses and browsers for a fifth of their time, which a third worker on 2 cores
# fills. A file whose tests share a module-scoped fixture runs on one worker, every other
# test on whichever is free, slow ones first (tests/conftest.py, docs/testing.md).
# PostgreSQL cases run where RUNWATCH_TEST_POSTGRES_URL is set.
TEST_WORKERS ?= $(shell python3 -c "import os; print(len(os.sched_getaffinity(0)) + 1)")
test: venv web
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup --durations=20

bench: venv web
	$(BIN)/python bench/run_all.py

lint: venv
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

clean:
	rm -rf $(VENV) web/node_modules src/runwatch/server/static runs
