PYTHON ?= python3
VENV ?= .venv

.PHONY: install test lint up

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip

install: $(VENV)/bin/python
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'

test: install
	$(VENV)/bin/ruff check retrain_assets retrain_assets_tests
	$(VENV)/bin/python -m pytest

up: install
	$(VENV)/bin/retrain-assets up
