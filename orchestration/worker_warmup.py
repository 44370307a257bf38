"""An LLM worker imports the provider SDKs when it starts, not on its first turn.

The adapters import their SDK lazily (``chatforge/llm/resolution.py``), which keeps
the web process and the tools worker free of them. But importing one takes
0.5–1.1 s (openai, google-genai, anthropic; measured), and on the LLM worker
the first turn of each kind paid it — on the gevent pool an import blocks
the hub, so every turn streaming on that worker stalled with it. A worker
that consumes the ``llm`` queue therefore imports every adapter in
``worker_init``: before its pool starts, once per worker (prefork children
inherit the modules). Embedded mode keeps the lazy import: its worker
threads share the server process, whose start-up would wait.

A gevent worker (whatever its queues) also gets the HTTP pools' direct
idle-connection check (``providers/idle_connection_probe.py``) and
psycopg's cooperative wait (``chatforge/workers/gevent_db_wait.py``).

Only ``celery.signals`` is imported at module level: ``chatforge/celery.py``
imports this before Django is set up.
"""

from __future__ import annotations

import importlib
import logging
import time
from typing import Any

from celery.signals import worker_init, worker_shutdown

logger = logging.getLogger(__name__)

LLM_QUEUE = "llm"
ADAPTER_MODULES = (
    "chatforge.llm.providers.openai_compat",
    "chatforge.llm.providers.openai_responses",
    "chatforge.llm.providers.anthropic_adapter",
    "chatforge.llm.providers.gemini_adapter",
    "chatforge.llm.providers.ollama_adapter",
)


def import_provider_sdks() -> float:
    """Import every provider adapter (and so its SDK); the seconds it took."""
    started = time.perf_counter()
    for module in ADAPTER_MODULES:
        importlib.import_module(module)
    return time.perf_counter() - started


def consumes_llm_queue(worker: Any) -> bool:
    """Whether the starting worker takes model turns (``-Q`` names the llm
    queue, or no ``-Q``: every queue)."""
    return consumes_queue(worker, LLM_QUEUE)


def consumes_queue(worker: Any, queue: str) -> bool:
    queues = getattr(getattr(getattr(worker, "app", None), "amqp", None), "queues", None)
    return queues is not None and queue in queues.consume_from


@worker_init.connect
def _start_sandbox_host(sender: Any = None, **_: Any) -> None:
    """A sandbox worker probes its sandbox and starts reporting it
    (orchestration/services/sandbox_host.py)."""
    from django.conf import settings

    from orchestration.services import sandbox_host

    if settings.EMBEDDED or not consumes_queue(sender, sandbox_host.SANDBOX_QUEUE):
        return
    sandbox_host.start_on_worker()


@worker_shutdown.connect
def _stop_sandbox_host(sender: Any = None, **_: Any) -> None:
    from orchestration.services import sandbox_host

    if sandbox_host.availability() is not None:
        sandbox_host.stop_on_worker()


@worker_init.connect
def _import_provider_sdks(sender: Any = None, **_: Any) -> None:
    from django.conf import settings

    if settings.EMBEDDED or not consumes_llm_queue(sender):
        return
    took = import_provider_sdks()
    logger.info("provider SDKs imported at start-up", extra={"seconds": round(took, 2)})


@worker_init.connect
def _direct_idle_connection_probe(sender: Any = None, **_: Any) -> None:
    from chatforge.llm.providers import idle_connection_probe

    installed = idle_connection_probe.install()
    if installed:
        logger.info("HTTP pools check idle connections without the hub", extra={"backends": installed})


@worker_init.connect
def _cooperative_database_waits(sender: Any = None, **_: Any) -> None:
    from chatforge.workers import gevent_db_wait

    if gevent_db_wait.install():
        logger.info("database waits ask the operating system before the hub")
