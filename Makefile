# Every target creates .venv and installs the project into it when missing or stale,
# so each works on a fresh machine with only python3 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run test test-host lint pytest bench peers-venv clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/agent-runtime demo

lint: $(STAMP)
	$(BIN)/ruff check supervisors agent_runtime tests bench examples
	$(BIN)/ruff format --check supervisors agent_runtime tests bench examples
	$(BIN)/mypy --strict supervisors agent_runtime examples

pytest: $(STAMP)
	$(BIN)/pytest

test: lint pytest

# Timing under load on a real server (uvicorn on 127.0.0.1): meaningful on a quiet machine
# only, so not part of `make test`; .ci/run runs it.
test-host: $(STAMP)
	$(BIN)/pytest -m host_load

# The peers bench/_peers.py compares us with live in a venv of their own, built for bench only.
PEERS_VENV := bench/.venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed-stamp

$(PEERS_STAMP): bench/peers/requirements.txt
	test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install --quiet -r bench/peers/requirements.txt
	touch $(PEERS_STAMP)

peers-venv: $(PEERS_STAMP)

bench: $(STAMP) peers-venv
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
