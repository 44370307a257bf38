# ChatForge: the two commands are `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat requirements.txt requirements-dev.txt | cksum | cut -d' ' -f1)
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test install services bench worker-llm worker-tools beat

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

## Run ChatForge in embedded mode (no services needed) on http://$(HOST):$(PORT)/
run: install
	$(PY) manage.py migrate --noinput -v 0
	$(PY) manage.py create_demo_user --instructions --base-url http://$(HOST):$(PORT)
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

## Run the whole test suite (needs local Postgres and Redis; starts them if stopped)
test: install services
	$(PY) -m pytest $(PYTEST_ARGS)

services:
	bash deploy/local/ensure-services.sh

## Benchmarks (results are written to docs/performance.md)
bench: install services
	$(PY) -m bench.run

# Distributed-mode processes (set DATABASE_URL, REDIS_URL, DJANGO_SECRET_KEY).
worker-llm: install
	$(VENV)/bin/celery -A chatforge worker -Q llm,default -P threads -c 64 -n llm@%h
worker-tools: install
	$(VENV)/bin/celery -A chatforge worker -Q tools -P prefork -c 4 -n tools@%h
beat: install
	$(VENV)/bin/celery -A chatforge beat
