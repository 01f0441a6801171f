# The two commands: `make run` serves Tally, `make test` checks everything.
# Both create .venv when it is missing. `make run` installs what serving needs, `make test` the
# test tools too; each reinstalls only when pyproject.toml changed since its own install.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CONFIG ?= config.yaml
PORT ?=
HOST ?=
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check
# A dev install holds everything a serving one does, so it renews both stamps.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: run test lint bench clean venv

venv:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Tally needs Python 3.11 or newer")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)

$(RUN_STAMP): pyproject.toml | venv
	$(PIP) -e .
	@touch $(RUN_STAMP)

$(DEV_STAMP): pyproject.toml | venv
	$(PIP) -e '.[dev]'
	@touch $(DEV_STAMP) $(RUN_STAMP)

run: $(RUN_STAMP)
	$(BIN)/tally --config $(CONFIG) serve $(if $(HOST),--host $(HOST)) $(if $(PORT),--port $(PORT))

lint: $(DEV_STAMP)
	$(BIN)/ruff check backend tests bench
	$(BIN)/ruff format --check backend tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint
	$(BIN)/pytest -q

bench: $(RUN_STAMP)
	$(BIN)/tally bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache build dist
