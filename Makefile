# ChatForge: the two commands are `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# One venv, two install levels, each stamped with a checksum of its files:
# the runtime (requirements.txt) for run, chat and the workers, and on top of
# it the test and benchmark tools (requirements-dev.txt) for test and bench.
RUNTIME_STAMP := $(VENV)/.installed-runtime-$(shell cat requirements.txt constraints.txt | cksum | cut -d' ' -f1)
DEV_STAMP := $(VENV)/.installed-dev-$(shell cat requirements.txt requirements-dev.txt constraints.txt | cksum | cut -d' ' -f1)
PIP_INSTALL := $(PY) -m pip install --quiet --disable-pip-version-check
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test test-durations lint-imports install services browser screenshots bench bench-timeline bench-load bench-load-100 bench-load-200 bench-load-steady bench-load-burst bench-fairness bench-relay bench-heartbeat bench-file-upload bench-file-reading bench-attachments bench-sandbox lock worker-llm worker-tools worker-tools-io worker-sandbox beat chat interop-openwebui

$(RUNTIME_STAMP): requirements.txt constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) -r requirements.txt -c constraints.txt
	rm -f $(VENV)/.installed-runtime-* $(VENV)/.installed-[0-9]*
	touch $(RUNTIME_STAMP)

# After the runtime install pip only adds what is missing; the dev set
# includes the runtime, so its install also stands for the runtime stamp.
$(DEV_STAMP): requirements.txt requirements-dev.txt constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) -r requirements-dev.txt -c constraints.txt
	rm -f $(VENV)/.installed-*
	touch $(RUNTIME_STAMP) $(DEV_STAMP)

# The sandbox's own Python (requirements-sandbox.txt; docs/sandbox.md): a
# second virtualenv, never the project's. Made from Debian's Python where
# there is one: a sandbox running as an unprivileged user must be able to
# read the interpreter, which a Python under /root is not.
# Run as root, the sandboxes run as uid 65534, which must be able to search
# every directory above the environment: a checkout it cannot reach (under
# /root) gets its environment in /var/tmp, and .sandbox-python is a link
# to it (docs/sandbox.md, "Where it runs").
SANDBOX_ENV := .sandbox-python
SANDBOX_BASE_PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo $(PYTHON))
SANDBOX_HOME := $(shell if [ "$$(id -u)" != 0 ] || setpriv --reuid 65534 --regid 65534 --clear-groups test -x "$(CURDIR)" 2>/dev/null; then echo "$(CURDIR)/$(SANDBOX_ENV)"; else echo "/var/tmp/chatforge-sandbox-python-$$(echo "$(CURDIR)" | cksum | cut -d' ' -f1)"; fi)
SANDBOX_STAMP := $(SANDBOX_HOME)/.installed-$(shell cat requirements-sandbox.txt | cksum | cut -d' ' -f1)

$(SANDBOX_STAMP): requirements-sandbox.txt
	test -x $(SANDBOX_HOME)/bin/python || $(SANDBOX_BASE_PYTHON) -m venv $(SANDBOX_HOME)
	test "$(SANDBOX_HOME)" = "$(CURDIR)/$(SANDBOX_ENV)" || ln -sfn $(SANDBOX_HOME) $(SANDBOX_ENV)
	$(SANDBOX_HOME)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-sandbox.txt
	MPLCONFIGDIR=$(SANDBOX_HOME)/mplconfig $(SANDBOX_HOME)/bin/python -c "import matplotlib.pyplot"
	rm -f $(SANDBOX_HOME)/.installed-*
	touch $(SANDBOX_STAMP)

.PHONY: install-dev sandbox
## Runtime packages only (make run, make chat, the workers)
install: $(RUNTIME_STAMP)
## Runtime, test and benchmark packages (make test, make bench…)
install-dev: $(DEV_STAMP)

## Run ChatForge in embedded mode (no services needed) on http://$(HOST):$(PORT)/
run: install
	$(PY) manage.py migrate --noinput -v 0
	$(PY) manage.py create_demo_user --admin --instructions --base-url http://$(if $(filter 0.0.0.0 ::,$(HOST)),127.0.0.1,$(HOST)):$(PORT)
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

