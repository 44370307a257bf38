"""This worker's sandbox: whether it can run one, its word to the catalog,
and the ``Sandbox`` a sandboxed tool's call gets (docs/sandbox.md).

A worker that consumes the ``sandbox`` queue probes at start-up (one real
sandbox, ``tools.sandbox.probe``) and reports the result every third of
``CHATFORGE_SANDBOX_REPORT_TTL_S`` (``chatforge.workers.sandbox_reports``),
from its main process; the pool processes it forks inherit the result. A
failed probe is logged with its reason and reported, so the catalog stops
offering sandboxed tools; nothing ever runs a sandboxed tool's code outside
a sandbox.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.conf import settings

from chatforge.workers import sandbox_reports
from tools.base import ToolPolicy
from tools.sandbox.config import SandboxConfig
from tools.sandbox.probe import Availability, probe
from tools.sandbox.runner import BwrapSandbox, Sandbox

logger = logging.getLogger(__name__)

SANDBOX_QUEUE = "sandbox"
_availability: Availability | None = None  # None: this process is no sandbox worker
_stop_reporting = threading.Event()


def sandbox_config() -> SandboxConfig:
    return SandboxConfig(
        bwrap=settings.CHATFORGE_SANDBOX_BWRAP,
        python_env=settings.CHATFORGE_SANDBOX_PYTHON,
        run_as=settings.CHATFORGE_SANDBOX_UID,
        tmp_dir=settings.CHATFORGE_SANDBOX_TMP_DIR,
    )


def start_on_worker() -> Availability:
    """Probe, report, and keep reporting until ``stop_on_worker``."""
    global _availability
    _availability = probe(sandbox_config())
    if _availability.ok:
        logger.info("this worker runs sandboxes", extra={"python_env": settings.CHATFORGE_SANDBOX_PYTHON})
    else:
        logger.error("this worker cannot run sandboxes: %s", _availability.reason)
    _report()
    _stop_reporting.clear()
    threading.Thread(target=_keep_reporting, name="sandbox-report", daemon=True).start()
    return _availability


def stop_on_worker() -> None:
    _stop_reporting.set()
    try:
        sandbox_reports.withdraw()
    except Exception as exc:  # Redis gone at shutdown: the report expires on its own
        logger.warning("could not withdraw this worker's sandbox report: %s", exc)


def availability() -> Availability | None:
    return _availability


def sandbox_for(policy: ToolPolicy, cancel_check: Callable[[], bool] | None) -> Sandbox | None:
    """The sandbox a call of a tool with ``policy`` runs its code in; None
    for a tool that is not sandboxed, or in a process that cannot run one."""
    if policy.sandbox is None or _availability is None or not _availability.ok:
        return None
    return BwrapSandbox(sandbox_config(), policy.sandbox, wall_s=wall_time(policy.timeout_s),
                        cancel_check=cancel_check)


def wall_time(timeout_s: float) -> float:
    """A little under the tool's timeout, so that the sandbox's own message
    (with what the code printed) reaches the model, not the executor's."""
    return max(0.5, timeout_s - min(1.0, timeout_s * 0.1))


def _report() -> None:
    assert _availability is not None
    try:
        sandbox_reports.report(_availability.ok, _availability.reason)
    except Exception as exc:  # Redis unreachable: the next report tries again
        logger.warning("could not report this worker's sandbox: %s", exc)


def _keep_reporting() -> None:
    while not _stop_reporting.wait(settings.CHATFORGE_SANDBOX_REPORT_TTL_S / 3):
        _report()
