# Spotter developer entry points. Every target bootstraps first (a fast no-op when nothing changed).
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
# extra pytest arguments: make test PYTEST_ARGS="-k devstack -x"
PYTEST_ARGS ?=

.PHONY: bootstrap up test bench migrate seed clean stop

bootstrap:
	@bash scripts/bootstrap.sh

## the whole stack in the foreground (servers under .spotter/, gateway on :8080); Ctrl-C stops it
up: bootstrap
	$(VENV)/bin/spotter up

## the test suite (pytest.ini: testpaths, asyncio mode, timeout); servers are ephemeral
test: bootstrap
	$(PY) -m pytest -p no:cacheprovider $(PYTEST_ARGS)

bench: bootstrap
	$(PY) bench/run.py

## migrate / seed the dev database under .spotter/ (reuses the servers of a running `make up`)
migrate: bootstrap
	$(PY) -m spotter_cli.supervisor run -- spotter migrate

seed: bootstrap
	$(PY) -m spotter_cli.supervisor run -- spotter seed-demo

## stop leftover dev servers
stop:
	@if [ -x $(PY) ]; then $(PY) -m spotter_cli.devstack stop; fi

## stop leftover dev servers and remove .spotter/ (all dev data)
clean:
	@if [ -x $(PY) ]; then $(PY) -m spotter_cli.devstack clean || true; fi
	rm -rf .spotter
