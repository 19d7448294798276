# The only entry points a person needs: `make run` and `make test` (README.md).
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test install browser test-services pg-start pg-stop migrate bench bench-tokens bench-vs-openviking bench-scale clean

$(STAMP): requirements.txt requirements-test.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
	@touch $(STAMP)

install: $(STAMP)

pg-start: install
	@if [ -z "$$DATABASE_URL" ]; then $(PY) manage.py pg start; fi

pg-stop:
	@if [ -z "$$DATABASE_URL" ] && [ -x $(PY) ]; then $(PY) manage.py pg stop; fi

migrate: pg-start
	$(PY) manage.py migrate --noinput

# ASGI: Django and the MCP endpoint (/mcp) in one app (ovsite/asgi.py). Stored token counts made with other
# weights or another family are recounted before serving (retrieval/recount.py); console_login says how to log in to
# /admin/ (creating the superuser from DJANGO_SUPERUSER_* when set).
run: migrate
	$(PY) manage.py recount_tokens --if-stale
	$(PY) manage.py console_login --admin-url http://$(HOST):$(PORT)/admin/
	$(PY) -m uvicorn ovsite.asgi:application --host $(HOST) --port $(PORT)

# The fault tests start their own redis-server (a real Celery broker, tests/test_faults.py): Debian's package.
test-services:
	@command -v redis-server >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -q --no-install-recommends redis-server; }

# Headless Chromium and its driver from Debian for the console's browser test (tests/test_console_browser.py).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; }

test: pg-start browser test-services
	$(PY) -m pytest $(PYTEST_ARGS)

bench: migrate
	$(PY) bench/find_latency.py

# The real tokenizers live in their own venv: the server never imports them (retrieval/tokens.py).
TOKENS_VENV := bench/.venv-tokens
$(TOKENS_VENV)/.installed: bench/requirements-tokens.txt
	@test -x $(TOKENS_VENV)/bin/python || $(PYTHON) -m venv $(TOKENS_VENV) || python3 -m venv $(TOKENS_VENV)
	$(TOKENS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r bench/requirements-tokens.txt
	@touch $@

bench-tokens: $(TOKENS_VENV)/.installed
	$(TOKENS_VENV)/bin/python bench/tokens.py

# OpenViking 0.5.2 from PyPI in bench/.venv-openviking (created by the script, bench only); see bench/vs_openviking.
bench-vs-openviking: migrate
	$(PY) bench/vs_openviking/run.py $(BENCH_ARGS)

bench-scale: migrate
	$(PY) bench/scale.py $(BENCH_ARGS)

clean: pg-stop
	rm -rf var
