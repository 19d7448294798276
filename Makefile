# The only entry points a person needs: `make run` and `make test` (README.md).
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP_INSTALL := $(PY) -m pip install --quiet --disable-pip-version-check
HOST ?= 127.0.0.1
PORT ?= 8000
WEB_CONCURRENCY ?= 2

.PHONY: run serve test test-fast lint install browser test-services pg-start pg-stop migrate bench bench-tokens \
	bench-vs-openviking bench-scale bench-scale-hosted bench-quality clean

# Four layers in one venv, each installed when its list changes and never again: the server's (requirements.txt:
# `make run`, `make serve`), the tests' on top of it (`make test`), the benchmarks' on top of those (`make bench*`),
# and the linters' on the server's (`make lint`: import-linter reads django's source for a contract).
RUNTIME_STAMP := $(VENV)/.installed-runtime
TEST_STAMP := $(VENV)/.installed-test
BENCH_STAMP := $(VENV)/.installed-bench
LINT_STAMP := $(VENV)/.installed-lint

$(PY):
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)

$(RUNTIME_STAMP): requirements.txt | $(PY)
	$(PIP_INSTALL) -r requirements.txt
	@touch $@

$(TEST_STAMP): requirements-test.txt $(RUNTIME_STAMP)
	$(PIP_INSTALL) -r requirements-test.txt
	@touch $@

$(BENCH_STAMP): bench/requirements.txt $(TEST_STAMP)
	$(PIP_INSTALL) -r bench/requirements.txt
	@touch $@

$(LINT_STAMP): requirements-lint.txt $(RUNTIME_STAMP)
	$(PIP_INSTALL) -r requirements-lint.txt
	@touch $@

install: $(RUNTIME_STAMP)

pg-start: install
	@if [ -z "$$DATABASE_URL" ]; then $(PY) manage.py pg start; fi

pg-stop:
	@if [ -z "$$DATABASE_URL" ] && [ -x $(PY) ]; then $(PY) manage.py pg stop; fi

migrate: pg-start
	$(PY) manage.py migrate --noinput

# ASGI: Django and the MCP endpoint (/mcp) in one app (ovsite/asgi.py). Stored token counts made with other
# weights or another family are recounted before serving (retrieval/recount.py); console_login says how to log in to
# /admin/ (creating the superuser from DJANGO_SUPERUSER_* when set). The access log names the socket's peer
# (--no-proxy-headers): uvicorn would otherwise print a loopback caller's X-Forwarded-For as the client, a spoofed
# address on the very requests dev mode refuses for that header. The embedded PostgreSQL keeps running after the
# server stops, for the next `make run`: `make pg-stop` stops it.
run: migrate
	$(PY) manage.py recount_tokens --if-stale
	$(PY) manage.py resume_tasks
	$(PY) manage.py console_login --admin-url http://$(HOST):$(PORT)/admin/
	$(PY) -m uvicorn ovsite.asgi:application --host $(HOST) --port $(PORT) --no-proxy-headers

# The production shape on one machine (docs/operations.md): the Procfile's release step, then its web (uvicorn
# workers: Django and /mcp), worker and beat under honcho, on CELERY_BROKER_URL and on DATABASE_URL (unset: the
# embedded server). The Procfile says `python`: the venv's comes first on PATH. /metrics sums the web workers
# through METRICS_DIR, emptied at each start.
METRICS_DIR ?= $(CURDIR)/var/prometheus
HONCHO := PATH="$(CURDIR)/$(VENV)/bin:$$PATH" UVICORN_HOST=$(HOST) UVICORN_PORT=$(PORT) \
	WEB_CONCURRENCY=$(WEB_CONCURRENCY) $(VENV)/bin/honcho
serve: pg-start
	@test -n "$$CELERY_BROKER_URL" || { echo "make serve needs CELERY_BROKER_URL (redis://...)" >&2; exit 2; }
	$(HONCHO) start --procfile Procfile release
	rm -rf "$(METRICS_DIR)" && mkdir -p "$(METRICS_DIR)" var
	PROMETHEUS_MULTIPROC_DIR="$(METRICS_DIR)" $(HONCHO) start --procfile Procfile web worker beat

# The fault tests start their own redis-server (a real Celery broker, tests/ovsite/test_faults.py): Debian's package.
test-services:
	@command -v redis-server >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -q --no-install-recommends redis-server; }

# Headless Chromium and its driver from Debian for the console's browser test (tests/profiles/test_console_browser.py).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; }

# On two workers (pytest-xdist), each given whole test files so that a module's servers start once: much of the suite
# waits on the servers and subprocesses it starts, and two workers finish it in half the time of one on two cores.
# PYTEST_ARGS="-n 0" runs it in one process.
test: $(TEST_STAMP) pg-start browser test-services
	$(PY) -m pytest -n 2 --dist loadfile $(PYTEST_ARGS)

# The `unit` lane (pytest.ini): no database, no server, no browser; PostgreSQL need not be running.
test-fast: $(TEST_STAMP)
	$(PY) -m pytest -m unit $(PYTEST_ARGS)

# ruff's linter and formatter check (ruff.toml) and the layers' contracts (.importlinter); `.ci/run` runs it first.
lint: $(LINT_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

bench: $(BENCH_STAMP) migrate
	$(PY) -m bench.find_latency $(BENCH_ARGS)

# The estimator's fit (bench.tokens) in its own venv: numpy, scipy and HF tokenizers beside the real tokenizers.
TOKENS_VENV := bench/.venv-tokens
$(TOKENS_VENV)/.installed: bench/requirements-tokens.txt
	@test -x $(TOKENS_VENV)/bin/python || $(PYTHON) -m venv $(TOKENS_VENV) || python3 -m venv $(TOKENS_VENV)
	$(TOKENS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r bench/requirements-tokens.txt
	@touch $@

bench-tokens: $(TOKENS_VENV)/.installed
	$(TOKENS_VENV)/bin/python -m bench.tokens $(BENCH_ARGS)

# OpenViking 0.5.2 from PyPI in bench/.venv-openviking (created by the script, bench only); see bench/vs_openviking.
bench-vs-openviking: $(BENCH_STAMP) migrate
	$(PY) -m bench.vs_openviking.run $(BENCH_ARGS)

bench-scale: $(BENCH_STAMP) migrate
	$(PY) -m bench.scale $(BENCH_ARGS)

# bench.scale's million shared by 1,000 accounts of Zipf sizes, /find per size class (bench/scale_hosted.py).
bench-scale-hosted: $(BENCH_STAMP) migrate
	$(PY) -m bench.scale_hosted $(BENCH_ARGS)

# The quality gate (bench/gate.py): every retrieval-quality suite beside bench/results/quality_gate.json, each on its
# own database and server; fails on a drop of more than 1 point. BENCH_ARGS=--update makes this run the baseline.
bench-quality: $(BENCH_STAMP)
	$(PY) -m bench.gate $(BENCH_ARGS)

clean: pg-stop
	rm -rf var
