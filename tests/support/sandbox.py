"""Sandboxes for tests: the real bubblewrap runner, under a uid of the test's
own, so that "nothing is left running" is a count of that uid's processes.

`make test` installs bubblewrap and builds .sandbox-python (`make sandbox`);
without them these tests fail with the reason rather than skip.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from tools.sandbox.config import SandboxConfig
from tools.sandbox.probe import probe

ROOT = Path(__file__).resolve().parents[2]
SANDBOX_PYTHON = os.environ.get("CHATFORGE_SANDBOX_PYTHON", str(ROOT / ".sandbox-python"))


def fresh_uid() -> int:
    """A uid no other process has: a root test runs its sandboxes as it."""
    return random.randrange(300_000, 900_000)


def sandbox_config(uid: int | None = None, **overrides) -> SandboxConfig:
    config = SandboxConfig(python_env=SANDBOX_PYTHON, run_as=uid if uid is not None else fresh_uid(), **overrides)
    availability = probe(config)
    assert availability.ok, f"the sandbox cannot run here: {availability.reason} (make sandbox)"
    return config


def processes_of(config: SandboxConfig) -> list[int]:
    """The pids of the sandbox's processes still alive: those of its uid when
    it has one of its own (a root test), else those of this user in another
    PID namespace."""
    own_uid = config.drops_to()
    my_ns = os.readlink("/proc/self/ns/pid")
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            uid = _real_uid(entry)
            if own_uid is not None:
                if uid == own_uid:
                    found.append(int(entry))
            elif uid == os.getuid() and os.readlink(f"/proc/{entry}/ns/pid") != my_ns:
                found.append(int(entry))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return found


def _real_uid(pid: str) -> int:
    """The process's real uid; a zombie (dead, not yet reaped) counts as gone."""
    uid = None
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("State:") and line.split()[1] in ("Z", "X"):
                raise ProcessLookupError(pid)
            if line.startswith("Uid:"):
                uid = int(line.split()[1])
    if uid is None:
        raise ProcessLookupError(pid)
    return uid