## Chat from the terminal as the demo user, printing the run live:
## make chat (reads messages from stdin) or make chat MESSAGE="What is 17*23?"
chat: install
	$(PY) manage.py chat $(if $(MESSAGE),"$(MESSAGE)")

## Test files run in TEST_PROCESSES processes at once (pytest-xdist; most of the
## suite waits on its servers, so more processes than cores pays off)
TEST_PROCESSES ?= 3

## Run the whole test suite (needs local Postgres, Redis and Debian's Chromium;
## starts the services if stopped, installs what is missing when it may)
test: install-dev services browser sandbox lint-imports
	$(PY) -m pytest -n $(TEST_PROCESSES) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

## Measure every test file's time and record it in tests/file_durations.json,
## which orders the files longest first (tests/support/file_order.py)
test-durations: install-dev services browser sandbox
	$(PY) -m pytest -n $(TEST_PROCESSES) --dist loadfile --no-loadscope-reorder --junitxml=.test-durations.xml $(PYTEST_ARGS); \
	status=$$?; $(PY) -m tests.support.file_order .test-durations.xml && rm -f .test-durations.xml; exit $$status

## The layers of docs/architecture.md: faces -> engine -> domain -> platform ->
## tools (contract in pyproject.toml; make test runs it first)
lint-imports: install-dev
	$(VENV)/bin/lint-imports

services:
	bash deploy/local/ensure-services.sh

browser:
	bash deploy/local/ensure-browser.sh

## bubblewrap and the sandbox's Python environment (the python tool, script tools)
sandbox: $(SANDBOX_STAMP)
	bash deploy/local/ensure-sandbox.sh

## Re-take the screenshots in docs/screenshots/ (the browser tests take them)
screenshots: install-dev services browser
	CHATFORGE_SCREENSHOTS_DIR=docs/screenshots $(PY) -m pytest tests/browser -q

## Re-pin every package after changing requirements*.txt (writes constraints.txt)
lock:
	rm -rf .venv-lock && $(PYTHON) -m venv .venv-lock
	.venv-lock/bin/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	(echo "# Every package of the dev/test environment, pinned (generated by 'make lock'; do not edit)."; \
	 .venv-lock/bin/pip freeze --exclude-editable | grep -v '^#') > constraints.txt
	rm -rf .venv-lock

## Benchmarks (results are written to docs/performance.md)
bench: install-dev services
	$(PY) -m bench.run

## Where one run's time goes: a timeline of its segments and its costliest
## statements, 30 runs one at a time (~1 minute; printed, see docs/performance.md)
bench-timeline: install-dev
	$(PY) -m bench.timeline --runs 30

## Fair scheduling: a user's backlog of 200 runs against another user's 5, with
## and without per-user caps, on private Postgres and Redis (~2 minutes)
bench-fairness: install-dev
	$(PY) -m bench.fairness

## The relay's read path alone: 10, 100 and 500 readers following their runs'
## streams on a private Redis (~40 seconds; printed, see docs/performance.md)
bench-relay: install-dev
	$(PY) -m bench.relay

## Heartbeat writes: 500 model turns held running at once (the model silent),
## on private Postgres and Redis with two gevent LLM workers; rows updated,
## statements and transactions per second in Postgres and commands per
## second in Redis, idle and with the steps running (~3 minutes; printed,
## see docs/performance.md "Heartbeats at 500 concurrent steps")
bench-heartbeat: install-dev
	$(PY) -m bench.heartbeat_writes $(HEARTBEAT_ARGS)

## A 50 MB file uploaded to POST /api/files/ of an embedded web process, three
## times: throughput and the process's peak RSS against its RSS before (~1
## minute; printed, see docs/files.md). FILE_UPLOAD_ARGS adds options
## (--storage s3: a bucket on moto's S3 server on loopback).
bench-file-upload: install-dev
	$(PY) -m bench.file_upload $(FILE_UPLOAD_ARGS)

