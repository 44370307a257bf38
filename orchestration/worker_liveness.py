"""Every worker process takes part in liveness from its start
(``orchestration/services/heartbeat.py``): it renews its entry in the
registry, and may be elected to look for lost processes, before it runs any
step. Processes that run tasks are the ones that count: each prefork child,
and the main process of the gevent, threads and solo pools (a prefork main
process only hands tasks to its children and holds none).

Only ``celery.signals`` is imported at module level: ``chatforge/celery.py``
imports this before Django is set up.
"""

from __future__ import annotations

from typing import Any

from celery.signals import celeryd_after_setup, worker_process_init, worker_process_shutdown, worker_ready, worker_shutdown

_node: dict[str, str] = {}  # the Celery node name, set in the main process before it forks


@celeryd_after_setup.connect(weak=False)
def _remember_node(sender: Any = None, instance: Any = None, **_: Any) -> None:
    _node["name"] = str(sender)
    pool_cls = getattr(instance, "pool_cls", "")
    _node["pool"] = pool_cls if isinstance(pool_cls, str) else f"{pool_cls.__module__}.{pool_cls.__qualname__}"


def _start() -> None:
    from orchestration.services.heartbeat import start_worker_heartbeat
    from orchestration.services.lost_workers import redrive_lost_workers

    start_worker_heartbeat(_node.get("name") or "", redrive_lost_workers)


def _leave() -> None:
    from orchestration.services.heartbeat import leave_liveness_registry

    leave_liveness_registry()


@worker_process_init.connect(weak=False)
def _prefork_child_started(**_: Any) -> None:
    _start()


@worker_process_shutdown.connect(weak=False)
def _prefork_child_stopping(**_: Any) -> None:
    _leave()


def _runs_tasks_itself(consumer: Any) -> bool:
    """Not a prefork parent: by the pool the worker was set up with (``-P``,
    an alias or a class path), and by the consumer's pool where that is set."""
    from celery.concurrency.prefork import TaskPool as PreforkPool

    if "prefork" in _node.get("pool", "").lower():
        return False
    return not isinstance(getattr(consumer, "pool", None), PreforkPool)


@worker_ready.connect(weak=False)
def _worker_ready(sender: Any = None, **_: Any) -> None:
    if _runs_tasks_itself(sender):
        _start()


@worker_shutdown.connect(weak=False)
def _worker_stopping(**_: Any) -> None:
    _leave()  # in a prefork main process there is nothing of it to leave
