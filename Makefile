# The two commands: `make run` serves Tally, `make test` checks everything.
# Both create .venv when it is missing and reinstall only when pyproject.toml changed.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Tally needs Python 3.11 or newer")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/tally serve

lint: $(STAMP)
	$(BIN)/ruff check backend tests bench
	$(BIN)/ruff format --check backend tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/tally bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
