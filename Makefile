# The two commands: `make run` serves Tally, `make test` checks everything.
# Both create .venv when it is missing and install from the lock files in requirements/ (exact
# versions with hashes), so a clone installs the same packages next month as today. `make run`
# installs what serving needs, `make test` the test tools too; each reinstalls only when its lock
# or pyproject.toml changed since its own install. `make lock` refreshes the locks (see docs/operations.md).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CONFIG ?= config.yaml
PORT ?=
HOST ?=
RUN_LOCK := requirements/run.txt
DEV_LOCK := requirements/dev.txt
INSTALL := $(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps
# A dev install holds everything a serving one does, so it renews both stamps.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: run test check lint bench lock clean venv

venv:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Tally needs Python 3.11 or newer")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)

# The checkout itself goes in last, without build isolation: hatchling comes from the lock too.
$(RUN_STAMP): $(RUN_LOCK) pyproject.toml | venv
	@echo "make: installing what Tally needs to serve into $(VENV), from $(RUN_LOCK)."
	@echo "make: this happens once (again only when the lock changes) and takes about a minute on a fresh machine, two while it is busy..."
	@$(INSTALL) --require-hashes -r $(RUN_LOCK)
	@$(INSTALL) --no-build-isolation -e .
	@touch $(RUN_STAMP)
	@echo "make: installed."

$(DEV_STAMP): $(DEV_LOCK) pyproject.toml | venv
	@echo "make: installing Tally with its test tools and linters into $(VENV), from $(DEV_LOCK)."
	@echo "make: this happens once (again only when the lock changes) and takes about a minute and a half on a fresh machine, three while it is busy..."
	@$(INSTALL) --require-hashes -r $(DEV_LOCK)
	@$(INSTALL) --no-build-isolation -e .
	@touch $(DEV_STAMP) $(RUN_STAMP)
	@echo "make: installed."

run: $(RUN_STAMP)
	@echo "make: starting Tally with $(CONFIG): it checks the config, then says where it serves."
	@$(BIN)/tally --config $(CONFIG) serve $(if $(HOST),--host $(HOST)) $(if $(PORT),--port $(PORT))

lint: $(DEV_STAMP)
	$(BIN)/ruff check backend tests bench
	$(BIN)/ruff format --check backend tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint
	$(BIN)/pytest -q

# The fast loop while working: lint, then the tests of no slow tier. The tiers are pytest marks
# (declared in pyproject.toml, put on the tests as tests/conftest.py says): browser (Chromium),
# process (a real process of the test's own: tally, the server to kill -9, the bench, a script),
# postgres and redis (the servers), slow (seconds each). `make test` runs them all; a change is
# done when it passes. The fast tier runs as two pytest processes, one a core, each taking every
# other test (`--shard`, tests/conftest.py); each prints its own summary when it ends.
FAST_TIER := not browser and not process and not postgres and not redis and not slow
check: lint
	@$(MAKE) --no-print-directory --jobs=2 --output-sync=target check-half-1 check-half-2

check-half-%:
	$(BIN)/pytest -q -p no:cacheprovider -m "$(FAST_TIER)" --shard $*/2

bench: $(RUN_STAMP)
	$(BIN)/tally bench

# Re-resolves the locks from pyproject.toml (and the build backend it names), keeping every pin
# that still fits; `make lock UPGRADE=1` moves every package to its newest allowed release.
BUILD_REQUIRES = $(BIN)/python -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"], sep="\n")'
COMPILE = $(BIN)/uv pip compile pyproject.toml - --universal --python-version 3.11 --generate-hashes --quiet --custom-compile-command "make lock" $(if $(UPGRADE),--upgrade)
lock: $(DEV_STAMP)
	$(BUILD_REQUIRES) | $(COMPILE) -o $(RUN_LOCK)
	$(BUILD_REQUIRES) | $(COMPILE) --extra dev -o $(DEV_LOCK)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache build dist
