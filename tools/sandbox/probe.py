"""Whether a sandbox can run on this host.

``probe`` starts one real sandbox: only that proves that bubblewrap is
installed, that the kernel lets this user make namespaces, and that the
sandbox's Python starts. A host where it fails runs no sandboxed tool; it
says why (the engine logs it and shows it in the admin) and never falls
back to running the code unsandboxed (docs/sandbox.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tools.sandbox.config import SandboxConfig
from tools.sandbox_limits import SandboxLimits
from tools.sandbox.runner import run_sandboxed


@dataclass(frozen=True)
class Availability:
    ok: bool
    reason: str = ""  # why not, in words an operator can act on


def probe(config: SandboxConfig, *, timeout_s: float = 30.0) -> Availability:
    """Whether a sandbox runs here: the parts are there, and one starts and
    prints what the sandbox's Python printed."""
    if config.bwrap_path() is None:
        return Availability(False, f"bubblewrap ({config.bwrap}) is not installed: apt-get install bubblewrap")
    if not config.python_env or not os.access(config.python, os.X_OK):
        return Availability(False, f"the sandbox's Python environment is missing at {config.python_env or '(unset)'}: "
                                   "make sandbox, or set CHATFORGE_SANDBOX_PYTHON")
    try:
        outcome = run_sandboxed(config, "import sys; print('sandbox', sys.version_info[0])",
                                limits=SandboxLimits(), wall_s=timeout_s)
    except OSError as exc:
        return Availability(False, f"bubblewrap could not be started: {exc}")
    with outcome:
        if outcome.setup_error:
            return Availability(False, f"bubblewrap cannot make a sandbox on this host: {outcome.setup_error}")
        if outcome.exit_code != 0 or outcome.stdout.strip() != "sandbox 3":
            detail = (outcome.stderr or outcome.stdout).strip()[-500:] or outcome.stopped or f"exit {outcome.exit_code}"
            return Availability(False, f"the sandbox's Python did not run: {detail}")
    return Availability(True)
