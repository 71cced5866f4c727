PYTHON ?= python3
VENV ?= .venv
CHROMIUM ?= /usr/bin/chromium

.PHONY: install test lint up

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip

install: $(VENV)/bin/python
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'

test: install $(CHROMIUM)
	$(VENV)/bin/ruff check retrain_assets retrain_assets_tests
	$(VENV)/bin/python -m pytest

up: install
	$(VENV)/bin/retrain-assets up

# The browser tests drive Debian's chromium (`playwright install` cannot download one here).
$(CHROMIUM):
	DEBIAN_FRONTEND=noninteractive apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
	test -x $(CHROMIUM) || { echo "apt installed no $(CHROMIUM)" >&2; exit 1; }
