PYTHON ?= python3
VENV ?= .venv
CHROMIUM ?= /usr/bin/chromium
# The Slurm backend's tests start a one-node cluster from Debian's packages.
SLURMRESTD ?= /usr/sbin/slurmrestd
# pytest-xdist workers for the fast lane, a file's tests in one worker (its fixtures, its order).
# WORKERS=0 runs it in one process.
WORKERS ?= 2
PYTEST_WORKERS = $(if $(filter 0,$(WORKERS)),,-n $(WORKERS) --dist loadfile)
# `make test` runs the whole suite in SUITE_WORKERS workers (0: one process). Three: four measured
# 13:45 to 18:22 of pytest against three's 17:34 at 700 tests, and each four-worker run (load
# 10-15) failed a different test on timing (docs/tests.md). The groups and their order:
# retrain_assets_tests/support/worker_groups.py.
SUITE_WORKERS ?= 3
SUITE_DIST = $(if $(filter 0,$(SUITE_WORKERS)),,-n $(SUITE_WORKERS) --dist loadgroup --no-loadscope-reorder)
# Some machines set PYTHONDONTWRITEBYTECODE: every process (each test worker, each run the
# daemon launches) would compile the project and rewrite the tests' asserts again, 2-5 s each.
# The caches go to __pycache__/, which git ignores.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install test test-fast lint up dg-check

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip

install: $(VENV)/bin/python
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'

test: lint $(CHROMIUM) $(SLURMRESTD)
	$(VENV)/bin/python -m pytest $(SUITE_DIST) --durations=30

# Everything but the process-level tests (no platform, no browser): the quick loop.
test-fast: lint
	$(VENV)/bin/python -m pytest -m "not system" $(PYTEST_WORKERS)

lint: install
	$(VENV)/bin/ruff check retrain_assets retrain_assets_tests benchmarks
	$(VENV)/bin/ruff format --check retrain_assets retrain_assets_tests benchmarks
	$(VENV)/bin/mypy
	$(MAKE) -s dg-check

# `dg` reads the instance from $$DAGSTER_HOME, else from ./dagster.yaml (which needs the
# platform's Postgres): loading the definitions needs neither, so a throwaway home.
dg-check:
	home=$$(mktemp -d) && printf 'telemetry:\n  enabled: false\n' > $$home/dagster.yaml && \
	  DAGSTER_HOME=$$home VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/dg check defs; \
	  rc=$$?; rm -rf $$home; exit $$rc

up: install
	$(VENV)/bin/retrain-assets up

# docs/cli.md and docs/configuration.md, rendered from the CLI's parsers and the settings
# model (retrain_assets/reference_docs.py); a test fails when the committed pages differ.
.PHONY: docs
docs: install
	$(VENV)/bin/python -m retrain_assets.reference_docs

# The Slurm tests start munged, slurmctld, slurmd and slurmrestd (about 19 s to install).
$(SLURMRESTD):
	DEBIAN_FRONTEND=noninteractive apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y slurm-wlm slurmrestd munge
	test -x $(SLURMRESTD) || { echo "apt installed no $(SLURMRESTD)" >&2; exit 1; }

# The browser tests drive Debian's chromium (`playwright install` cannot download one here).
$(CHROMIUM):
	DEBIAN_FRONTEND=noninteractive apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
	test -x $(CHROMIUM) || { echo "apt installed no $(CHROMIUM)" >&2; exit 1; }