## Documents read to text, in this process (no stack): a 100-page text PDF,
## DOCX of 4,000 and 32,000 paragraphs, an HTML page, XLSX of 10,000 to
## 100,000 cells, a PPTX, a zip bomb's refusal (~5 minutes; printed, see
## docs/files.md "Reading documents")
bench-file-reading: install-dev
	$(PY) -m bench.file_reading

## What a message's files add to POST -> 202: 60 messages without files and 60
## with five small documents each, alternating, on the benchmark's stack (~4
## minutes; printed, see docs/performance.md "Files")
bench-attachments: install-dev services
	$(PY) -m bench.attachments

## The sandbox of the python tool, with the real runner in this process:
## print(1) and imports one at a time and 4 at once, bubblewrap's own share,
## the sandboxes' memory (~3 minutes; printed, see docs/performance.md "The
## sandbox"). SANDBOX_BENCH_ARGS adds options (--engine: also through a stack).
bench-sandbox: install-dev sandbox
	$(PY) -m bench.sandbox $(SANDBOX_BENCH_ARGS)

## Load at a real model's pace: 1, 20 and 100 runs at once, each answer 10 s
## of one SSE chunk per token at 50 tokens/s, each run on its own socket, on
## private Postgres and Redis; one LLM worker per core (~3 minutes; figures are
## printed, see docs/performance.md). LOAD_ARGS adds options (--json FILE …).
bench-load: install-dev
	$(PY) -m bench.load --runs 1,20,100 --tokens-per-s 50 --llm 2 $(LOAD_ARGS)

## The same at 100 and at 200 tokens/s (fast providers)
bench-load-100: install-dev
	$(PY) -m bench.load --runs 1,20,100 --tokens-per-s 100 --llm 2 $(LOAD_ARGS)
bench-load-200: install-dev
	$(PY) -m bench.load --runs 1,20,100 --tokens-per-s 200 --llm 2 $(LOAD_ARGS)

## Load, steady: 500 runs of 20 s answers at 50 tokens/s started over 10 s, so
## that all 500 stream at once (25,000 tokens/s offered; ~2 minutes)
bench-load-steady: install-dev
	$(PY) -m bench.load --runs 500 --tokens-per-s 50 --ramp 10 --duration 20 --llm 2 $(LOAD_ARGS)

## Load, burst: 500 runs of 2 s answers at 50 tokens/s posted in the same
## instant (~1 minute)
bench-load-burst: install-dev
	$(PY) -m bench.load --runs 500 --tokens-per-s 50 --duration 2 --llm 2 $(LOAD_ARGS)

## Open WebUI 0.12.4 against a running ChatForge, by hand (not in CI): installs it
## once into .venv-openwebui/ (CPU-only torch), starts it on a free port and prints
## PASS/FAIL per check (docs/open-webui.md#interop-check). CHATFORGE_URL (default
## http://127.0.0.1:8000); CHATFORGE_TOKEN, or a token is made for a local ChatForge
interop-openwebui: install
	$(PY) -m interop.openwebui $(if $(CHATFORGE_URL),--chatforge-url $(CHATFORGE_URL))

# Distributed-mode processes (set DATABASE_URL, REDIS_URL, DJANGO_SECRET_KEY).
worker-llm: install
	$(VENV)/bin/celery -A chatforge worker -Q llm,default -P gevent -c 500 -n llm@%h -l INFO -E
worker-tools: install
	$(VENV)/bin/celery -A chatforge worker -Q tools -P prefork -c 4 -n tools@%h -l INFO -E
worker-tools-io: install
	$(VENV)/bin/celery -A chatforge worker -Q tools_io -P threads -c 16 -n tools-io@%h -l INFO -E
# Calls of sandboxed tools (python, script tools): needs bubblewrap and the
# sandbox's Python (make sandbox; deploy/README.md, "The sandbox worker").
worker-sandbox: install
	$(VENV)/bin/celery -A chatforge worker -Q sandbox -P prefork -c 4 -n sandbox@%h -l INFO -E
beat: install
	$(VENV)/bin/celery -A chatforge beat -l INFO
