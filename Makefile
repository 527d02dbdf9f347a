# Every target creates .venv and installs the project into it when missing or stale,
# so each works on a fresh machine with only python3 and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run docs test test-host test-timing test-live test-cluster serve-local lint pytest pytest-versions bench bench-host peers-venv clean

# The project with its postgres, mcp and server extras, and the `dev` dependency group (PEP 735:
# pip installs groups from 25.1 on, hence the upgrade).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[postgres,mcp,server]' --group dev
	touch $(STAMP)

# The offline demo needs the package alone: no extras, no dev tools, no pip upgrade.
RUN_STAMP := $(VENV)/.run-stamp

$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e .
	touch $(RUN_STAMP)

run: $(RUN_STAMP)
	$(BIN)/agent-runtime demo

# The API reference and the docs/ pages as a site in site/ (mkdocs.yml), from the docstrings;
# --strict: a broken link or reference fails the build. .ci/run runs it after `make test`.
DOCS_STAMP := $(VENV)/.docs-stamp

$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet --group docs
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

lint: $(STAMP)
	$(BIN)/ruff check supervisors agent_runtime tests bench examples
	$(BIN)/ruff format --check supervisors agent_runtime tests bench examples
	$(BIN)/mypy --strict supervisors agent_runtime examples

pytest: $(STAMP)
	$(BIN)/pytest

test: lint pytest

# The same pytest suite on every other CPython of 3.11-3.14 the machine has (python3.X on PATH or
# pyenv's), each in a venv of its own (.venv-3.13, ...); a version without an interpreter is
# skipped, saying so. .ci/run runs it after `make test`; `.ci/pytest-versions --list` shows which.
pytest-versions:
	PYTHON=$(PYTHON) MAKE=$(MAKE) .ci/pytest-versions

# Timing under load on a real server (uvicorn on 127.0.0.1): meaningful on a quiet machine
# only, so not part of `make test`; .ci/run runs it.
test-host: $(STAMP)
	$(BIN)/pytest -m host_load

# The timing-sensitive tests (`@pytest.mark.timing`) 10 times in a row under two CPU hogs
# (.ci/test-timing): their bounds must hold on a loaded machine too. ~11 min on 2 cores
# (51-83 s a round of 62 tests), over the ~8 min meant for it; .ci/run runs it after test-host.
test-timing: $(STAMP)
	PYTEST=$(BIN)/pytest .ci/test-timing

# agent_runtime.cluster on a local Ray instance started by the tests (2 CPUs, no dashboard,
# no usage stats): Ray is the `cluster` extra, too heavy for `make test`, installed here.
CLUSTER_STAMP := $(VENV)/.cluster-stamp

$(CLUSTER_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[postgres,mcp,server,cluster]'
	touch $(CLUSTER_STAMP)

test-cluster: $(CLUSTER_STAMP)
	RAY_USAGE_STATS_ENABLED=0 $(BIN)/pytest -m cluster tests/agent_runtime/cluster

# A real local model: llama-cpp-python's server with SmolLM2-135M, started once per chat format
# for tests/live/ and stopped after (tests/live/harness.py). The first run builds the server
# from its sdist (10-17 min on 2 cores) into a venv under ~/.cache/agent-runtime (or
# $$AGENT_RUNTIME_CACHE), kept for later runs; .ci/run runs it after `make test`.
test-live: $(STAMP)
	$(PYTHON) tests/live/harness.py

# That server on 127.0.0.1:8080, the `local` profile of config/runtime.toml, until Ctrl-C:
# for `agent-runtime demo --model local` in another terminal.
serve-local:
	$(PYTHON) tests/live/harness.py --serve --port 8080

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

# The host's loop lag under 100 SSE streams (examples/starlette_sse.py under uvicorn), against
# the floor of one bare pykka actor per agent: ~2 minutes, not part of `make bench`.
bench-host: $(STAMP)
	$(BIN)/python -m bench.host

clean:
	rm -rf $(VENV) .venv-3.* site .pytest_cache .mypy_cache .ruff_cache .hypothesis
